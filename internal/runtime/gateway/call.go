package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// prepared is a call whose tool, effective list and input are known well
// enough to tell whether it may join a parallel batch. When the call was
// decided before its input is gated (refused, or a client's own tool),
// settled holds that decision.
type prepared struct {
	call
	chain   []string
	cur     *provision.Generation
	tool    *policy.Tool
	eff     *allow.Effective
	ceil    ceiling
	input   tools.Input
	settled *rule.Decision
	// at is when the call's decision began, when that was read (the
	// limits' clock, rule P19); zero otherwise.
	at time.Time
	// labels and text are what its result gave the session and returned,
	// for the decision log's Result record (rule P18).
	labels []string
	text   *string
}

func (p *prepared) settle(d rule.Decision) { p.settled = &d }

// prepare finds the tool and checks that the surface lists it (rule P9).
// eff is the chain's effective list, computed once per line; err is why
// the chain cannot run.
func (g *Gateway) prepare(cur *provision.Generation, chain []string, eff *allow.Effective, ceil ceiling, chainErr error, c call) prepared {
	p := prepared{call: c, chain: chain, cur: cur, eff: eff, ceil: ceil}
	if chainErr != nil {
		p.settle(rule.Refused(rule.P11, notExecuted(chainErr.Error())))
		return p
	}
	t, ok := cur.Tools[c.Name]
	if !ok {
		if g.opts.ClientTools != "" {
			p.settle(clientTool(cur, chain, g.opts.ClientTools, c.Name))
			return p
		}
		p.settle(rule.Refused(rule.P9, unknownTool(c.Name, listed(cur, eff, ceil))))
		return p
	}
	p.tool = t
	if code, why := t.Withheld(); why != "" {
		p.settle(rule.Refused(code, notExecuted(why)))
		return p
	}
	if policy.Above(t.Effect, ceil.effect) {
		// Neither listed nor allowed, whatever the lists say (rule P13).
		d := rule.Refused(rule.P13, aboveCeiling(t.Name, t.Effect, ceil.effect, ceil.by))
		d.Ceiling = ceil.effect
		p.settle(d)
		return p
	}
	if !eff.Listed(c.Name) {
		// Not allowed, a different sentence from unknown (rule P9).
		p.settle(eff.Unlisted(c.Name))
		return p
	}
	if len(c.Input) == 0 && c.decoded == nil {
		p.settle(rule.Refused(rule.R2, noInput(c.Name)))
		return p
	}
	if c.inputErr != nil {
		p.settle(rule.Refused(rule.S4, badInput(c.Name, c.inputErr)))
		return p
	}
	in := c.decoded
	if in == nil {
		var err error
		if in, err = gate.Decode(c.Input, gate.DefaultLimits); err != nil {
			p.settle(rule.Refused(rule.S4, badInput(c.Name, err)))
			return p
		}
	}
	p.input = in
	return p
}

// ceiling is a chain's side-effect ceiling (rule P13) and the surface
// that sets it; effect "" is none.
type ceiling struct{ effect, by string }

func ceilingOf(cur *provision.Generation, chain []string) ceiling {
	e, by := cur.Ceiling(chain)
	return ceiling{e, by}
}

// listed is the names of the tools the surface may use, sorted: those with
// an entry (rule P9) within the ceiling (rule P13).
func listed(cur *provision.Generation, eff *allow.Effective, ceil ceiling) []string {
	var names []string
	for _, n := range cur.Names() {
		if t := cur.Tools[n]; eff.Listed(n) && !policy.Above(t.Effect, ceil.effect) && t.Unpinned == "" && t.Unavailable == "" {
			names = append(names, n)
		}
	}
	return names
}

// decide gates a prepared call's input and decides its permission: the
// call's one decision.
func (g *Gateway) decide(p prepared) rule.Decision {
	if p.settled != nil {
		return *p.settled
	}
	mode := p.tool.Validation
	// The gate (rules S4, S9).
	var vs []tools.Violation
	var violations []string
	if mode != rule.Off {
		vs = p.tool.Gate.Check(p.input)
		for _, x := range vs {
			violations = append(violations, x.Sentence)
		}
	}
	if len(vs) > 0 && mode == rule.Enforce {
		d := rule.Refused(rule.S9, tools.Sentences(vs, false))
		d.Violations, d.Mode = violations, mode
		return d
	}
	// The canonical call (rule R7): what permission is decided on is what
	// runs. A subject the tool leaves out stands for its declared default
	// (Glob and Grep search the working directory), so the decision is
	// about what the tool will do (rule P2).
	in, why := canonical(p.tool, p.input, g.opts.Workdir, g.opts.Paths)
	if why != "" {
		d := rule.Refused(rule.R7, why)
		d.Violations, d.Mode = violations, mode
		return d
	}
	// Permission (rules P2–P11).
	d := p.eff.DecideAsWritten(p.Name, in, written(p.tool, p.input), g.opts.Workdir)
	d = g.flows(p, in, d)      // what the session has read (rule P18)
	d = g.provenance(p, in, d) // where its arguments came from (rule P18)
	if d.Allowed || d.Ask {
		d = g.reach(p, in, g.secret(p, in, guard(p.tool, in, g.leading(p, in, g.landing(p, in, d)))))
	}
	d.Effective, d.Violations, d.Mode, d.Ceiling = p.eff.Entries(p.Name), violations, mode, p.ceil.effect
	d.Input = in
	asked := d.Ask
	if d.Ask {
		d = g.approve(p, d)
	}
	if p.tool.Sandbox != nil {
		d.Sandbox = g.sandbox(p.cur, p.eff, p.tool)
		d.Sandbox.Exec = g.execJudge(p, in, asked && d.Allowed)
		if d.Allowed || d.Ask {
			if why := g.hideFiles(p.cur, p.eff, d.Sandbox); why != "" {
				d = rule.Refused(rule.P17, fmt.Sprintf("%s %s.", p.Name, why))
			}
		}
		// Claude Code's Bash may ask to leave its sandbox; only a policy
		// whose sandbox is off lets it (rule R8).
		if off, _ := in["dangerouslyDisableSandbox"].(bool); off && !d.Sandbox.Off && (d.Allowed || d.Ask) {
			d = rule.Refused(rule.R8, fmt.Sprintf("%s was not run: it asks to run outside its sandbox (dangerouslyDisableSandbox), which this policy does not allow; run it without that, or turn the tool's sandbox off in the policy.", p.Name))
		}
	}
	// Limits last, once nothing else refuses: a refused call spends
	// nothing (rule P19).
	if d.Allowed && g.opts.Limits != nil && len(p.cur.Limits) > 0 {
		g.limit(&p, &d)
	}
	return d
}

// A Call is one call as a front end read it, for Decide.
type Call struct {
	ID, Name string
	// Input is the call's input as JSON.
	Input json.RawMessage
	// Unread is why the front end could not read the call as its client
	// meant it (a hook input without a working directory); the call is
	// refused with that sentence (rule R7).
	Unread string
	// Refusal is a refusal the front end made before the decision (a
	// sealed session handle that fails verification, rule P18): the one
	// decision refuses with it, and records it with its rule.
	Refusal *rule.Decision
	// Approvals are tokens a person gave for this call (rule P15).
	Approvals []string
	// Principal is who called, when the front end knows (HTTP): the
	// decision log records it.
	Principal string
	// Caller is who called as the limits select callers (rule P19): the
	// claims of its token, when the front end knows them.
	Caller *policy.Claims
	// Session is the caller's session (rule P18), when the gateway's
	// callers each have one (HTTP); nil for the gateway's own.
	Session Session
	// decoded is the input when ReadCalls read it in the same pass, and
	// inputErr why the gate could not.
	decoded  map[string]any
	inputErr error
}

// Decide is the one decision of a call that every front end reaches
// without running it (rule R7): surface is the chain the call names (nil
// for the gateway's own), bound by the gateway's chain (rule R5); then the
// tool (P9, P13), its input (S4, S9), its canonical form (R7) and the
// lattice (P1–P14), recorded in the decision log. It returns the chain the
// call was decided on (surface itself when R5 refused it).
func (g *Gateway) Decide(surface []string, c Call) ([]string, rule.Decision) {
	return g.DecideContext(context.Background(), surface, c)
}

// DecideContext is Decide within ctx, which carries the caller's trace.
func (g *Gateway) DecideContext(ctx context.Context, surface []string, c Call) ([]string, rule.Decision) {
	cur := g.enter()
	defer cur.Exit()
	ctx, endCall := g.step(ctx, StepCall, c.Name)
	defer endCall(Outcome{})
	start := time.Now()
	chain, err := g.LineChain(surface)
	p := prepared{call: call{ID: c.ID, Name: c.Name, Input: c.Input, decoded: c.decoded, inputErr: c.inputErr, approvals: c.Approvals, principal: c.Principal, caller: c.Caller, session: c.Session}, cur: cur}
	var d rule.Decision
	switch {
	case err != nil:
		chain = surface
		d = rule.Refused(rule.R5, err.Error())
	case c.Unread != "":
		d = rule.Refused(rule.R7, c.Unread)
	case c.Refusal != nil:
		d = *c.Refusal
	default:
		eff, err := cur.Effective(chain)
		_, end := g.step(ctx, StepDecode, c.Name)
		p = g.prepare(cur, chain, eff, ceilingOf(cur, chain), err, p.call)
		p.at = start
		end(outcome(p.settled, false))
		_, end = g.step(ctx, StepDecide, c.Name)
		d = g.decide(p)
		end(outcome(&d, false))
		if err == nil && d.Effective == nil {
			d.Effective = eff.Entries(c.Name)
		}
	}
	d = g.recordAhead(cur, chain, p, d, start, decisionlog.Decided)
	d.EntryAt = entryPlaces(cur, chain, d, g.opts.Workdir)
	return chain, d
}

// Check is Decide for a caller that needs only the decision.
func (g *Gateway) Check(surface []string, id, name string, input json.RawMessage) rule.Decision {
	_, d := g.Decide(surface, Call{ID: id, Name: name, Input: input})
	return d
}

// run decides and executes a prepared call: its decision is recorded
// before the tool runs, and what it returned after (rule R10).
func (g *Gateway) run(ctx context.Context, cur *provision.Generation, chain []string, p prepared) result {
	var start time.Time // for the decision log's duration only
	if g.opts.Decisions != nil {
		start = time.Now()
		p.at = start
	}
	_, end := g.step(ctx, StepDecide, p.Name)
	d := g.decide(p)
	d = g.recordAhead(cur, chain, p, d, start, decisionlog.Running)
	end(outcome(&d, false))
	end = noEnd
	if d.Allowed {
		ctx, end = g.step(ctx, StepRun, p.Name)
	}
	var delegated atomic.Pointer[string]
	if p.caller != nil {
		ctx = provision.WithCaller(ctx, p.caller, func(who string) { delegated.Store(&who) })
	}
	r := g.execute(ctx, chain, p, d)
	end(outcome(&d, r.IsError))
	var held []string
	if d.Allowed {
		held = g.content(p, &r) // a secret redacted before the model sees it (rule P18)
	}
	if d.Allowed && !r.IsError {
		p.labels = g.labelResult(p, d, r.Content) // rule P18
	}
	if len(held) > 0 {
		p.labels = append(p.labels, held...)
	}
	if d.Allowed && g.opts.Decisions != nil {
		p.text = &r.Content
		if who := delegated.Load(); who != nil {
			p.delegated = *who
		}
		e := r.IsError // on the heap only here
		if err := g.record(cur, chain, p, d, start, decisionlog.Result, &e); !errors.Is(err, decisionlog.ErrClosed) {
			g.unrecorded(err) // closed: the drain ended first, and Close recorded the call as cut off
		}
	}
	return r
}

// recordAhead records a call's decision before anything acts on it (rule
// R10), in phase Running when its tool is to run next; an allowed call
// whose record cannot be written is refused instead, with why, and that
// refusal is what is returned.
func (g *Gateway) recordAhead(cur *provision.Generation, chain []string, p prepared, d rule.Decision, start time.Time, phase string) rule.Decision {
	if g.opts.Decisions == nil {
		return d
	}
	if !d.Allowed {
		phase = decisionlog.Decided
	}
	err := g.record(cur, chain, p, d, start, phase, nil)
	if err == nil || !d.Allowed {
		g.unrecorded(err)
		return d
	}
	g.log.Error("call refused: its decision could not be recorded", "tool", p.Name, "id", p.ID, "cause", err)
	refused := rule.Refused(rule.R1, decisionLogDown(err))
	refused.Effective = d.Effective
	g.record(cur, chain, p, refused, start, decisionlog.Decided, nil) // counted, though it cannot be written
	return refused
}

// record writes the decision log's record of a call in phase (see
// decisionlog); isErr is whether its result was an error, for a Result.
func (g *Gateway) record(cur *provision.Generation, chain []string, p prepared, d rule.Decision, start time.Time, phase string, isErr *bool) error {
	if g.opts.Decisions == nil {
		return nil
	}
	rec := decisionlog.Record{Time: start.UTC(), Phase: phase, CallID: p.ID, Tool: p.Name, Surface: chain, Allowed: d.Allowed, Ask: d.Ask,
		Rule: d.Rule, Entries: d.Entries, Violations: d.Violations, Validation: d.Mode,
		Revision: cur.Revision, Commit: cur.Commit(), Generation: cur.Number, DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		ResultError: isErr, Reason: d.Reason, Principal: p.principal, Delegated: p.delegated}
	if rec.Principal == "" {
		rec.Principal = g.opts.Principal
	}
	if in := subjectOf(p, d); in != nil {
		rec.Subject = in[p.tool.Subject.Field]
	}
	if dt := g.detail(); dt.Calls {
		g.replayable(&rec, dt, p, d)
	}
	return g.opts.Decisions.Log(rec)
}

// unrecorded logs a record that could not be written.
func (g *Gateway) unrecorded(err error) {
	if err != nil {
		g.log.Error("the decision log cannot be written; no call is allowed until it can", "cause", err)
	}
}

// subjectOf is the input whose subject a record shows: the canonical one
// when the call got that far, else the call's own.
func subjectOf(p prepared, d rule.Decision) tools.Input {
	if p.tool == nil || p.tool.Subject == nil {
		return nil
	}
	if d.Input != nil {
		return d.Input
	}
	return p.input
}

// execute runs an allowed call, or answers a refused one.
func (g *Gateway) execute(ctx context.Context, chain []string, p prepared, d rule.Decision) result {
	// Guarded: the arguments of a call not logged cost allocations.
	warn := g.log.Enabled(ctx, slog.LevelWarn)
	if warn && len(d.Violations) > 0 && d.Rule != rule.S9 {
		g.log.Warn("input breaks the schema; running it (validation: warn)", "tool", p.Name, "id", p.ID, "violations", strings.Join(d.Violations, " "))
	}
	if !d.Allowed {
		if warn {
			g.log.Warn("call refused", "tool", p.Name, "id", p.ID, "rule", d.Rule, "reason", d.Reason)
		}
		r := errorResult(p.ID, d.Reason)
		r.retryAfter = d.RetryAfter
		if d.Approval != "" {
			r.Content, r.approval = g.askSentence(d), d.Approval
			r.asked = &Asked{Input: d.Input, Entries: writtenEntries(d.Entries, g.opts.Workdir), Revision: p.cur.Revision, Reason: d.Reason}
		}
		return r
	}
	impl, ok := p.cur.Impl(p.Name)
	if !ok {
		g.log.Error("tool has no implementation", "tool", p.Name, "id", p.ID, "kind", p.tool.Kind())
		return errorResult(p.ID, noImplementation(p.Name))
	}
	// A child logger costs even when nothing is logged: only for debug.
	log := g.log
	if log.Enabled(ctx, slog.LevelDebug) {
		log = log.With("tool", p.Name, "id", p.ID)
		log.Debug("running", "input", d.Input)
	}
	env := g.env(p.ID, chain)
	env.Sandbox, env.Scope, env.MaxFileBytes = d.Sandbox, g.scope(p, d), p.tool.MaxFileBytes
	r := safeRun(ctx, impl, env, d.Input)
	// Built-ins log their own failures at the level rule C7 gives; the
	// gateway logs a panic, and the cause of another tool's failure.
	switch {
	case r.IsError && r.Cause != nil && (p.tool.Builtin == "" || isPanic(r.Cause)):
		log.Error("tool failed", "tool", p.Name, "id", p.ID, "error", r.Text, "cause", r.Cause)
	case r.IsError:
		log.Debug("tool returned an error", "error", r.Text)
	default:
		log.Debug("tool returned", "bytes", len(r.Text))
	}
	out := result{Type: "tool_result", ToolUseID: p.ID, Content: r.Text, IsError: r.IsError}
	if !r.IsError {
		out.structured = r.Structured
	}
	return out
}

// panicError is the cause of a result that a panic produced.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

func isPanic(err error) bool {
	var pe *panicError
	return errors.As(err, &pe)
}

// safeRun runs a tool so that nothing it does escapes (rule C2).
func safeRun(ctx context.Context, t tools.Tool, env *tools.Env, in tools.Input) (r tools.Result) {
	defer func() {
		if p := recover(); p != nil {
			r = tools.Failure(&panicError{p, debug.Stack()}, "%s", panicked())
		}
	}()
	return t.Run(ctx, env, in)
}

// entryPlaces is where the deciding entries are written, along the chain:
// in the deny or ask entries for a P14 decision, else the allow entries.
func entryPlaces(cur *provision.Generation, chain []string, d rule.Decision, workdir string) []string {
	key := "allowed-tools"
	switch {
	case d.Rule == rule.P14 && d.Ask:
		key = allow.AskTools
	case d.Rule == rule.P14:
		key = allow.DeniedTools
	}
	if len(d.Entries) == 0 {
		return nil
	}
	out, refs := make([]string, 0, len(d.Entries)), rooted(chain)
	for _, e := range d.Entries {
		for _, ref := range refs {
			if s := cur.Surfaces[ref]; s != nil {
				at, ok := cur.PlaceText(s, e, key)
				if !ok {
					// Decided on the entry with its ./ resolved; written with it.
					at, ok = cur.PlaceText(s, asWritten(e, workdir), key)
				}
				if ok {
					out = append(out, at)
					break
				}
			}
		}
	}
	return out
}

// writtenEntries are the deciding entries, each also with its ./ as a
// policy writes it where the decision resolved one.
func writtenEntries(entries []string, workdir string) []string {
	out := slices.Clone(entries)
	for _, e := range entries {
		if w := asWritten(e, workdir); w != e {
			out = append(out, w)
		}
	}
	return out
}

// asWritten is an entry whose path pattern was resolved against workdir as
// a policy writes it, with "./".
func asWritten(entry, workdir string) string {
	name, pattern, ok := strings.Cut(entry, "(")
	if !ok || workdir == "" {
		return entry
	}
	pattern = strings.TrimSuffix(pattern, ")")
	wd := strings.TrimSuffix(workdir, "/")
	switch {
	case pattern == wd:
		return name + "(.)"
	case strings.HasPrefix(pattern, wd+"/"):
		return name + "(./" + pattern[len(wd)+1:] + ")"
	}
	return entry
}
