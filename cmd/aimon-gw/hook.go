package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
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
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "policy", Usage: "policy directory (default: the embedded default policy)"},
				loadTimeoutFlag(), logLevelFlag(), cacheFlag("calls"),
			}, decisionLogFlags()...),
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

// hookWrap is how the hook hands Claude Code an allowed Bash command
// (cache is its --cache, passed on when it names a directory of its own):
// through this binary's exec under the policy, in its sandbox; nil when
// the binary cannot find itself or serves the embedded policy.
// Its decision log (decisions) is passed on too, for exec to protect.
func hookWrap(policyDir, cache string, decisions gateway.DecisionLog) *cchook.Wrap {
	bin, err := os.Executable()
	if err != nil || policyDir == "" {
		return nil
	}
	pol, err := filepath.Abs(policyDir)
	if err != nil {
		return nil
	}
	w := &cchook.Wrap{Binary: bin, Policy: pol}
	if cache != "" && cache != "off" {
		w.Cache, _ = filepath.Abs(cache)
	}
	if l, ok := decisions.(interface{ Path() string }); ok {
		w.Log, _ = filepath.Abs(l.Path())
	}
	return w
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
	in, err := cchook.ReadInput(data)
	if err != nil {
		return fail("%v", err)
	}
	if dir := os.Getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(dir) {
		in.Project = dir
	}
	gen, closeGen, err := reload.OnceCached(context.Background(), loadCache(p.Cache, p.Log), true, p.Policy, in.Cwd, p.LoadTimeout, discard)
	if err != nil {
		return fail("the policy does not load, so the call is blocked: %v", err)
	}
	defer closeGen()
	// An allowed Bash command runs through this binary's exec, in the
	// policy's sandbox; without its own path the hook cannot wrap it.
	out, err := json.Marshal(cchook.DecideWrapped(gen, in, gateway.Options{Logger: discard, Decisions: p.Decisions}, hookWrap(p.Policy, p.Cache, p.Decisions)))
	if err != nil {
		return fail("cannot encode the decision: %v.", err)
	}
	if _, err := fmt.Fprintln(p.Stdout, string(out)); err != nil {
		return fail("cannot write the decision: %v.", err)
	}
	return nil
}
