package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/front/replay"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
)

type checkParams struct {
	Policy  string
	Surface string
	Workdir string
	Call    string // a tool_use block as JSON, or "-" for Stdin
	// Principal is the caller, as mcp --listen knows it (a subject, or
	// claims as JSON): the calls run on the chain the policy maps it to.
	Principal string
	// Session is a file of the session's earlier lines (rule P18): the
	// user's words, calls and their results; "" for none.
	Session string
	// LoadTimeout bounds the policy load, and Ctx ends it (SIGTERM); nil
	// for never.
	LoadTimeout time.Duration
	Ctx         context.Context
	Stdin       io.Reader
	Stdout      io.Writer
}

func checkCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "say whether a call would be allowed, and why, without running it",
		ArgsUsage: "CALL (a tool_use block as JSON, or - to read it from standard input)",
		Flags: append(policyFlags(), principalFlag(),
			&cli.StringFlag{Name: "session", Usage: "decide in the session this file of earlier lines saw: the user's words, calls and their results (tool_result blocks), in the line protocol"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one call: aimon-gw check '{\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{...}}', or - to read calls from standard input")
			}
			return check(checkParams{
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				Call: c.Args().First(), Principal: c.String("principal"), Session: c.String("session"), LoadTimeout: c.Duration("load-timeout"), Ctx: c.Context, Stdin: stdin, Stdout: stdout,
			})
		},
	}
}

// checkReply is what check prints: the verdict and what it was about.
type checkReply struct {
	Tool    string   `json:"tool"`
	Surface []string `json:"surface"`
	rule.Decision
}

// check prints the gateway's verdict on a call as JSON; with "-" it reads
// JSON lines and prints one verdict a line. It exits 0 when every call
// would be allowed, 1 when one would be refused, 2 on errors.
func check(p checkParams) error {
	var calls [][]byte
	if p.Call == "-" {
		sc := bufio.NewScanner(p.Stdin)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
				calls = append(calls, bytes.Clone(line))
			}
		}
		if err := sc.Err(); err != nil {
			return fail(exitUsage, "reading the calls from standard input: %v", err)
		}
	} else {
		calls = [][]byte{[]byte(p.Call)}
	}
	// Each line is read as serve reads it (rule R7): a tool_use block, or
	// any other form of the line protocol, one verdict per call.
	// From standard input, a line serve cannot read gets the error serve
	// answers it with, in its place, and check reads on.
	type lineCall struct {
		gateway.Call
		surface []string
		unread  error
	}
	var parsed []lineCall
	for i, data := range calls {
		cs, surface, err := gateway.ReadCalls(data)
		switch {
		case err != nil && p.Call == "-":
			parsed = append(parsed, lineCall{unread: fmt.Errorf("line %d: %s", i+1, err)})
		case err != nil:
			return fail(exitUsage, "the call must be a tool_use block as JSON (or another call form that serve reads), such as {\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{\"file_path\":\"/tmp/a\"}}; it was read as serve reads it: %s", strings.TrimSuffix(err.Error(), "."))
		}
		for _, c := range cs {
			parsed = append(parsed, lineCall{Call: c, surface: surface})
		}
	}
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	gen, closeGen, err := reload.Once(orBackground(p.Ctx), p.Policy, workdir, p.LoadTimeout, discard)
	if err != nil {
		return fail(exitUsage, "%s", loadProblem(p.Policy, err))
	}
	defer closeGen()
	if p.Principal != "" {
		if chain, err = principalChain(gen.Generation, p.Principal, chain); err != nil {
			return err
		}
	}
	gw := gateway.New(gen, gateway.Options{Workdir: workdir, Chain: chain, Logger: discard, ClientAsks: true}) // an ask is reported as it is
	var session gateway.Session
	if p.Session != "" {
		if session, err = readSession(orBackground(p.Ctx), gw, p.Session); err != nil {
			return err
		}
	}
	refused := false
	single := p.Call != "-" && len(parsed) == 1
	for _, c := range parsed {
		if c.unread != nil {
			refused = true
			if err := json.NewEncoder(p.Stdout).Encode(map[string]string{"error": c.unread.Error() + "."}); err != nil {
				return fail(exitUsage, "%v", err)
			}
			continue
		}
		if c.ID == "" {
			c.ID = "check"
		}
		c.Call.Session = session
		chain, v := gw.Decide(c.surface, c.Call)
		refused = refused || !v.Allowed
		if err := printVerdict(p.Stdout, c.Name, chain, v, single); err != nil {
			return err
		}
	}
	if refused {
		return quiet(exitFinding)
	}
	return nil
}

// printVerdict prints a verdict as JSON, indented or on one line.
func printVerdict(w io.Writer, tool string, chain []string, v rule.Decision, indent bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(checkReply{Tool: tool, Surface: chain, Decision: v}); err != nil {
		return fail(exitUsage, "%v", err)
	}
	return nil
}
func resolveWorkdir(dir string) (string, error) {
	if dir == "" {
		dir, _ = os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fail(exitUsage, "--workdir %q: %v", dir, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fail(exitUsage, "--workdir %s is not a directory; give an existing directory", dir)
	}
	return abs, nil
}

func principalFlag() cli.Flag {
	return &cli.StringFlag{Name: "principal", Usage: "decide as this caller of mcp --listen: a subject, or its token's claims as JSON ({\"sub\":\"alice\",\"groups\":[\"docs\"],\"client_id\":\"cli\"})"}
}

// principalChain is the chain the policy maps the caller to, which must
// begin with the process chain (rule R5), as mcp --listen decides it; a
// caller it refuses is a finding (exit 1).
func principalChain(gen *policy.Generation, spec string, process []string) ([]string, error) {
	claims, err := policy.ParseClaims(spec)
	if err != nil {
		return nil, fail(exitUsage, "--principal: %v", err)
	}
	chain, _, err := gen.Principal(claims)
	if err != nil {
		return nil, fail(exitFinding, "%v", err)
	}
	process = policy.Rooted(process)
	if !policy.Extends(process, chain) {
		return nil, fail(exitFinding, "%s runs on %s, which does not begin with --surface %s", claims, strings.Join(chain, ","), strings.Join(process, ","))
	}
	return chain, nil
}

// readSession is the session the file of earlier lines saw (--session).
func readSession(ctx context.Context, gw *gateway.Gateway, path string) (gateway.Session, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fail(exitUsage, "--session: %v; give a file of the session's earlier lines", err)
	}
	defer f.Close()
	s, err := replay.ReadSession(ctx, gw, f, path)
	if err != nil {
		return nil, fail(exitUsage, "--session %v", err)
	}
	return s, nil
}
