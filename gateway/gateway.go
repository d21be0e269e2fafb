package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/front/mcpfront"
	"aimon.dev/gw/internal/front/policyref"
	"aimon.dev/gw/internal/front/telemetry"
	"aimon.dev/gw/internal/runtime/decisionlog"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

// Options configure a Gateway. The zero value decides for the main agent
// in the policy's working directory, logs nowhere and keeps no decision log.
type Options struct {
	// Surface is the chain a call runs on when it names none, main agent
	// first: ["agent", "subagent:reviewer"], as aimon-gw --surface. Nil
	// means ["agent"]. A call's own Surface must begin with it (rule R5).
	Surface []string
	// Workdir is the directory tools run in and relative paths resolve
	// against; "" for the policy's (policy.WithWorkdir).
	Workdir string
	// Logger receives the gateway's logs; nil for none.
	Logger *slog.Logger
	// DecisionLog is a file every decided call is appended to as a JSON
	// line before its tool runs, and its result after (aimon-gw
	// --decision-log); "" for none. While it cannot be written, no call
	// is allowed.
	DecisionLog string
	// OnDecision, when set, is given every record the decision log would
	// take, in order; an error it returns makes the gateway allow no
	// further call, as a decision log that cannot be written does.
	OnDecision func(Record) error
	// ApprovalKey seals the tokens that a person's approval of an asked
	// call sends back (rule P15): 32 or more random bytes, shared by the
	// processes that must accept each other's tokens; nil for a key of
	// this gateway's own. ApprovalTTL is how long a token is valid (0: ten
	// minutes). A token runs its call once.
	ApprovalKey []byte
	ApprovalTTL time.Duration
	// ExecBinary is an aimon-gw binary, which Hook's answer to an allowed
	// shell command wraps it in (aimon-gw exec, in the policy's sandbox),
	// as aimon-gw hook does; "" answers the command as sent.
	ExecBinary string

	// Decisions is a decision log the program opened (OpenDecisionLog)
	// and closes itself, after the gateway: one it shares between
	// gateways, or that records what a forced exit cut off. At most one
	// of DecisionLog, Decisions and OnDecision is given.
	Decisions *DecisionLog
	// State is where approval tokens are spent, so that one runs its call
	// once across processes and restarts (rule R10), and where a watched
	// gateway counts the policy's limits (P19): a directory, or
	// redis://HOST:PORT (rediss:// for TLS) for a fleet, as aimon-gw
	// --state; "" for this process's memory. A store that does not answer
	// at the start is logged, and the calls that need it are refused
	// until it answers.
	State string
	// MaxLineBytes bounds one input line of Serve, and one frame of
	// ServeMCP; 0 for 16 MiB.
	MaxLineBytes int
	// TraceFromEnv traces each call's steps (decode, decide, run) as
	// OpenTelemetry spans, exported as the standard OTEL_* environment
	// variables say, as aimon-gw does; none when they name no exporter.
	// Close exports the spans left, within five seconds.
	TraceFromEnv bool

	// What Watch reads the policy with (New is given it loaded):
	// LoadTimeout bounds each load and the binding of its tools (0 for no
	// bound); Settle is how long the policy's files must be unchanged
	// before an edit is loaded, so that a change of several files goes in
	// force whole (0 for a second); Cache is the directory that keeps
	// compiled policies between starts, verified before each use, as
	// aimon-gw --cache ("" for the user's cache directory, "off" for
	// none), which no tool may write; Secrets is the directory of
	// per-caller secrets of upstream servers reached with each caller's
	// identity, which no tool may read.
	LoadTimeout time.Duration
	Settle      time.Duration
	Cache       string
	Secrets     string
	// Version is the version MCPServer and ServeMCP give in their
	// serverInfo, whose name is aimon-gw; "" for "aimon.dev/gw".
	Version string
}

// A Call is one tool call, as a front end read it.
type Call struct {
	// ID is the call's id (a tool_use id), recorded in the decision log;
	// "" for one the gateway numbers.
	ID string
	// Name is the tool's name, Input its input object as JSON (nil for {}).
	Name  string
	Input json.RawMessage
	// Surface is the chain the call runs on; nil for the gateway's
	// (Options.Surface). It must begin with the gateway's, and may only go
	// deeper (rule R5).
	Surface []string
	// Approvals are tokens a person gave for this call (rule P15), from an
	// earlier Decision's or Result's Approval; Decide ignores them.
	Approvals []string
	// Principal is who called, when the program knows; the decision log
	// records it.
	Principal string
}

// A Decision is what the gateway decides about a call before anything
// runs; as JSON it is the verdict aimon-gw check prints.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Ask is a refusal that a person's approval can turn into an allow
	// (rules P14, P15); Allowed is false with it. Approval is then the
	// token that approves this call (Call.Approvals).
	Ask      bool   `json:"ask,omitempty"`
	Approval string `json:"approval,omitempty"`
	// Reason is the sentence a model or operator reads; Rule the rule that
	// decided ("P9", "S4", ...).
	Reason string `json:"reason"`
	Rule   string `json:"rule,omitempty"`
	// Entries are the list entries that decided; EntryAt where each is
	// written (file:line:col); Effective every entry along the chain that
	// bears on the tool.
	Entries   []string `json:"entries,omitempty"`
	EntryAt   []string `json:"entry_at,omitempty"`
	Effective []string `json:"effective,omitempty"`
	// Violations are the input gate's sentences, whatever its mode
	// (Validation: "off", "warn" or "enforce").
	Violations []string `json:"violations,omitempty"`
	Validation string   `json:"validation,omitempty"`
	// MaxEffect is the chain's side-effect ceiling (P13); "" for none.
	MaxEffect string `json:"max_effect,omitempty"`
	// Sandbox is where the call's commands may write (R6), for a tool that
	// runs in one.
	Sandbox *tools.Sandbox `json:"sandbox,omitempty"`
	// Surface is the chain the call was decided on.
	Surface []string `json:"-"`
	// Input is the canonical call the decision was made on, which is what
	// runs (rule R7): path subjects absolute and cleaned, null members gone.
	Input tools.Input `json:"-"`
}

// A Result is what a call returned.
type Result struct {
	// Text is the whole answer (a refusal's sentence, too); IsError marks
	// a refusal or a failure.
	Text    string
	IsError bool
	// Structured is the result as a value the tool's output schema
	// describes, for a tool that gave one (MCP structuredContent).
	Structured any
	// Approval is set when the call needs a person's approval (rule P15):
	// the token to send back in Call.Approvals once the person gave it.
	Approval string
}

// A Record is one line of the decision log: a call decided and not run
// (Phase "decided"), a call decided to run ("running"), what it returned
// ("result"), or a program its command started that was refused where it
// started ("program").
type Record struct {
	Time       time.Time
	Phase      string
	CallID     string
	Tool       string
	Surface    []string
	Principal  string
	Allowed    bool
	Ask        bool
	Rule       string
	Entries    []string
	Violations []string
	Reason     string
	// Revision names the policy's files, Generation counts the policies
	// the gateway put in force.
	Revision   string
	Generation int64
	// ResultError, for a result, says whether the call failed.
	ResultError *bool
}

// A Gateway decides and runs calls under the policy in force. Its methods
// are safe for concurrent use.
type Gateway struct {
	inner *igw.Gateway
	opts  Options
	log   *slog.Logger
	dlog  *decisionlog.File
	rec   *recorder // OnDecision's
	seq   atomic.Int64
	// ctx ends the MCP calls in flight at Close.
	ctx    context.Context
	cancel context.CancelFunc

	// rt is the runtime that follows a watched gateway's directory (Watch);
	// nil for New's. closers stop what the options started, last first.
	rt      *reload.Runtime
	dir     string
	closers []func()
	logErr  error              // the decision log's Close's
	tracing *telemetry.Tracing // Options.TraceFromEnv's; nil for none

	mu         sync.Mutex // Swap, Register, Close and the MCP surfaces
	pol        *policy.Policy
	registered map[string]tools.Tool
	release    func() // stops what the generation in force started
	surfaces   *mcpfront.Surfaces
	closed     bool
}

// New returns a gateway serving pol: it binds every tool of the policy to
// its implementation (the built-ins, plugins it starts, upstream MCP
// servers, the tools Register adds), as aimon-gw check does. A policy whose
// tools cannot all be bound, or whose Surface cannot run, is an error and
// starts nothing. Close stops what New started.
func New(pol *policy.Policy, opts Options) (*Gateway, error) {
	ref := policyref.Of(pol)
	if ref == nil {
		return nil, errors.New("gateway.New needs a policy loaded by policy.Load or policy.LoadFS")
	}
	if opts.Surface == nil {
		opts.Surface = []string{"agent"}
	}
	if len(opts.Surface) == 0 {
		return nil, errors.New("Options.Surface is empty; give a chain such as [\"agent\", \"subagent:reviewer\"], or nil for the main agent")
	}
	if opts.Workdir == "" {
		opts.Workdir = ref.Workdir
	}
	if err := opts.oneLog(); err != nil {
		return nil, err
	}
	g := newGateway(context.Background(), opts)
	g.pol = pol
	iopts, err := g.setup(context.Background(), "Options.")
	if err != nil {
		g.closeAll()
		return nil, err
	}
	gen, release, err := g.provision(pol)
	if err != nil {
		g.closeAll()
		return nil, err
	}
	g.inner, g.release = igw.New(gen, iopts), release
	if err := g.inner.CheckChain(nil); err != nil {
		g.inner.Close()
		release()
		g.closeAll()
		return nil, fmt.Errorf("the surface %v cannot run under this policy: %w", opts.Surface, err)
	}
	return g, nil
}

// provision binds pol's tools, with the tools registered in process; the
// caller holds g.mu or is New.
func (g *Gateway) provision(pol *policy.Policy) (*provision.Generation, func(), error) {
	ref := policyref.Of(pol)
	if ref == nil {
		return nil, nil, errors.New("the policy was not loaded by policy.Load or policy.LoadFS")
	}
	ctx := context.Background()
	registered := make(map[string]tools.Tool, len(g.registered))
	for name, t := range g.registered {
		registered[name] = t
	}
	gen, release, err := reload.OnceLoaded(ctx, ref.Gen, false, ref.Timeout, g.log, func(r provision.Registry) {
		r["external"] = goKind{registered: registered, other: r["external"]}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the policy's tools cannot be bound: %w", err)
	}
	return gen, release, nil
}

// Swap puts pol in force for every call that starts after it returns;
// the calls in flight finish under the policy they started with, which is
// then released (rule R3). A policy whose tools cannot be bound is an
// error, and leaves the policy in force as it was.
func (g *Gateway) Swap(pol *policy.Policy) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.swappable("Swap"); err != nil {
		return err
	}
	return g.swapLocked(pol)
}

// swappable says why the caller (Swap, Register) cannot change the policy
// in force; the caller holds g.mu.
func (g *Gateway) swappable(what string) error {
	switch {
	case g.closed:
		return errors.New("the gateway is closed")
	case g.rt != nil:
		return fmt.Errorf("%s is for a gateway made by New: this one follows its policy directory (Watch), whose edits go in force as they are saved", what)
	}
	return nil
}

func (g *Gateway) swapLocked(pol *policy.Policy) error {
	gen, release, err := g.provision(pol)
	if err != nil {
		return err
	}
	old, oldRelease := g.inner.Current(), g.release
	g.inner.Swap(gen)
	g.pol, g.release = pol, release
	if g.surfaces != nil {
		g.surfaces.Sync()
	}
	go func() { <-old.Released(); oldRelease() }() // once its last call is done
	return nil
}

// Register binds t, a tool that runs in this process, to the policy's
// tool name, which the policy declares as a tool of the Go program
// (external: "go") with its input schema: its calls are decided as every
// call is, and t runs the allowed ones (rule C1). It holds for the policy
// in force and every one Swap puts in force after it.
func (g *Gateway) Register(name string, t tools.Tool) error {
	if t == nil {
		return fmt.Errorf("Register(%q) was given no tool", name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.swappable("Register"); err != nil {
		return err
	}
	def := policyref.Of(g.pol).Gen.Tools[name]
	switch {
	case def == nil:
		return fmt.Errorf("the policy defines no tool %s; declare it with external: \"go\" and its input schema, then Register it", name)
	case def.External != goRuntime:
		return fmt.Errorf("the policy's tool %s is implemented by a %s, not by this program; declare it with external: \"go\" to Register it", name, def.Kind())
	}
	prev, had := g.registered[name]
	g.registered[name] = t
	if err := g.swapLocked(g.pol); err != nil {
		if had {
			g.registered[name] = prev
		} else {
			delete(g.registered, name)
		}
		return err
	}
	return nil
}

// Close stops the gateway: the calls in flight over MCP are cancelled,
// the others finish, and once they have, what the policy's tools started
// is stopped and the decision log closed.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	// Not held while what runs is stopped: a watched gateway's reload
	// that ends meanwhile syncs the MCP surfaces under it.
	g.mu.Unlock()
	g.cancel()
	if g.rt != nil {
		g.rt.Close() // the watcher, the generation in force, what it started
	} else {
		cur := g.inner.Current()
		g.inner.Close()
		<-cur.Released()
		g.release()
	}
	return g.closeAll()
}

// Policy is the policy in force.
func (g *Gateway) Policy() *policy.Policy {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.rt != nil {
		return g.watched()
	}
	return g.pol
}

// Decide decides c as every front end does, without running it (rule R7):
// the chain (R5), the tool (P9, P13), its input (S4, S9), its canonical
// form and the permission lists (P1–P14). It is recorded in the decision
// log, and has no other effect: c.Approvals are not spent.
func (g *Gateway) Decide(ctx context.Context, c Call) Decision {
	ic := g.call(c)
	ic.Approvals = nil // spending one is Run's
	chain, d := g.inner.DecideContext(ctx, c.Surface, ic)
	return decision(chain, d)
}

// Run decides c as Decide does and, when it is allowed, runs it; a refused
// call is an error Result with the decision's sentence. An asked call runs
// when c.Approvals holds a token a person gave for it; otherwise its
// Result carries the token to ask for (Result.Approval).
func (g *Gateway) Run(ctx context.Context, c Call) Result {
	chain, err := g.inner.LineChain(c.Surface)
	if err != nil {
		// The one decision refuses it (R5) and records it; the internal
		// call trusts its chain, as a front end's own.
		return Result{Text: g.Decide(ctx, c).Reason, IsError: true}
	}
	r := g.inner.CallApproved(ctx, chain, g.call(c))
	return Result{Text: r.Text, IsError: r.IsError, Structured: r.Structured, Approval: r.Approval}
}

// Serve answers the line protocol (PROTOCOL.md) as aimon-gw serve does:
// it reads calls from r, one line each, and writes one reply line to w
// for each, in order, until r ends or ctx is done; only replies are
// written to w. It returns nil at the end of input or when ctx ends, or
// the error that stopped reading or writing.
func (g *Gateway) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	return g.inner.Serve(ctx, r, w)
}

// call is c for the internal gateway: an id when it has none, {} for no
// input.
func (g *Gateway) call(c Call) igw.Call {
	id := c.ID
	if id == "" {
		id = "go_" + strconv.FormatInt(g.seq.Add(1), 10)
	}
	in := c.Input
	if len(in) == 0 || string(in) == "null" {
		in = json.RawMessage("{}")
	}
	return igw.Call{ID: id, Name: c.Name, Input: in, Approvals: c.Approvals, Principal: c.Principal}
}

// decision converts the internal decision.
func decision(chain []string, d rule.Decision) Decision {
	return Decision{Allowed: d.Allowed, Ask: d.Ask, Approval: d.Approval, Reason: d.Reason, Rule: string(d.Rule),
		Entries: d.Entries, EntryAt: policyref.OwnPlaces(d.EntryAt), Effective: d.Effective, Violations: d.Violations, Validation: string(d.Mode),
		MaxEffect: d.Ceiling, Sandbox: d.Sandbox, Surface: chain, Input: d.Input}
}

// recorder is OnDecision as the internal gateway's decision log: the
// first error stops every later call (fail closed, rule R10).
type recorder struct {
	fn  func(Record) error
	mu  sync.Mutex
	err error
}

func (r *recorder) Log(rec decisionlog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.err = r.fn(Record{Time: rec.Time, Phase: rec.Phase, CallID: rec.CallID, Tool: rec.Tool, Surface: rec.Surface, Principal: rec.Principal,
		Allowed: rec.Allowed, Ask: rec.Ask, Rule: string(rec.Rule), Entries: rec.Entries, Violations: rec.Violations, Reason: rec.Reason,
		Revision: rec.Revision, Generation: rec.Generation, ResultError: rec.ResultError})
	return r.err
}

func (r *recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
