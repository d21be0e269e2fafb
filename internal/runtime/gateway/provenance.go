package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/provenance"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// maxSeenBytes bounds what a session keeps of each kind of text for
// provenance (rule P18); past it a text is not kept, so a value only it
// holds is refused, never let through.
const maxSeenBytes = 64 << 20

// seen is what a session has read that an argument's value may come from
// (rule P18): the user's words, the results that gave no label (trusted)
// and those that did (labelled), each indexed (provenance.Index), and the
// calls whose results they are, for a refusal's sentence.
type seen struct {
	user, trusted, labelled *provenance.Index
	mu                      sync.Mutex
	results                 []seenResult // by the indexes' references
	// store, for a session that spans processes (StoredSession), keeps
	// its user's words, read into user at the first search; it keeps
	// none of the results read (each process would note its own).
	store     *stored
	loadOnce  sync.Once
	loadError error
}

// users is the index of the user's words, read from the session's store
// first when it has one; an error says the store does not answer.
func (sn *seen) users() (*provenance.Index, error) {
	if sn.store != nil {
		sn.loadOnce.Do(func() {
			words, err := sn.store.store.Words(context.Background(), sn.store.id)
			for _, w := range words {
				sn.user.Add(string(w), sn.user.Len())
			}
			sn.loadError = err
		})
	}
	return sn.user, sn.loadError
}

// seenResult is the call whose result a text is.
type seenResult struct {
	from   Source
	labels []string
}

// seenOf is s's record of what it has read, made on first use.
func (s *session) seenOf() *seen { return s.seenIn(nil) }

// seenIn is s's record of what it has read, made on first use for the
// session that keeps its user's words in store (nil for none).
func (s *session) seenIn(store *stored) *seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = &seen{user: provenance.New(maxSeenBytes), trusted: provenance.New(maxSeenBytes), labelled: provenance.New(maxSeenBytes), store: store}
	}
	return s.seen
}

// seenIn is what s has read, nil for a session that keeps no text.
func seenIn(s Session) *seen {
	if x, ok := s.(interface{ seenOf() *seen }); ok {
		return x.seenOf()
	}
	return nil
}

// NoteUser keeps the user's own words as a source of arguments' values in
// the gateway's session (rule P18); false when it keeps none, or keeps no
// more text.
func (g *Gateway) NoteUser(text string) bool { return NoteUser(g.opts.Session, text) }

// NoteUser keeps the user's own words in s (rule P18), for a front end
// that gives each caller, or each recorded session, its own.
func NoteUser(s Session, text string) bool {
	sn := seenIn(s)
	return sn != nil && sn.user.Add(text, sn.user.Len())
}

// note keeps the text of a call's result, trusted when it gave the
// session no label.
func (sn *seen) note(from Source, labels []string, text string) {
	if sn.store != nil {
		return
	}
	sn.mu.Lock()
	ref := len(sn.results)
	sn.results = append(sn.results, seenResult{from: from, labels: labels})
	sn.mu.Unlock()
	if len(labels) == 0 {
		sn.trusted.Add(text, ref)
	} else {
		sn.labelled.Add(text, ref)
	}
}

// result is the call of reference ref.
func (sn *seen) result(ref int) seenResult {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.results[ref]
}

// provenance refuses a call the lists allow or ask for when a value of an
// argument that the policy's provenance names comes from none of its
// sources (rule P18). The sentence says where the value was found.
func (g *Gateway) provenance(p prepared, in tools.Input, d rule.Decision) rule.Decision {
	if !(d.Allowed || d.Ask) || p.tool == nil {
		return d
	}
	reqs := p.cur.ProvenanceOf(p.Name)
	if len(reqs) == 0 {
		return d
	}
	s := g.sessionOf(p)
	sn := seenIn(s)
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
func unsourced(s Session, sn *seen, req *policy.Provenance, v string) string {
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
		if _, ok := sn.trusted.FindNormal(n); ok {
			return ""
		}
	}
	if ref, ok := sn.labelled.FindNormal(n); ok {
		r := sn.result(ref)
		return fmt.Sprintf("it occurs only in the result of %s, which labelled the session %s", r.from.by(), strings.Join(r.labels, ", "))
	}
	if ref, ok := sn.trusted.FindNormal(n); ok {
		return fmt.Sprintf("it occurs only in the result of %s, which is not one of them", sn.result(ref).from.by())
	}
	if _, ok := sn.user.FindNormal(n); ok {
		return "it occurs only in the user's words, which are not one of them"
	}
	why := "none of them holds it"
	if sn.user.Full() || sn.trusted.Full() {
		why += " (the session keeps no more text: past 64 MiB a text is not kept)"
	}
	if sn.store != nil {
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

// KeepUserWords keeps text as the user's own words in the gateway's
// session (rule P18): in its store for a session that spans processes (a
// hook's UserPromptSubmit prompt), else as NoteUser does; the decision
// log records them as a user line's. An error is a sentence: the words
// are not kept.
func (g *Gateway) KeepUserWords(ctx context.Context, text string) error {
	if st, ok := g.opts.Session.(*stored); ok {
		if err := st.store.AddWords(ctx, st.id, []byte(text), time.Now().Add(SessionTTL)); err != nil {
			return err
		}
	} else if !g.NoteUser(text) {
		return errors.New("the session keeps none of the user's words, or no more of them (past 64 MiB a text is not kept)")
	}
	if g.opts.Decisions != nil {
		g.recordUser([]string{text})
	}
	return nil
}

// userLine answers a user line: its words are noted as the user's (rule
// P18), {"type":"noted","bytes":N}.
func (g *Gateway) userLine(req *request) []byte {
	if seenIn(g.opts.Session) == nil {
		return errorReply("this gateway keeps no session (its callers share it), so the user's words cannot be noted; send them to a gateway that serves one session (serve, mcp over stdio).")
	}
	n := 0
	for _, t := range userText(req) {
		if !g.NoteUser(t) {
			return errorReply("the session keeps no more of the user's words (past 64 MiB a text is not kept); start a new session.")
		}
		n += len(t)
	}
	if g.opts.Decisions != nil {
		g.recordUser(userText(req))
	}
	return marshal(struct {
		Type  string `json:"type"`
		Bytes int    `json:"bytes"`
	}{"noted", n})
}
