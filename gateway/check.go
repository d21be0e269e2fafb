package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"aimon.dev/gw/internal/front/policyref"
	"aimon.dev/gw/internal/front/replay"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/policy"
)

// CheckOptions configure a Checker. The zero value decides for the main
// agent in the policy's working directory.
type CheckOptions struct {
	// Surface is the chain the calls run on when their line names none,
	// main agent first, as aimon-gw check --surface; nil means ["agent"].
	// A line's own chain must begin with it (rule R5).
	Surface []string
	// Workdir is the directory relative paths resolve against; "" for the
	// policy's (policy.WithWorkdir).
	Workdir string
	// Logger receives the logs of what binding the policy's tools starts
	// (plugins, upstream servers); nil for none.
	Logger *slog.Logger
}

// A Checker decides calls under a policy and runs none of them, as
// aimon-gw check does: each call gets the one decision every front end
// gives it (rule R7), and an asked call is reported as asked, with no
// approval token, since nothing will run it. It keeps no decision log.
// Its methods are safe for concurrent use.
type Checker struct {
	inner   *igw.Gateway
	release func()
	mu      sync.Mutex
	session igw.Session // ReadSession's; nil for none
}

// NewChecker binds pol's tools as a gateway does (New), to decide calls of
// them: an upstream server's tools from their pins, else from the started
// server. A policy whose tools cannot be bound is an error and starts
// nothing; Close stops what NewChecker started.
func NewChecker(ctx context.Context, pol *policy.Policy, o CheckOptions) (*Checker, error) {
	ref := policyref.Of(pol)
	if ref == nil {
		return nil, errors.New("gateway.NewChecker needs a policy loaded by policy.Load or policy.LoadFS")
	}
	if o.Surface != nil && len(o.Surface) == 0 {
		return nil, errors.New("CheckOptions.Surface is empty; give a chain such as [\"agent\", \"subagent:reviewer\"], or nil for the main agent")
	}
	if o.Workdir == "" {
		o.Workdir = ref.Workdir
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	gen, release, err := reload.OnceLoaded(ctx, ref.Gen, false, ref.Timeout, log, nil)
	if err != nil {
		return nil, err
	}
	inner := igw.New(gen, igw.Options{Workdir: o.Workdir, Chain: o.Surface, Logger: log, ClientAsks: true})
	return &Checker{inner: inner, release: release}, nil
}

// Close stops what the policy's tools started.
func (c *Checker) Close() { c.release() }

// A Line is one line of the line protocol (PROTOCOL.md) as aimon-gw serve
// reads it: the calls it holds in any of its forms (a tool_use block, an
// assistant message, OpenAI's tool calls), and the surface it names.
type Line struct {
	calls   []igw.Call
	surface []string
}

// ReadLine reads one line as serve reads it. A line serve cannot read (not
// JSON, not an object, a field given twice, no call in it) is an error:
// the sentence serve would answer it with.
func ReadLine(data []byte) (Line, error) {
	calls, surface, err := igw.ReadCalls(data)
	if err != nil {
		return Line{}, err
	}
	return Line{calls: calls, surface: surface}, nil
}

// Calls are the line's calls as a Gateway's Decide and Run take them.
func (l Line) Calls() []Call {
	out := make([]Call, len(l.calls))
	for i, c := range l.calls {
		out[i] = Call{ID: c.ID, Name: c.Name, Input: c.Input, Surface: l.surface, Approvals: c.Approvals}
	}
	return out
}

// A CheckResult is the decision of one call a Checker decided; as JSON it
// is the verdict aimon-gw check prints: the tool, the chain and the
// decision.
type CheckResult struct {
	Tool    string   `json:"tool"`
	Surface []string `json:"surface"`
	Decision
}

// Check decides each call of the line, in order, on the chain the line
// names (bound by CheckOptions.Surface, rule R5), in the session
// ReadSession read when it read one. A call with no id is decided as the
// call "check".
func (c *Checker) Check(ctx context.Context, l Line) []CheckResult {
	c.mu.Lock()
	session := c.session
	c.mu.Unlock()
	out := make([]CheckResult, 0, len(l.calls))
	for _, call := range l.calls {
		if call.ID == "" {
			call.ID = "check"
		}
		call.Session = session
		chain, d := c.inner.DecideContext(ctx, l.surface, call)
		out = append(out, CheckResult{Tool: call.Name, Surface: chain, Decision: decision(chain, d)})
	}
	return out
}

// ReadSession reads the session the calls checked after it are decided in
// (rule P18), in place of any it read before, as aimon-gw check --session
// does: lines of the line protocol, each the user's words (a user line), a
// call (any call form) or the result of an earlier line's call (a
// tool_result block, or a user message of them).
// A result labels the session as the policy labels that call's result,
// and is what the policy's provenance of arguments reads; one that is an
// error labels nothing. name names r in sentences (NAME:LINE: ...). A line
// that is none of these, or a result of no earlier call, is an error that
// places it, and leaves the session as it was.
func (c *Checker) ReadSession(ctx context.Context, r io.Reader, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	s, err := replay.ReadSession(ctx, c.inner, r, name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.session = s
	c.mu.Unlock()
	return nil
}
