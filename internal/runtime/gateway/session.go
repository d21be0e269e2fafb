package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/tools"
)

// A Session is what one session has read (rule P18); see decide.Session.
type Session = decide.Session

// Source is the call whose result gave a session a label.
type Source = decide.Source

// Held is the labels a session holds, sorted, with their sources.
type Held = decide.Held

// NewSession is a session kept in this process's memory, for as long as
// the process or connection that owns it.
func NewSession() Session { return &session{id: newSessionID()} }

// session is a Session in memory.
type session struct {
	mu   sync.Mutex
	set  Held         // replaced whole
	id   string       // its name in the decision log
	seen *decide.Seen // what arguments may come from (provenance.go)
}

func (s *session) Held(context.Context) (Held, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set, nil
}

func (s *session) Gain(_ context.Context, labels []string, from Source) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = s.set.With(labels, from)
	return nil
}

// SessionTTL is how long a stored session is kept after its last label:
// a hook's session may be resumed days later (claude --resume).
const SessionTTL = 30 * 24 * time.Hour

// StoredSession is the session id kept in store, which outlives the
// process (the hooks, a fleet's HTTP sessions). It reads the store once,
// at its first Held, and keeps what it read and gained: make one for each
// call or request. id must name the session uniquely in the store (the
// front end's name and its own id: claude-code:SESSION_ID).
func StoredSession(store state.Sessions, id string) Session {
	return &stored{store: store, id: id}
}

type stored struct {
	store state.Sessions
	id    string

	mu   sync.Mutex
	read bool
	mem  session
}

// SeenOf is what the stored session searches arguments' values in: the
// user's words its store keeps, read at the first search (decide.Seen).
func (s *stored) SeenOf() *decide.Seen { return s.mem.seenIn(s) }

func (s *stored) Held(ctx context.Context) (Held, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.read {
		m, err := s.store.Labels(ctx, s.id)
		if err != nil {
			return Held{}, err
		}
		for label, raw := range m {
			var from Source
			if json.Unmarshal(raw, &from) != nil {
				from = Source{Tool: "an earlier call"} // still held: a label is never dropped
			}
			s.mem.Gain(ctx, []string{label}, from)
		}
		s.read = true
	}
	return s.mem.Held(ctx)
}

func (s *stored) Gain(ctx context.Context, labels []string, from Source) error {
	raw, _ := json.Marshal(from)
	until := time.Now().Add(SessionTTL)
	for _, l := range labels {
		if err := s.store.AddLabel(ctx, s.id, l, raw, until); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem.Gain(ctx, labels, from)
}

// labelAhead gives the session the labels that an allowed call gives
// (rule P18) at its decision, before it runs: whatever it then returns (an
// error, a timeout, a cancellation, nothing at all when the client runs it
// and its hook's post step never comes), what it could read labels the
// session. A label that cannot be kept refuses the call, with why: it
// would run as if nothing had been read. It returns the labels and the
// decision.
func (g *Gateway) labelAhead(p *prepared, d rule.Decision) ([]string, rule.Decision) {
	s := p.Session
	if s == nil || p.Tool == nil || p.Gen.Session == nil || d.Input == nil {
		return nil, d
	}
	labels := p.Gen.LabelsOf(p.Tool, d.Input, p.Workdir, hostFS{}.LandsAt)
	if len(labels) == 0 {
		return nil, d
	}
	from := Source{Tool: p.Name, ID: p.ID, Subject: subjectIn(*p, d.Input)}
	if err := s.Gain(context.Background(), labels, from); err != nil {
		g.log.Warn("call refused: the session's labels cannot be kept", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID, "cause", err)
		refused := rule.Refused(rule.P18, fmt.Sprintf("%s was not run: it labels the session %s, and the label cannot be kept (%v), so later calls that a flow binds would be decided as if it had not been read; try again once the state store answers.", p.Name, strings.Join(labels, ", "), strings.TrimSuffix(err.Error(), ".")))
		refused.Effective, refused.Entries = d.Effective, d.Entries
		return labels, refused
	}
	g.log.Info("session labelled", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID)
	return labels, d
}

// noteResult keeps the text of the result of an allowed call that
// succeeded when the policy requires arguments to come from somewhere
// (rule P18): trusted when its decision gave the session no label.
func (g *Gateway) noteResult(p prepared, d rule.Decision, text string) {
	if p.Session == nil || p.Tool == nil || len(p.Gen.Provenance) == 0 {
		return
	}
	if sn := decide.SeenIn(p.Session); sn != nil {
		sn.Note(Source{Tool: p.Name, ID: p.ID, Subject: subjectIn(p, d.Input)}, p.labels, text)
	}
}

// observe is the result text of the call p, decided on the canonical in,
// seen by its session s: the labels it gives, and its text.
func (g *Gateway) observe(ctx context.Context, s Session, p prepared, in tools.Input, text string) ([]string, error) {
	if p.Gen.Session == nil && len(p.Gen.Provenance) == 0 {
		return nil, nil
	}
	labels := p.Gen.LabelsOf(p.Tool, in, p.Workdir, hostFS{}.LandsAt)
	from := Source{Tool: p.Name, ID: p.ID, Subject: subjectIn(p, in)}
	if sn := decide.SeenIn(s); sn != nil && len(p.Gen.Provenance) > 0 {
		sn.Note(from, labels, text)
	}
	if len(labels) == 0 {
		return nil, nil
	}
	if err := s.Gain(ctx, labels, from); err != nil {
		return labels, err
	}
	g.log.Info("session labelled", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID)
	return labels, nil
}

// Label gives the session of c (its own, else the gateway's) the labels
// that the result of c gives (rule P18), as the result of a call the
// gateway ran would: for a front end that sees the results of calls it
// did not run (a hook's PostToolUse) or that were recorded. result is the
// result's text. It returns the labels given; none for a call the policy
// cannot read (an unknown tool, an input that does not decode).
//
// With a decision log that records calls (--decision-log-calls), the
// result is recorded as a Result of c, with its labels and digest, so
// that replay re-decides the session (the hooks' results, which the
// gateway did not run).
func (g *Gateway) Label(ctx context.Context, surface []string, c Call, result string) ([]string, error) {
	return g.LabelIn(ctx, nil, surface, c, result)
}

// LabelIn is Label under cur, a generation the caller holds entered for
// the call, as DecideIn decides; nil for the generation in force.
func (g *Gateway) LabelIn(ctx context.Context, cur *provision.Generation, surface []string, c Call, result string) ([]string, error) {
	if cur == nil {
		cur = g.enter()
		defer cur.Exit()
	}
	chain, err := g.LineChain(surface)
	calls := RecordsCalls(g.opts.Decisions)
	if err != nil || cur.Session == nil && len(cur.Provenance) == 0 && !calls {
		return nil, nil
	}
	eff, err := cur.Effective(chain)
	c.Unread, c.Refusal = "", nil // its result is what it gave, however it was read
	p := g.prepare(cur, chain, eff, decide.CeilingOf(cur.Generation, chain), err, c)
	// Recorded under any policy, in its session or in none: replay
	// re-decides it under a candidate that labels it (rule P18).
	s := p.Session
	if s == nil && !calls {
		return nil, nil
	}
	var labels []string
	var lerr error
	if s != nil {
		labels, lerr = g.label(ctx, cur, s, p, result)
	}
	d := rule.Decision{Allowed: true}
	if lerr != nil {
		// What the hook answers when the label is not kept is this
		// sentence, which the result's record holds, under any detail
		// (rules P18, R10).
		lerr = Unkept(c, labels, lerr)
		d.Rule, d.Reason = rule.P18, lerr.Error()
	}
	if calls || lerr != nil {
		p.labels, p.text = labels, &result
		ok := false
		g.unrecorded(g.record(cur, chain, p, d, time.Now(), decisionlog.Result, &ok))
	}
	return labels, lerr
}

// Unkept is the sentence of a result whose labels (of the call c) cannot
// be kept in its session, for the cause err.
func Unkept(c Call, labels []string, err error) error {
	return fmt.Errorf("the result of %s (call %s) labels the session %s, and the label cannot be kept (%v); later calls that a flow binds may be decided as if it had not been read", c.Name, c.ID, strings.Join(labels, ", "), strings.TrimSuffix(err.Error(), "."))
}

// label is Label of the prepared call p in session s, under cur.
func (g *Gateway) label(ctx context.Context, cur *provision.Generation, s Session, p prepared, result string) ([]string, error) {
	c := p.Call
	// What the result holds labels whatever tool gave it (a client's own).
	var held []string
	if cur.Session != nil {
		if _, held = cur.Content(result); len(held) > 0 {
			if err := s.Gain(ctx, held, Source{Tool: c.Name, ID: c.ID}); err != nil {
				return held, err
			}
		}
	}
	if p.Tool == nil || p.In == nil {
		return held, nil
	}
	in, why := decide.Canonical(p.Tool, p.In, p.Workdir, g.opts.Paths)
	if why != "" {
		return held, nil
	}
	labels, err := g.observe(ctx, s, p, in, result)
	return append(labels, held...), err
}

// subjectIn is the call's subject as decided (a path, a URL), "" for none.
func subjectIn(p prepared, in map[string]any) string {
	if p.Tool.Subject != nil && in != nil {
		if v, ok := in[p.Tool.Subject.Field].(string); ok {
			return v
		}
	}
	return ""
}

// SessionsIn is where a fleet keeps its sessions (rule P18): a's state
// store, which every replica that shares it reads, or this process's
// memory when it has none.
func SessionsIn(a *Approvals) state.Sessions {
	if a != nil && a.store != nil {
		if s := state.SessionsOf(a.store); s != nil {
			return s
		}
	}
	return state.MemorySessions()
}
