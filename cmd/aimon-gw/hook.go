package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/cchook"
	"aimon.dev/gw/internal/loadcache"
	"aimon.dev/gw/internal/reload"
)

type hookParams struct {
	Policy      string
	LoadTimeout time.Duration
	Stdin       io.Reader
	Stdout      io.Writer
	Decisions   gateway.DecisionLog
	// Cache is the directory of compiled loads; "off" for none.
	Cache string
	Log   *slog.Logger
}

func hookCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "hook",
		Usage: "decide an agent runtime's tool call as its hook: aimon-gw hook claude-code",
		Subcommands: []*cli.Command{{
			Name:  "claude-code",
			Usage: "Claude Code's PreToolUse hook: a hook input on standard input, a decision on standard output",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "policy", Usage: "policy directory (default: the embedded default policy)"},
				loadTimeoutFlag(), logLevelFlag(), decisionLogFlag(),
				&cli.StringFlag{Name: "cache", Usage: "directory that keeps compiled policies between calls, verified before each use (default: the user's cache directory, aimon-gw); off for none"},
			},
			Action: func(c *cli.Context) error {
				log, err := logger(c)
				if err != nil {
					return cli.Exit(err.Error(), exitUsage)
				}
				dlog, err := decisionLog(c)
				if err != nil {
					return err
				}
				if dlog != nil {
					defer dlog.Close()
				}
				return hook(hookParams{Policy: c.String("policy"), LoadTimeout: c.Duration("load-timeout"), Stdin: stdin, Stdout: stdout, Decisions: dlogOrNil(dlog), Cache: c.String("cache"), Log: log})
			},
		}},
	}
}

// hook answers one Claude Code hook input. Any failure of the gateway
// itself exits 2 with one sentence on standard error, which Claude Code
// takes as a block: it never fails open, and never exits 1 (which Claude
// Code would take as a non-blocking error and run the tool).
func hook(p hookParams) error {
	fail := func(format string, args ...any) error {
		return cli.Exit("aimon-gw hook claude-code: "+fmt.Sprintf(format, args...), exitUsage)
	}
	data, err := io.ReadAll(io.LimitReader(p.Stdin, 16<<20))
	if err != nil {
		return fail("cannot read the hook input: %v.", err)
	}
	var in cchook.Input
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil || in.ToolName == "" {
		return fail("the hook input is not a PreToolUse input with a tool_name (%v); the call is blocked.", err)
	}
	if in.HookEventName != "" && in.HookEventName != "PreToolUse" {
		return fail("the hook input is for the %s event, and aimon-gw answers only PreToolUse; the call is blocked. Configure it under hooks.PreToolUse in settings.json.", in.HookEventName)
	}
	// An input without cwd is decided, and refused, by the one decision
	// (rule R7), so that the decision log records it.
	if st, err := os.Stat(in.Cwd); in.Cwd != "" && (err != nil || !st.IsDir() || !filepath.IsAbs(in.Cwd)) {
		return fail("the hook input's cwd %q is not an absolute directory; the call is blocked.", in.Cwd)
	}
	var cache *loadcache.Cache
	if p.Cache != "off" {
		// Without a cache directory the hook only loads afresh.
		if p.Cache == "" {
			p.Cache, _ = loadcache.DefaultDir()
		}
		if p.Cache != "" {
			cache = &loadcache.Cache{Dir: p.Cache, Log: p.Log}
		}
	}
	gen, closeGen, err := reload.OnceCached(context.Background(), cache, true, p.Policy, in.Cwd, p.LoadTimeout, discard)
	if err != nil {
		return fail("the policy does not load, so the call is blocked: %v", err)
	}
	defer closeGen()
	// An allowed Bash command runs through this binary's exec, in the
	// policy's sandbox; without its own path the hook cannot wrap it.
	var wrap *cchook.Wrap
	if bin, err := os.Executable(); err == nil && p.Policy != "" {
		if pol, err := filepath.Abs(p.Policy); err == nil {
			wrap = &cchook.Wrap{Binary: bin, Policy: pol}
		}
	}
	out, err := json.Marshal(cchook.DecideWrapped(gen, in, gateway.Options{Logger: discard, Decisions: p.Decisions}, wrap))
	if err != nil {
		return fail("cannot encode the decision: %v.", err)
	}
	if _, err := fmt.Fprintln(p.Stdout, string(out)); err != nil {
		return fail("cannot write the decision: %v.", err)
	}
	return nil
}
