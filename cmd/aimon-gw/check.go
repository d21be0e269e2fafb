package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/policy"
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

// check prints the gateway's verdict on a call as JSON; with "-" it reads
// JSON lines and prints one verdict a line. It exits 0 when every call
// would be allowed, 1 when one would be refused, 2 on errors: a call or a
// line it cannot read among them, since a verdict on the rest would pass
// a corpus that was not checked whole.
func check(p checkParams) error {
	// Each line is read as serve reads it (rule R7): a tool_use block, or
	// any other form of the line protocol, one verdict per call; every
	// line is read before any is decided.
	var lines []gateway.Line
	if p.Call == "-" {
		sc := bufio.NewScanner(p.Stdin)
		sc.Buffer(nil, 16<<20)
		for n := 1; sc.Scan(); n++ {
			data := bytes.TrimSpace(sc.Bytes())
			if len(data) == 0 {
				continue
			}
			l, err := gateway.ReadLine(data)
			if err != nil {
				return fail(exitUsage, "line %d of standard input cannot be read as serve reads it, so no call was decided: %s", n, strings.TrimSuffix(err.Error(), "."))
			}
			lines = append(lines, l)
		}
		if err := sc.Err(); err != nil {
			return fail(exitUsage, "reading the calls from standard input: %v", err)
		}
	} else {
		l, err := gateway.ReadLine([]byte(p.Call))
		if err != nil {
			return fail(exitUsage, "the call must be a tool_use block as JSON (or another call form that serve reads), such as {\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{\"file_path\":\"/tmp/a\"}}; it was read as serve reads it: %s", strings.TrimSuffix(err.Error(), "."))
		}
		lines = append(lines, l)
	}
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	ctx := orBackground(p.Ctx)
	pol, err := policy.Load(ctx, p.Policy, policy.WithWorkdir(workdir), policy.WithTimeout(p.LoadTimeout))
	if err != nil {
		return fail(exitUsage, "%s", loadProblem(p.Policy, err))
	}
	if p.Principal != "" {
		if chain, err = principalChain(pol, p.Principal, chain); err != nil {
			return err
		}
	}
	ck, err := gateway.NewChecker(ctx, pol, gateway.CheckOptions{Surface: chain, Workdir: workdir, Logger: discard})
	if err != nil {
		return fail(exitUsage, "%s", loadProblem(p.Policy, err))
	}
	defer ck.Close()
	if p.Session != "" {
		if err := readSession(ctx, ck, p.Session); err != nil {
			return err
		}
	}
	refused := false
	for _, l := range lines {
		rs := ck.Check(ctx, l)
		single := p.Call != "-" && len(rs) == 1
		for _, r := range rs {
			refused = refused || !r.Allowed
			if err := printVerdict(p.Stdout, r, single); err != nil {
				return err
			}
		}
	}
	if refused {
		return quiet(exitFinding)
	}
	return nil
}

// printVerdict prints a verdict as JSON, indented or on one line.
func printVerdict(w io.Writer, r gateway.CheckResult, indent bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(r); err != nil {
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
func principalChain(pol *policy.Policy, spec string, process []string) ([]string, error) {
	claims, err := policy.ParsePrincipal(spec)
	if err != nil {
		return nil, fail(exitUsage, "--principal: %v", err)
	}
	chain, err := pol.PrincipalSurface(claims)
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
func readSession(ctx context.Context, ck *gateway.Checker, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fail(exitUsage, "--session: %v; give a file of the session's earlier lines", err)
	}
	defer f.Close()
	if err := ck.ReadSession(ctx, f, path); err != nil {
		return fail(exitUsage, "--session %v", err)
	}
	return nil
}
