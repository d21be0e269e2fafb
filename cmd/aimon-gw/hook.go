package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
)

type hookParams struct {
	gateway.HookConfig
	Stdin  io.Reader
	Stdout io.Writer
}

// hookUsage says what each runtime's hook reads and answers, in the order
// of gateway.Runtimes.
var hookUsage = map[string]string{
	"claude-code": "Claude Code's PreToolUse hook: a hook input on standard input, a decision on standard output",
	"codex":       "Codex's PreToolUse hook (config.toml [[hooks.PreToolUse]]): a hook input on standard input, a decision on standard output",
	"gemini-cli":  "Gemini CLI's BeforeTool hook (settings.json hooks.BeforeTool): a hook input on standard input, a decision on standard output",
}

func hookCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	var subs []*cli.Command
	for _, rt := range gateway.Runtimes {
		subs = append(subs, &cli.Command{
			Name:  rt,
			Usage: hookUsage[rt],
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "policy", Usage: "policy directory (default: the embedded default policy)"},
				loadTimeoutFlag(), logLevelFlag(), cacheFlag("calls"),
				&cli.StringFlag{Name: "state", Usage: "where the policy's limits are counted across hook calls: redis://HOST:PORT (or rediss://) to share the counts with a fleet (default: the user's state directory, which no tool may read or write)"},
			}, decisionLogFlags()...),
			Action: func(c *cli.Context) error {
				log, err := logger(c)
				if err != nil {
					return err
				}
				// An allowed command runs through this binary's exec, in
				// the policy's sandbox; without its own path the hook
				// cannot wrap it.
				bin, _ := os.Executable()
				return hook(c.Context, hookParams{HookConfig: gateway.HookConfig{Runtime: rt, Policy: c.String("policy"), LoadTimeout: c.Duration("load-timeout"),
					Cache: c.String("cache"), State: c.String("state"), DecisionLog: c.String("decision-log"), DecisionLogSync: c.Bool("decision-log-sync"),
					DecisionLogCalls: c.Bool("decision-log-calls"), DecisionLogContent: c.Bool("decision-log-content"), ExecBinary: bin, Logger: log},
					Stdin: stdin, Stdout: stdout})
			},
		})
	}
	return &cli.Command{
		Name:        "hook",
		Usage:       "decide an agent runtime's tool call as its hook: aimon-gw hook claude-code, codex or gemini-cli",
		Subcommands: subs,
	}
}

// hookHeap bounds the heap of a hook process whose collector waits
// (pauseGC): a record or an input far larger than any policy's is still
// collected, at this bound.
const hookHeap = 256 << 20

// pauseGC holds the collector off until the heap reaches hookHeap and
// returns what resumes it as it was. A hook answered from its record
// allocates a few MiB and exits: a collection there (it came in the first
// millisecond, beside the start-up's heap) cost more time than the rest of
// the decision did. A fresh load of the policy allocates as much as its
// CUE takes, so it runs with the collector resumed.
func pauseGC() (resume func()) {
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(limit, hookHeap))
	return func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
}

// hook answers one hook input of p.Runtime, through the gateway's one
// hook path (gateway.AnswerHook). Any failure of the gateway itself exits
// 2 with one sentence on standard error, which each runtime takes as a
// block: it never fails open, and never exits 1 (which Claude Code, Codex
// and Gemini CLI alike would take as a non-blocking error and run the
// tool).
func hook(ctx context.Context, p hookParams) error {
	data, err := io.ReadAll(io.LimitReader(p.Stdin, gateway.MaxHookInput+1))
	if err != nil {
		return fail(exitUsage, "cannot read the hook input: %v", err)
	}
	// Resumed before a fresh load of the policy.
	p.BeforeLoad = pauseGC()
	out, err := gateway.AnswerHook(ctx, p.HookConfig, data)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if _, err := fmt.Fprintln(p.Stdout, string(out)); err != nil {
		return fail(exitUsage, "cannot write the decision: %v", err)
	}
	return nil
}
