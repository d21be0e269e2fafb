package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/front/gatefiles"
	"aimon.dev/gw/internal/front/policyref"
	"aimon.dev/gw/internal/front/telemetry"
	"aimon.dev/gw/internal/runtime/decisionlog"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

// ErrPolicy is wrapped by Watch's error when the policy cannot be served:
// it does not load, or its tools cannot be bound. The error's text says
// where and why, as aimon-gw prints it.
var ErrPolicy = errors.New("the policy cannot be served")

// ErrSurface is wrapped by Watch's error when the gateway's Surface cannot
// run under the policy: a surface it does not declare, or lists with no
// tool in common (rules P9, R5).
var ErrSurface = errors.New("the surface cannot run under this policy")

// kindError is an error of a kind (ErrPolicy, ErrSurface) whose text is its
// cause's alone; a policy's problems are a policy.Errors too (errors.As).
type kindError struct{ kind, err error }

func (e kindError) Error() string { return e.err.Error() }
func (e kindError) Unwrap() []error {
	if public := policyref.LoadErrors(e.err); public != nil {
		return []error{e.kind, e.err, public}
	}
	return []error{e.kind, e.err}
}

// Watch returns a gateway serving the policy in dir ("" for the embedded
// default policy) that follows its files until Close or the end of ctx,
// which also cancels the MCP calls in flight, as aimon-gw serve
// and mcp run it (rule R3): a sound edit, once the files are unchanged for
// Options.Settle, is bound whole and goes in force in one swap for the
// calls that start after it, the calls in flight finishing under the
// policy they started with; an edit that does not load leaves the last
// good policy in force and is logged; SIGHUP asks for a reload. An
// upstream MCP server that is down at the start has its tools withheld
// until it answers, while the other tools answer at once.
//
// A watched gateway is one session, as one aimon-gw serve process or one
// MCP connection over standard input is: the results of its calls label
// it, and the policy's flows decide by those labels (rule P18). It counts
// the policy's limits (P19) where Options.State spends approvals.
//
// A policy that does not load, or whose tools cannot be bound, is an error
// that wraps ErrPolicy, and holds a policy.Errors (errors.As) when the
// policy's files are at fault; a Surface the policy cannot run, one that wraps
// ErrSurface; any other error is an option's. Nothing stays started then.
// Swap and Register are New's: a watched gateway's policy is its files'.
func Watch(ctx context.Context, dir string, opts Options) (*Gateway, error) {
	if opts.Surface == nil {
		opts.Surface = []string{"agent"}
	}
	if len(opts.Surface) == 0 {
		return nil, errors.New("Options.Surface is empty; give a chain such as [\"agent\", \"subagent:reviewer\"], or nil for the main agent")
	}
	if err := opts.oneLog(); err != nil {
		return nil, err
	}
	if opts.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("Options.Workdir is \"\" and the working directory cannot be read (%w); give one", err)
		}
		opts.Workdir = wd
	}
	g := newGateway(ctx, opts) // ctx's end cancels the MCP calls in flight, as Close does
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("the policy directory %s has no absolute path: %w", dir, err)
		}
		g.dir = abs
	}
	iopts, err := g.setup(ctx, "")
	if err != nil {
		g.closeAll()
		return nil, err
	}
	iopts.Limits = igw.LimitsIn(iopts.Approvals)
	iopts.Session = igw.NewSession() // the process, or the connection, is the session (rule P18)
	sandbox.Conceal(opts.Secrets)    // each caller's upstream credentials are the gateway's alone (rule R8)
	warnUnbounded(g.log)
	g.closers = append(g.closers, sandbox.Sweep) // after the runtime's close, which stops the plugins
	rt, err := reload.Start(ctx, reload.Options{Dir: dir, LoadTimeout: opts.LoadTimeout, Debounce: opts.Settle, Secrets: opts.Secrets,
		Gateway: iopts, Cache: loadcache.Open(opts.Cache, g.log), OnSwap: func(*igw.Gateway) { g.syncSurfaces() }})
	if err != nil {
		g.closeAll()
		return nil, kindError{ErrPolicy, err}
	}
	g.rt, g.inner, g.release = rt, rt.Gateway(), func() {}
	if err := g.inner.CheckChain(nil); err != nil {
		g.Close()
		return nil, kindError{ErrSurface, err}
	}
	return g, nil
}

// newGateway is the gateway of opts before its policy is bound; the MCP
// calls in flight are cancelled when ctx ends or at Close.
func newGateway(ctx context.Context, opts Options) *Gateway {
	// Every runtime's gate files of the user's home and the working
	// directory, as the hooks protect them (rule R9): an agent served here
	// must not plant a hook that Claude Code, Codex or Gemini CLI run there
	// later, outside every sandbox.
	home, _ := os.UserHomeDir()
	gatefiles.ProtectAll(gatefiles.Where{Home: home, Project: opts.Workdir, Env: os.Getenv})
	g := &Gateway{opts: opts, log: opts.Logger, registered: map[string]tools.Tool{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.ctx, g.cancel = context.WithCancel(ctx)
	return g
}

// oneLog refuses two decision logs.
func (o Options) oneLog() error {
	n := 0
	for _, given := range []bool{o.DecisionLog != "", o.Decisions != nil, o.OnDecision != nil} {
		if given {
			n++
		}
	}
	if n > 1 {
		return errors.New("two decision logs are given (Options.DecisionLog, Options.Decisions, Options.OnDecision); give one")
	}
	return nil
}

// setup makes what the options ask for beside the policy: the approvals
// and the store they are spent in, the decision log, the tracing; closeAll
// stops them. An error names its field after prefix ("Options.") when
// prefix is given, and is the cause's sentence alone when it is not.
func (g *Gateway) setup(ctx context.Context, prefix string) (igw.Options, error) {
	o := g.opts
	field := func(name string, err error) error {
		if prefix == "" {
			return err
		}
		return fmt.Errorf("%s%s: %w", prefix, name, err)
	}
	ticket.Conceal() // no tool of this process reads the key of exec's tickets (rule R8)
	approvals, err := igw.NewApprovals(o.ApprovalKey, o.ApprovalTTL)
	if err != nil {
		return igw.Options{}, fmt.Errorf("Options.ApprovalKey: %w", err)
	}
	if o.State != "" {
		st, err := state.Open(o.State, "")
		if err != nil {
			return igw.Options{}, field("State", err)
		}
		g.closers = append(g.closers, func() { st.Close() })
		if d := state.LocalDir(st); d != "" {
			sandbox.Conceal(d) // a tool that removed a spend could run an approval again (rule R8)
		} else if err := st.Ping(ctx); err != nil {
			// Not fatal: asked calls are refused until it answers, the rest served.
			g.log.Warn("approved calls will be refused until the state store answers", "cause", err)
		}
		approvals.SpendIn(st)
	}
	iopts := igw.Options{Workdir: o.Workdir, Chain: o.Surface, MaxLineBytes: o.MaxLineBytes, Logger: g.log, Approvals: approvals}
	switch {
	case o.DecisionLog != "":
		if g.dlog, err = decisionlog.Open(o.DecisionLog, decisionlog.Options{}); err != nil {
			return igw.Options{}, fmt.Errorf("Options.DecisionLog: %w; give a file the gateway can append to", err)
		}
		iopts.Decisions = g.dlog
		g.closers = append(g.closers, func() { g.logErr = g.dlog.Close() })
	case o.Decisions != nil:
		iopts.Decisions = o.Decisions.f
	case o.OnDecision != nil:
		g.rec = &recorder{fn: o.OnDecision}
		iopts.Decisions = g.rec
	}
	if o.TraceFromEnv {
		t, err := telemetry.FromEnv(ctx)
		if err != nil {
			return igw.Options{}, field("TraceFromEnv", err)
		}
		iopts.Trace, g.tracing = t.Tracer(), t
		g.closers = append(g.closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := t.Shutdown(ctx); err != nil {
				g.log.Warn("the last spans could not be exported", "error", err)
			}
		})
	}
	return iopts, nil
}

// closeAll stops what setup and Watch started, last first; the error is
// the decision log's, whose last records may not have been written.
func (g *Gateway) closeAll() error {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
	return g.logErr
}

// warnUnbounded says once, as a watched gateway starts, that sandboxed
// Bash calls will be refused: the gateway is root and can make no pids
// cgroup to bound their processes (rule R8).
func warnUnbounded(log *slog.Logger) {
	if err := sandbox.Bounded(); err != nil {
		log.Warn("sandboxed Bash calls will be refused", "cause", err)
	}
}

// syncSurfaces gives the MCP servers made so far the tools of the
// generation in force (tools/list_changed), after a reload.
func (g *Gateway) syncSurfaces() {
	g.mu.Lock()
	s := g.surfaces
	g.mu.Unlock()
	if s != nil {
		s.Sync()
	}
}

// watched is the policy a watched gateway has in force.
func (g *Gateway) watched() *policy.Policy {
	cur := g.inner.Current()
	p, _ := policyref.Make(policyref.Ref{Gen: cur.Generation, Dir: g.dir, Workdir: g.opts.Workdir, Timeout: g.opts.LoadTimeout}).(*policy.Policy)
	return p
}

// ReadApprovalKey reads an approval key (Options.ApprovalKey) from a file
// that is its owner's alone, as aimon-gw --approval-key does: a regular
// file with one name, owned by this process's user or root, of mode 0600
// (0440 or 0640 when its group is the process's), holding 32 or more
// bytes. The file is hidden from every tool the process runs (rule P15).
func ReadApprovalKey(path string) ([]byte, error) { return igw.ReadApprovalKey(path) }

// DefaultStateDir is the user's state directory of aimon-gw
// ($XDG_STATE_HOME/aimon-gw, or ~/.local/state/aimon-gw), where aimon-gw
// spends approvals sealed with a key of its --approval-key (Options.State).
func DefaultStateDir() (string, error) { return state.DefaultDir() }

// Cleanup removes what sandboxed commands of this process and of
// gateways no longer running left behind (empty pids cgroups). Close of a
// watched gateway does it; a program that exits without Close (a drain
// that ran out) calls it first.
func Cleanup() { sandbox.Sweep() }
