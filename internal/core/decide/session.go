package decide

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/provenance"
	"aimon.dev/gw/internal/core/rule"
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

// By says which earlier call gave the label, for a refusal's sentence.
func (s Source) By() string {
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

// With is h with labels added from from; h itself when it holds them all.
func (h Held) With(labels []string, from Source) Held {
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

// flows decides the deny and ask entries that the session's labels bring
// (rule P18) on a call the lists allow or ask for: a flow's deny refuses
// it, a flow's ask makes an allowed call ask. The sentence names the
// earlier call that labelled the session.
func (dc *Decider) flows(p *Prepared, in tools.Input, d rule.Decision) rule.Decision {
	s := p.Session
	if s == nil || !(d.Allowed || d.Ask) || !p.Gen.FlowBinds(p.Name) {
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
	all := p.Gen.Flows(p.Chain, held.names, held.key)
	if all == nil {
		return d
	}
	w := Written(p.Tool, p.In)
	if ad := all.DecideAsWritten(p.Name, in, w, dc.Workdir); ad.Allowed && !ad.Ask || ad.Ask && !d.Allowed {
		return d
	}
	var ask *rule.Decision
	for _, h := range held.labels {
		flow := p.Gen.Flow(p.Chain, h.label)
		if flow == nil || len(flow.Entries(p.Name)) == 0 {
			continue
		}
		fd := flow.DecideAsWritten(p.Name, in, w, dc.Workdir)
		because := fmt.Sprintf(" The result of %s labelled the session %s earlier; a session keeps its labels while it lasts, so do this in a session that has not read it, or change the policy's flows.", h.By(), h.label)
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
	return rule.Refused(rule.P18, fmt.Sprintf("%s is not allowed on this surface while the session holds the labels %s, whose flows together refuse it. The result of %s labelled the session %s earlier.", p.Name, strings.Join(held.names, ", "), h.By(), h.label))
}

// bound is the call's effective list with the flows of the labels its
// session holds (rule P18), which its sandbox and the programs its command
// starts are held to, and the labels held; p.Eff when the session holds
// none that a flow of the chain names. An error (the labels cannot be
// read) comes with p.Eff.
func (dc *Decider) bound(p *Prepared) (*allow.Effective, []string, error) {
	if p.Session == nil || p.Gen.Session == nil {
		return p.Eff, nil, nil
	}
	held, err := p.Session.Held(context.Background())
	if err != nil {
		return p.Eff, nil, err
	}
	flows := p.Gen.Flows(p.Chain, held.names, held.key)
	if flows == nil {
		return p.Eff, held.names, nil
	}
	eff, err := p.Eff.With(flows)
	if err != nil {
		return p.Eff, nil, err
	}
	return eff, held.names, nil
}

// MaxSeenBytes bounds what a session keeps of each kind of text for
// provenance (rule P18); past it a text is not kept, so a value only it
// holds is refused, never let through.
const MaxSeenBytes = 64 << 20

// Seen is what a session has read that an argument's value may come from
// (rule P18): the user's words, the results that gave no label (trusted)
// and those that did (labelled), each indexed (provenance.Index), and the
// calls whose results they are, for a refusal's sentence.
type Seen struct {
	User, Trusted, Labelled *provenance.Index
	mu                      sync.Mutex
	results                 []seenResult // by the indexes' references
	// Stored, for a session that spans processes (the gateway's stored
	// sessions), keeps its user's words, read into User at the first
	// search; it keeps none of the results read (each process would note
	// its own).
	Stored    Words
	loadOnce  sync.Once
	loadError error
}

// Words are the user's words a session that spans processes keeps in its
// store; an error says the store does not answer.
type Words interface {
	Words(ctx context.Context) ([][]byte, error)
}

// users is the index of the user's words, read from the session's store
// first when it has one; an error says the store does not answer.
func (sn *Seen) users() (*provenance.Index, error) {
	if sn.Stored != nil {
		sn.loadOnce.Do(func() {
			words, err := sn.Stored.Words(context.Background())
			for _, w := range words {
				sn.User.Add(string(w), sn.User.Len())
			}
			sn.loadError = err
		})
	}
	return sn.User, sn.loadError
}

// seenResult is the call whose result a text is.
type seenResult struct {
	from   Source
	labels []string
}

// SeenIn is what s has read, nil for a session that keeps no text: one
// that keeps it has a method SeenOf.
func SeenIn(s Session) *Seen {
	if x, ok := s.(interface{ SeenOf() *Seen }); ok {
		return x.SeenOf()
	}
	return nil
}

// Note keeps the text of a call's result, trusted when it gave the
// session no label.
func (sn *Seen) Note(from Source, labels []string, text string) {
	if sn.Stored != nil {
		return
	}
	sn.mu.Lock()
	ref := len(sn.results)
	sn.results = append(sn.results, seenResult{from: from, labels: labels})
	sn.mu.Unlock()
	if len(labels) == 0 {
		sn.Trusted.Add(text, ref)
	} else {
		sn.Labelled.Add(text, ref)
	}
}

// result is the call of reference ref.
func (sn *Seen) result(ref int) seenResult {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.results[ref]
}

// NoteUser keeps the user's own words in sn (rule P18); false when it
// keeps no more text.
func (sn *Seen) NoteUser(text string) bool { return sn.User.Add(text, sn.User.Len()) }

// provenance refuses a call the lists allow or ask for when a value of an
// argument that the policy's provenance names comes from none of its
// sources (rule P18). The sentence says where the value was found.
func (dc *Decider) provenance(p *Prepared, in tools.Input, d rule.Decision) rule.Decision {
	if !(d.Allowed || d.Ask) || p.Tool == nil {
		return d
	}
	reqs := p.Gen.ProvenanceOf(p.Name)
	if len(reqs) == 0 {
		return d
	}
	s := p.Session
	sn := SeenIn(s)
	for _, req := range reqs {
		for _, v := range leaves(in[req.Field], nil) {
			if why := unsourced(s, sn, req, v); why != "" {
				return rule.Refused(rule.P18, fmt.Sprintf("%s was not run: the value %q of its %s must come from %s (the policy's provenance of %s.%s), and %s. Use a value as the user gave it, or ask the user for it; a value read in a result of the session is not the user's.", p.Name, v, req.Field, sources(req.From), p.Name, req.Field, why))
			}
		}
	}
	return d
}

// unsourced is "" when v comes from a source req allows, else where v
// was found instead; sn is what the session s has read, nil when it keeps
// none of it.
func unsourced(s Session, sn *Seen, req *policy.Provenance, v string) string {
	n := provenance.Normal(v)
	if n == "" || req.Vouches(n) {
		return ""
	}
	switch {
	case s == nil:
		return "this front end keeps no session, so no value comes from the user's words or a result"
	case sn == nil:
		return "this session keeps its labels but not what it read, so no value comes from the user's words or a result"
	}
	if req.Allows(policy.FromUser) {
		user, err := sn.users()
		if err != nil {
			return fmt.Sprintf("the user's words that the session keeps cannot be read (%v); try again once the state store answers", strings.TrimSuffix(err.Error(), "."))
		}
		if _, ok := user.FindNormal(n); ok {
			return ""
		}
	}
	if req.Allows(policy.FromTrusted) {
		if _, ok := sn.Trusted.FindNormal(n); ok {
			return ""
		}
	}
	if ref, ok := sn.Labelled.FindNormal(n); ok {
		r := sn.result(ref)
		return fmt.Sprintf("it occurs only in the result of %s, which labelled the session %s", r.from.By(), strings.Join(r.labels, ", "))
	}
	if ref, ok := sn.Trusted.FindNormal(n); ok {
		return fmt.Sprintf("it occurs only in the result of %s, which is not one of them", sn.result(ref).from.By())
	}
	if _, ok := sn.User.FindNormal(n); ok {
		return "it occurs only in the user's words, which are not one of them"
	}
	why := "none of them holds it"
	if sn.User.Full() || sn.Trusted.Full() {
		why += " (the session keeps no more text: past 64 MiB a text is not kept)"
	}
	if sn.Stored != nil {
		why += " (this session spans processes, a hook's or an HTTP caller's: it keeps the user's words it was given, such as Claude Code's UserPromptSubmit prompts, and none of the results it read)"
	}
	return why
}

// sources names the sources of a provenance for a sentence.
func sources(from []string) string {
	names := make([]string, 0, len(from))
	for _, f := range from {
		switch f {
		case policy.FromUser:
			names = append(names, "the user's words")
		case policy.FromPolicy:
			names = append(names, "the values the policy lists")
		case policy.FromTrusted:
			names = append(names, "a result that gave the session no label")
		}
	}
	switch len(names) {
	case 0:
		return "nowhere"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// leaves are the values of v a provenance checks: each string, and each
// number as JSON writes it, in lists and objects (by sorted key).
func leaves(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		return append(out, v)
	case fmt.Stringer: // json.Number
		return append(out, v.String())
	case float64:
		return append(out, strconv.FormatFloat(v, 'g', -1, 64))
	case []any:
		for _, e := range v {
			out = leaves(e, out)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = leaves(v[k], out)
		}
	}
	return out
}
