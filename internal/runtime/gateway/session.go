package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/tools"
)

// A Session is what one session has read (rule P18): the labels that the
// results of its calls gave it, each with the call that first gave it.
// Labels are sticky: nothing takes one away while the session lasts, a
// policy reload included. Each front end keeps its sessions where they
// live as long as they do: in memory for a process or a connection
// (NewSession: serve, MCP over stdio), in the gateway's protected state
// for a session that spans processes (StoredSession: the hooks, a sealed
// HTTP session that any replica continues).
type Session interface {
	// Held is what the session holds. An error means it is not known
	// (the store does not answer): a call that a flow binds is refused.
	Held(ctx context.Context) (Held, error)
	// Gain gives the session labels from the result of the call from; a
	// label it holds keeps the call that first gave it.
	Gain(ctx context.Context, labels []string, from Source) error
}

// Source is the call whose result gave a session a label: its tool, its
// id and its subject (a path, a URL), for a refusal's sentence.
type Source struct {
	Tool    string `json:"tool"`
	ID      string `json:"id"`
	Subject string `json:"subject,omitempty"`
}

// by says which earlier call gave the label, for a refusal's sentence.
func (s Source) by() string {
	switch {
	case s.ID == "" && s.Subject != "":
		return fmt.Sprintf("%s of %s", s.Tool, s.Subject)
	case s.ID == "":
		return s.Tool
	}
	if s.Subject != "" {
		return fmt.Sprintf("%s of %s (call %s)", s.Tool, s.Subject, s.ID)
	}
	return fmt.Sprintf("%s (call %s)", s.Tool, s.ID)
}

// Held is the labels a session holds, sorted, with their sources; the
// key names the set for the policy's cache of flows. A Held is never
// written in place, so a caller keeps what it read.
type Held struct {
	labels []heldLabel
	names  []string
	key    string
}

// heldLabel is a label a session holds and the call whose result gave it.
type heldLabel struct {
	label string
	Source
}

// Labels are the names of the labels held, sorted.
func (h Held) Labels() []string { return h.names }

// Source is the call that gave label, ok false when it is not held.
func (h Held) Source(label string) (Source, bool) {
	i, ok := slices.BinarySearchFunc(h.labels, label, func(h heldLabel, l string) int { return strings.Compare(h.label, l) })
	if !ok {
		return Source{}, false
	}
	return h.labels[i].Source, true
}

// with is h with labels added from from; h itself when it holds them all.
func (h Held) with(labels []string, from Source) Held {
	next := h.labels
	for _, l := range labels {
		i, found := slices.BinarySearchFunc(next, l, func(h heldLabel, l string) int { return strings.Compare(h.label, l) })
		if found {
			continue
		}
		if len(next) == len(h.labels) {
			next = slices.Clone(h.labels) // a reader keeps what it read
		}
		next = slices.Insert(next, i, heldLabel{label: l, Source: from})
	}
	if len(next) == len(h.labels) {
		return h
	}
	names := make([]string, len(next))
	for i, l := range next {
		names[i] = l.label
	}
	// The key as the policy's cache of flows names a set (Flows).
	return Held{labels: next, names: names, key: "\x00" + strings.Join(names, "\x00")}
}

// NewSession is a session kept in this process's memory, for as long as
// the process or connection that owns it.
func NewSession() Session { return &session{id: newSessionID()} }

// session is a Session in memory.
type session struct {
	mu   sync.Mutex
	set  Held   // replaced whole
	id   string // its name in the decision log
	seen *seen  // what arguments may come from (provenance.go)
}

func (s *session) Held(context.Context) (Held, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set, nil
}

func (s *session) Gain(_ context.Context, labels []string, from Source) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = s.set.with(labels, from)
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

// seenOf is what the stored session searches arguments' values in: the
// user's words its store keeps, read at the first search (seen.users).
func (s *stored) seenOf() *seen { return s.mem.seenIn(s) }

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

// sessionOf is the session a call belongs to: its own (a front end whose
// callers each have one), else the gateway's; nil for none.
func (g *Gateway) sessionOf(p prepared) Session {
	if p.session != nil {
		return p.session
	}
	return g.opts.Session
}

// labelResult gives the session the labels that the result of an allowed
// call that succeeded carries (rule P18), and keeps its text when the
// policy requires arguments to come from somewhere; it returns the labels.
func (g *Gateway) labelResult(p prepared, d rule.Decision, text string) []string {
	s := g.sessionOf(p)
	if s == nil || p.tool == nil {
		return nil
	}
	labels, err := g.observe(context.Background(), s, p, d.Input, text)
	if err != nil {
		g.log.Warn("the session's labels cannot be kept", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID, "cause", err)
	}
	return labels
}

// observe is the result text of the call p, decided on the canonical in,
// seen by its session s: the labels it gives, and its text.
func (g *Gateway) observe(ctx context.Context, s Session, p prepared, in tools.Input, text string) ([]string, error) {
	if p.cur.Session == nil && len(p.cur.Provenance) == 0 {
		return nil, nil
	}
	labels := p.cur.LabelsOf(p.tool, in, g.opts.Workdir)
	from := Source{Tool: p.Name, ID: p.ID, Subject: subjectIn(p, in)}
	if sn := seenIn(s); sn != nil && len(p.cur.Provenance) > 0 {
		sn.note(from, labels, text)
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

// flows decides the deny and ask entries that the session's labels bring
// (rule P18) on a call the lists allow or ask for: a flow's deny refuses
// it, a flow's ask makes an allowed call ask. The sentence names the
// earlier call that labelled the session.
func (g *Gateway) flows(p prepared, in tools.Input, d rule.Decision) rule.Decision {
	s := g.sessionOf(p)
	if s == nil || !(d.Allowed || d.Ask) || !p.cur.FlowBinds(p.Name) {
		return d
	}
	held, err := s.Held(context.Background())
	if err != nil {
		return rule.Refused(rule.P18, fmt.Sprintf("%s was not run: a flow of the policy decides it by what the session has read, and the session's labels cannot be read (%v); try again once the state store answers.", p.Name, strings.TrimSuffix(err.Error(), ".")))
	}
	if len(held.labels) == 0 {
		return d
	}
	// All the labels' flows at once; label by label only to say which
	// label a refusal or an ask comes from.
	all := p.cur.Flows(p.chain, held.names, held.key)
	if all == nil {
		return d
	}
	w := written(p.tool, p.input)
	if ad := all.DecideAsWritten(p.Name, in, w, g.opts.Workdir); ad.Allowed && !ad.Ask || ad.Ask && !d.Allowed {
		return d
	}
	var ask *rule.Decision
	for _, h := range held.labels {
		flow := p.cur.Flow(p.chain, h.label)
		if flow == nil || len(flow.Entries(p.Name)) == 0 {
			continue
		}
		fd := flow.DecideAsWritten(p.Name, in, w, g.opts.Workdir)
		because := fmt.Sprintf(" The result of %s labelled the session %s earlier; a session keeps its labels while it lasts, so do this in a session that has not read it, or change the policy's flows.", h.by(), h.label)
		switch {
		case fd.Ask:
			if ask == nil && d.Allowed {
				what, _, _ := strings.Cut(fd.Reason, " needs approval")
				a := rule.Decision{Ask: true, Rule: rule.P18, Entries: fd.Entries,
					Reason: fmt.Sprintf("%s needs approval on this surface while the session is labelled %s: %s asks for it.", what, h.label, strings.Join(fd.Entries, " and ")) + because}
				ask = &a
			}
		case !fd.Allowed:
			fd.Rule = rule.P18
			fd.Reason = strings.Replace(fd.Reason, " on this surface", " on this surface while the session is labelled "+h.label, 1) + because
			return fd
		}
	}
	if ask != nil {
		return *ask
	}
	// The flows together refused what none refused alone: refuse.
	h := held.labels[0]
	return rule.Refused(rule.P18, fmt.Sprintf("%s is not allowed on this surface while the session holds the labels %s, whose flows together refuse it. The result of %s labelled the session %s earlier.", p.Name, strings.Join(held.names, ", "), h.by(), h.label))
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
	cur := g.enter()
	defer cur.Exit()
	chain, err := g.LineChain(surface)
	if err != nil || cur.Session == nil && len(cur.Provenance) == 0 {
		return nil, nil
	}
	eff, err := cur.Effective(chain)
	p := g.prepare(cur, chain, eff, ceilingOf(cur, chain), err, call{ID: c.ID, Name: c.Name, Input: c.Input, decoded: c.decoded, inputErr: c.inputErr, session: c.Session})
	s := g.sessionOf(p)
	if s == nil {
		return nil, nil
	}
	labels, err := g.label(ctx, cur, s, p, result)
	if g.opts.Decisions != nil && g.detail().Calls {
		p.labels, p.text = labels, &result
		ok := false
		g.unrecorded(g.record(cur, chain, p, rule.Decision{Allowed: true}, time.Now(), decisionlog.Result, &ok))
	}
	return labels, err
}

// label is Label of the prepared call p in session s, under cur.
func (g *Gateway) label(ctx context.Context, cur *provision.Generation, s Session, p prepared, result string) ([]string, error) {
	c := p.call
	// What the result holds labels whatever tool gave it (a client's own).
	var held []string
	if cur.Session != nil {
		if _, held = cur.Content(result); len(held) > 0 {
			if err := s.Gain(ctx, held, Source{Tool: c.Name, ID: c.ID}); err != nil {
				return held, err
			}
		}
	}
	if p.tool == nil || p.input == nil {
		return held, nil
	}
	in, why := canonical(p.tool, p.input, g.opts.Workdir, g.opts.Paths)
	if why != "" {
		return held, nil
	}
	labels, err := g.observe(ctx, s, p, in, result)
	return append(labels, held...), err
}

// subjectIn is the call's subject as decided (a path, a URL), "" for none.
func subjectIn(p prepared, in map[string]any) string {
	if p.tool.Subject != nil && in != nil {
		if v, ok := in[p.tool.Subject.Field].(string); ok {
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
