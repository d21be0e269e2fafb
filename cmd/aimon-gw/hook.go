package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/codexhook"
	"aimon.dev/gw/internal/front/geminihook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
)

type hookParams struct {
	// Runtime is the agent runtime whose hook this is (hookRuntimes).
	Runtime     string
	Policy      string
	LoadTimeout time.Duration
	Stdin       io.Reader
	Stdout      io.Writer
	Decisions   gateway.DecisionLog
	// Cache is the directory of compiled loads; "off" for none.
	Cache string
	// State is where the policy's limits are counted (--state): "" for
	// the user's state directory, or redis://… for a fleet's.
	State string
	Log   *slog.Logger
}

type hookRuntime struct {
	name, usage string
	read        func([]byte) (cchook.Input, error)
	decide      func(*provision.Generation, cchook.Input, gateway.Options, *cchook.Wrap) any
}

// hookRuntimes are the runtimes aimon-gw answers as a hook, each with how
// it reads an input and answers a decision.
var hookRuntimes = []hookRuntime{
	{"claude-code", "Claude Code's PreToolUse hook: a hook input on standard input, a decision on standard output",
		cchook.ReadInput, func(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) any {
			return cchook.DecideWrapped(gen, in, opts, wrap)
		}},
	{codexhook.Runtime, "Codex's PreToolUse hook (config.toml [[hooks.PreToolUse]]): a hook input on standard input, a decision on standard output",
		codexhook.ReadInput, func(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) any {
			return codexhook.Decide(gen, in, opts, wrap)
		}},
	{geminihook.Runtime, "Gemini CLI's BeforeTool hook (settings.json hooks.BeforeTool): a hook input on standard input, a decision on standard output",
		geminihook.ReadInput, func(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) any {
			return geminihook.Decide(gen, in, opts, wrap)
		}},
}

func hookCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	var subs []*cli.Command
	for _, rt := range hookRuntimes {
		subs = append(subs, &cli.Command{
			Name:  rt.name,
			Usage: rt.usage,
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
				dlog, err := decisionLog(c)
				if err != nil {
					return err
				}
				if dlog != nil {
					defer dlog.Close()
				}
				return hook(hookParams{Runtime: rt.name, Policy: c.String("policy"), LoadTimeout: c.Duration("load-timeout"), Stdin: stdin, Stdout: stdout, Decisions: dlogOrNil(dlog), Cache: c.String("cache"), State: c.String("state"), Log: log})
			},
		})
	}
	return &cli.Command{
		Name:        "hook",
		Usage:       "decide an agent runtime's tool call as its hook: aimon-gw hook claude-code, codex or gemini-cli",
		Subcommands: subs,
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
	w := &cchook.Wrap{Binary: bin, Policy: pol, Seal: sealTicket()}
	if cache != "" && cache != "off" {
		w.Cache, _ = filepath.Abs(cache)
	}
	if l, ok := decisions.(interface{ Path() string }); ok {
		w.Log, _ = filepath.Abs(l.Path())
	}
	return w
}

// sealTicket seals exec's tickets with the key of the user's state
// directory, made on the first call that needs one (rule P16); the HTTP
// hook (mcp --listen) calls it from many requests at once.
func sealTicket() func(ticket.Binding) (string, error) {
	var (
		mu sync.Mutex
		s  *ticket.Sealer
	)
	return func(b ticket.Binding) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if s == nil {
			var err error
			if s, err = ticket.NewSealer(); err != nil {
				return "", err // tried again on the next call
			}
		}
		return s.Seal(b), nil
	}
}

// hookState is where a command hook keeps what outlives its process: the
// counts of the policy's limits (rule P19) and what its sessions have read
// (rule P18). Each call is a process of its own, so not in memory, but in
// the user's state directory (dir), locked between processes and
// concealed from every tool, or in the fleet's Redis (spec). A directory
// of the user's choosing is refused: the sandbox of the commands the hook
// lets run conceals only the state directory, and a command that could
// write there could spend the counts back, or reset a session.
func hookState(spec, dir string) (state.Store, func(), error) {
	if spec != "" && !strings.HasPrefix(spec, "redis://") && !strings.HasPrefix(spec, "rediss://") {
		return nil, nil, fmt.Errorf("--state %q is not a redis:// or rediss:// URL; the hook keeps its state in Redis, or without --state in the user's state directory %s", spec, dir)
	}
	if spec == "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("the state directory %s, where the policy's limits are counted and sessions kept, cannot be made: %v", dir, err)
		}
		// One another user made (in /var/tmp, for nobody) could have its
		// counts spent back by them.
		if err := ticket.OwnDir(dir); err != nil {
			return nil, nil, err
		}
	}
	st, err := state.Open(spec, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("the hook's state cannot be kept: %v", err)
	}
	return st, func() { st.Close() }, nil
}

// maxHookInput bounds a hook input: a call, a result, a user's prompt.
const maxHookInput = 16 << 20

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

// hook answers one hook input of p.Runtime. Any failure of the gateway
// itself exits 2 with one sentence on standard error, which each runtime
// takes as a block: it never fails open, and never exits 1 (which Claude
// Code, Codex and Gemini CLI alike would take as a non-blocking error and
// run the tool).
func hook(p hookParams) error {
	i := slices.IndexFunc(hookRuntimes, func(r hookRuntime) bool { return r.name == p.Runtime })
	if i < 0 {
		return fail(exitUsage, "no such runtime")
	}
	data, err := io.ReadAll(io.LimitReader(p.Stdin, maxHookInput+1))
	if err != nil {
		return fail(exitUsage, "cannot read the hook input: %v", err)
	}
	if len(data) > maxHookInput {
		// Cut, it would be refused as JSON that does not end.
		return fail(exitUsage, "the hook input is more than %d MiB, which the hook does not read; it is blocked. A prompt or a call that large is better given as a file", maxHookInput>>20)
	}
	in, err := hookRuntimes[i].read(data)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	// No tool reads the key that seals exec's tickets, nor the limits'
	// counts kept beside it (rule R8).
	stateDir := ticket.Conceal()
	if dir := os.Getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(dir) {
		in.Project = dir
	}
	// The policy's ./ patterns are read against the project while Claude
	// Code's shell is in it: a cd into a subdirectory (which carries over)
	// narrows none of them, as Claude Code reads its own rules against the
	// directory it started in.
	workdir := in.Cwd
	if in.Project != "" && strings.HasPrefix(in.Cwd, strings.TrimSuffix(in.Project, "/")+"/") {
		workdir = in.Project
	}
	cache := loadCache(p.Cache, p.Log)
	if cache != nil {
		cache.Fresh = pauseGC()
	}
	gen, closeGen, err := reload.OnceCached(context.Background(), cache, true, p.Policy, workdir, p.LoadTimeout, discard)
	if err != nil {
		return fail(exitUsage, "the policy does not load, so the call is blocked: %v", err)
	}
	defer closeGen()
	opts := gateway.Options{Logger: discard, Decisions: p.Decisions}
	if len(gen.Limits) > 0 || gen.Session != nil || len(gen.Provenance) > 0 {
		st, closeState, err := hookState(p.State, stateDir)
		switch {
		case err != nil && len(gen.Limits) > 0:
			return fail(exitUsage, "%v, so the call is blocked", err)
		case err != nil:
			// Each call a flow binds is refused, saying so (rule P18).
			opts.Session = cchook.Session(gen, cchook.Unreachable(err), p.Runtime, "", in)
		default:
			defer closeState()
			if len(gen.Limits) > 0 {
				opts.Limits = st.(state.Limiter)
			}
			// What the session has read outlives this process (rule P18).
			opts.Session = cchook.Session(gen, state.SessionsOf(st), p.Runtime, "", in)
		}
	}
	// Named in a log that records calls under any policy, for replay.
	opts.Session = cchook.Named(opts.Session, p.Decisions, p.Runtime, "", in)
	if in.HookEventName == cchook.UserPromptSubmit {
		// The prompt is the user's words (rule P18), and proceeds.
		_, err := fmt.Fprintln(p.Stdout, string(cchook.Prompt(gen, in, opts)))
		return err
	}
	if in.HookEventName == cchook.PostToolUse {
		out, err := cchook.Post(gen, in, opts)
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		_, err = fmt.Fprintln(p.Stdout, string(out))
		return err
	}
	// An allowed command runs through this binary's exec, in the policy's
	// sandbox; without its own path the hook cannot wrap it.
	answer := hookRuntimes[i].decide(gen, in, opts, hookWrap(p.Policy, p.Cache, p.Decisions))
	out, err := json.Marshal(answer)
	if err != nil {
		return fail(exitUsage, "cannot encode the decision: %v", err)
	}
	if _, err := fmt.Fprintln(p.Stdout, string(out)); err != nil {
		return fail(exitUsage, "cannot write the decision: %v", err)
	}
	return nil
}
