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
	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// prepared is a call the one decision prepared (decide.Prepared), in the
// generation cur it is decided and run in.
type prepared struct {
	decide.Prepared
	cur *provision.Generation
	// delegated is the identity its upstream call used, for the record.
	delegated string
	// labels and text are what its result gave the session and returned,
	// for the decision log's Result record (rule P18).
	labels []string
	text   *string
}

// unprepared is c in cur, as a call refused before it is prepared is
// recorded: in its own session, else the gateway's.
func (g *Gateway) unprepared(cur *provision.Generation, c Call) prepared {
	g.own(&c)
	return prepared{Prepared: decide.Prepared{Call: c, Gen: cur.Generation}, cur: cur}
}

// prepare finds the tool and checks that the surface lists it (rule P9),
// through the one decision; eff is the chain's effective list, computed
// once per line, chainErr why the chain cannot run.
func (g *Gateway) prepare(cur *provision.Generation, chain []string, eff *allow.Effective, ceil decide.Ceiling, chainErr error, c Call) prepared {
	g.own(&c)
	dc := g.decider(c.Workdir)
	return prepared{Prepared: dc.Prepare(cur.Generation, chain, eff, ceil, chainErr, c), cur: cur}
}

// decide is the call's one decision (decide.Decider.Decide), with the
// judge of the programs its sandboxed command starts (rule P16), which
// records what it refuses.
func (g *Gateway) decide(p *prepared) rule.Decision {
	dc := g.decider(p.Workdir)
	d := dc.Decide(&p.Prepared)
	if d.Sandbox != nil {
		d.Sandbox.Exec = g.execJudge(*p, d.Input, decide.Approved(d))
	}
	return d
}

// own gives c what it does not name of its own: the gateway's session and
// working directory.
func (g *Gateway) own(c *Call) {
	if c.Session == nil {
		c.Session = g.opts.Session
	}
	if c.Workdir == "" {
		c.Workdir = g.opts.Workdir
	}
}

// A Call is one call as a front end read it, for Decide (decide.Call).
type Call = decide.Call

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
	return g.DecideIn(ctx, nil, surface, c, nil)
}

// DecideIn is DecideContext under cur, a generation this gateway serves
// that the caller holds entered for the call (the HTTP hook's, entered to
// read the request), decided under it even when a reload retired it
// meanwhile; nil for the generation in force. complete, when not nil, is
// given an allowed or asked decision to complete before it is recorded
// (the hook seals the ticket its command runs with, rule P16): a refusal
// it returns is what is recorded, and answered (R10). It is the call's,
// not the gateway's: one gateway decides every hook request.
func (g *Gateway) DecideIn(ctx context.Context, cur *provision.Generation, surface []string, c Call, complete func(rule.Decision) rule.Decision) ([]string, rule.Decision) {
	if cur == nil {
		cur = g.enter()
		defer cur.Exit()
	}
	chain, d, _, _ := g.decideIn(ctx, cur, surface, c, complete, decisionlog.Decided)
	return chain, d
}

// DecideToRun is Decide of a call its caller runs itself right after (the
// hook's exec of a command a person approved): its decision is recorded
// in phase Running before it returns, and one allowed whose record cannot
// be written is refused, with why (rule R10); ran, once the call ran,
// records what it returned (isErr: it failed), as serve records a run.
func (g *Gateway) DecideToRun(ctx context.Context, surface []string, c Call) (chain []string, d rule.Decision, ran func(isErr bool)) {
	cur := g.enter()
	defer cur.Exit()
	chain, d, p, start := g.decideIn(ctx, cur, surface, c, nil, decisionlog.Running)
	return chain, d, func(isErr bool) {
		if d.Allowed && g.opts.Decisions != nil {
			g.unrecorded(g.record(cur, chain, p, d, start, decisionlog.Result, &isErr))
		}
	}
}

// decideIn is DecideIn under cur, entered, its decision recorded in phase
// (Decided, or Running for a call that runs next); it returns the call
// prepared and when its decision began too, for its result's record.
func (g *Gateway) decideIn(ctx context.Context, cur *provision.Generation, surface []string, c Call, complete func(rule.Decision) rule.Decision, phase string) ([]string, rule.Decision, prepared, time.Time) {
	ctx, endCall := g.step(ctx, StepCall, c.Name)
	defer endCall(Outcome{})
	start := time.Now()
	chain, err := g.LineChain(surface)
	p := g.unprepared(cur, c)
	var d rule.Decision
	if err != nil {
		chain = surface
		d = decide.Refuse(rule.R5, err.Error())
	} else {
		eff, err := cur.Effective(chain)
		_, end := g.step(ctx, StepDecode, c.Name)
		p = g.prepare(cur, chain, eff, decide.CeilingOf(cur.Generation, chain), err, c)
		p.At = start
		end(outcome(p.Settled, false))
		_, end = g.step(ctx, StepDecide, c.Name)
		d = g.decide(&p)
		end(outcome(&d, false))
		if err == nil && d.Effective == nil && c.Unread == "" && c.Refusal == nil {
			d.Effective = eff.Entries(c.Name)
		}
		if complete != nil && (d.Allowed || d.Ask) {
			d = complete(d)
		}
		if c.Handed && (d.Allowed || d.Ask) {
			// The client runs it, and may report no result (rule P18).
			p.labels, d = g.labelAhead(&p, d)
		}
	}
	d = g.recordAhead(cur, chain, p, d, start, phase)
	d.EntryAt = entryPlaces(cur, chain, d, p.Workdir)
	return chain, d, p, start
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
		p.At = start
	}
	_, end := g.step(ctx, StepDecide, p.Name)
	d := g.decide(&p)
	if d.Allowed {
		// Labelled before it runs, whatever it returns (rule P18).
		p.labels, d = g.labelAhead(&p, d)
	}
	d = g.recordAhead(cur, chain, p, d, start, decisionlog.Running)
	end(outcome(&d, false))
	end = noEnd
	if d.Allowed {
		ctx, end = g.step(ctx, StepRun, p.Name)
	}
	// Made only for a caller: declared on its own, it reached the heap on
	// every call (issue 49).
	var delegated *atomic.Pointer[string]
	if p.Caller != nil {
		delegated = new(atomic.Pointer[string])
		ctx = provision.WithCaller(ctx, p.Caller, func(who string) { delegated.Store(&who) })
	}
	r := g.execute(ctx, chain, p, d)
	end(outcome(&d, r.IsError))
	var held []string
	if d.Allowed {
		held = g.content(p, &r) // a secret redacted before the model sees it (rule P18)
	}
	if d.Allowed && !r.IsError {
		g.noteResult(p, d, r.Content) // rule P18
	}
	if len(held) > 0 {
		p.labels = append(p.labels, held...)
	}
	if d.Allowed && g.opts.Decisions != nil {
		text := r.Content // a copy: &r.Content put every call's result on the heap
		p.text = &text
		if delegated != nil {
			if who := delegated.Load(); who != nil {
				p.delegated = *who
			}
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
		ResultError: isErr, Reason: d.Reason, Principal: p.Principal, Delegated: p.delegated}
	if rec.Principal == "" {
		rec.Principal = g.opts.Principal
	}
	if in := subjectOf(p, d); in != nil {
		rec.Subject = in[p.Tool.Subject.Field]
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
	if p.Tool == nil || p.Tool.Subject == nil {
		return nil
	}
	if d.Input != nil {
		return d.Input
	}
	return p.In
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
			r.asked = &Asked{Input: d.Input, Entries: writtenEntries(d.Entries, p.Workdir), Revision: p.cur.Revision, Reason: d.Reason}
		}
		return r
	}
	impl, ok := p.cur.Impl(p.Name)
	if !ok {
		g.log.Error("tool has no implementation", "tool", p.Name, "id", p.ID, "kind", p.Tool.Kind())
		return errorResult(p.ID, noImplementation(p.Name))
	}
	// A child logger costs even when nothing is logged: only for debug.
	log := g.log
	if log.Enabled(ctx, slog.LevelDebug) {
		log = log.With("tool", p.Name, "id", p.ID)
		log.Debug("running", "input", d.Input)
	}
	env := g.env(p.ID, p.Workdir, chain)
	env.Sandbox, env.Scope, env.MaxFileBytes = d.Sandbox, decide.Scope(&p.Prepared, d, p.Workdir), p.Tool.MaxFileBytes
	r := safeRun(ctx, impl, env, d.Input)
	// Built-ins log their own failures at the level rule C7 gives; the
	// gateway logs a panic, and the cause of another tool's failure.
	switch {
	case r.IsError && r.Cause != nil && (p.Tool.Builtin == "" || isPanic(r.Cause)):
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
	out, refs := make([]string, 0, len(d.Entries)), policy.Rooted(chain)
	// The entries come surface by surface, root first: the same text a
	// second time ("Read" on the agent and on its skill) is the next
	// surface's, not the first one's again. from[k] is where the search
	// for d.Entries[k] starts: the surface after the one that placed the
	// last earlier entry of the same text. Found by a look back over the
	// few entries a decision has (a map of them was a tenth of a decision,
	// issue 49); by a map past a few dozen, which an own rule's may be.
	var fromBuf [8]int
	from := fromBuf[:0]
	if len(d.Entries) > len(fromBuf) {
		from = make([]int, 0, len(d.Entries))
	}
	from = from[:len(d.Entries)]
	var last map[string]int // the last index of each text, for many entries
	if len(d.Entries) > 32 {
		last = make(map[string]int, len(d.Entries))
	}
	// Each surface's places of the list, found once for all the entries.
	var placesBuf [4]provision.Places
	places := placesBuf[:0]
	if len(refs) > len(placesBuf) {
		places = make([]provision.Places, 0, len(refs))
	}
	places = places[:len(refs)]
	for k, e := range d.Entries {
		if last != nil {
			if j, ok := last[e]; ok {
				from[k] = from[j]
			}
			last[e] = k
		} else {
			for j := k - 1; j >= 0; j-- {
				if d.Entries[j] == e {
					from[k] = from[j]
					break
				}
			}
		}
		for i := from[k]; i < len(refs); i++ {
			if places[i] == nil {
				if s := cur.Surfaces[refs[i]]; s != nil {
					places[i] = cur.Places(s, key)
				}
			}
			if places[i] != nil {
				at, ok := places[i].Text(e)
				if !ok {
					// Decided on the entry with its ./ resolved; written with it.
					at, ok = places[i].Text(asWritten(e, workdir))
				}
				if ok {
					out = append(out, at)
					from[k] = i + 1
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
