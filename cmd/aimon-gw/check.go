package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/reload"
	"aimon.dev/gw/internal/rule"
)

type checkParams struct {
	Policy  string
	Surface string
	Workdir string
	Call    string // a tool_use block as JSON, or "-" for Stdin
	// LoadTimeout bounds the policy load.
	LoadTimeout time.Duration
	Stdin       io.Reader
	Stdout      io.Writer
}

func checkCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "say whether a call would be allowed, and why, without running it",
		ArgsUsage: "CALL (a tool_use block as JSON, or - to read it from standard input)",
		Flags:     policyFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("aimon-gw check takes one call: aimon-gw check '{\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{...}}', or - to read it from standard input.", exitUsage)
			}
			return check(checkParams{
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				Call: c.Args().First(), LoadTimeout: c.Duration("load-timeout"), Stdin: stdin, Stdout: stdout,
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

// check prints the gateway's verdict on one call as JSON; it exits 0 when
// the call would be allowed, 1 when it would be refused, 2 on errors.
func check(p checkParams) error {
	data := []byte(p.Call)
	if p.Call == "-" {
		var err error
		if data, err = io.ReadAll(p.Stdin); err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw check: reading the call from standard input: %v.", err), exitUsage)
		}
	}
	var call struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		// The line's own chain, bound by --surface as serve binds it (rule R5).
		Surface []string `json:"surface"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&call); err != nil || call.Name == "" {
		return cli.Exit("aimon-gw check: the call must be a tool_use block as JSON, with at least \"name\" and \"input\": {\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{\"file_path\":\"/tmp/a\"}}.", exitUsage)
	}
	chain, err := parseChain(p.Surface)
	if err != nil {
		return cli.Exit("aimon-gw check: "+err.Error()+".", exitUsage)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	gen, closeGen, err := reload.Once(context.Background(), p.Policy, workdir, p.LoadTimeout, discard)
	if err != nil {
		return cli.Exit(loadProblem(p.Policy, err), exitUsage)
	}
	defer closeGen()
	gw := gateway.New(gen, gateway.Options{Workdir: workdir, Chain: chain, Logger: discard})
	if call.ID == "" {
		call.ID = "check"
	}
	lineChain, err := gw.LineChain(call.Surface)
	if err != nil {
		v := rule.Refused(rule.R5, err.Error())
		return printVerdict(p.Stdout, call.Name, call.Surface, v)
	}
	return printVerdict(p.Stdout, call.Name, lineChain, gw.Check(lineChain, call.ID, call.Name, call.Input))
}

// printVerdict prints a verdict as JSON; a refusal exits 1.
func printVerdict(w io.Writer, tool string, chain []string, v rule.Decision) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(checkReply{Tool: tool, Surface: chain, Decision: v}); err != nil {
		return cli.Exit(fmt.Sprintf("aimon-gw check: %v.", err), exitUsage)
	}
	if !v.Allowed {
		return cli.Exit("", exitFinding)
	}
	return nil
}

func resolveWorkdir(dir string) (string, error) {
	if dir == "" {
		dir, _ = os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", cli.Exit(fmt.Sprintf("aimon-gw: --workdir %q: %v.", dir, err), exitUsage)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", cli.Exit(fmt.Sprintf("aimon-gw: --workdir %s is not a directory; give an existing directory.", abs), exitUsage)
	}
	return abs, nil
}
