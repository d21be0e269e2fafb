package gateway

import (
	"context"
	"errors"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/provenance"
)

// SeenOf is s's record of what it has read (decide.SeenIn), made on
// first use.
func (s *session) SeenOf() *decide.Seen { return s.seenIn(nil) }

// seenIn is s's record of what it has read, made on first use for the
// session that keeps its user's words in store (nil for none).
func (s *session) seenIn(store *stored) *decide.Seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = &decide.Seen{User: provenance.New(decide.MaxSeenBytes), Trusted: provenance.New(decide.MaxSeenBytes), Labelled: provenance.New(decide.MaxSeenBytes)}
		if store != nil {
			s.seen.Stored = store
		}
	}
	return s.seen
}

// Words are the user's words the stored session's store keeps
// (decide.Seen.Stored).
func (s *stored) Words(ctx context.Context) ([][]byte, error) { return s.store.Words(ctx, s.id) }

// KeepUserWords keeps text as the user's own words in the session s, nil
// for the gateway's (rule P18): in its store for a session that spans
// processes (a hook's UserPromptSubmit prompt), else as NoteUser does; the
// decision log records them as a user line's. An error is a sentence: the
// words are not kept.
func (g *Gateway) KeepUserWords(ctx context.Context, s Session, text string) error {
	if s == nil {
		s = g.opts.Session
	}
	if st, ok := s.(*stored); ok {
		if err := st.store.AddWords(ctx, st.id, []byte(text), time.Now().Add(SessionTTL)); err != nil {
			return err
		}
	} else if !NoteUser(s, text) {
		return errors.New("the session keeps none of the user's words, or no more of them (past 64 MiB a text is not kept)")
	}
	if g.opts.Decisions != nil {
		g.recordUser(s, []string{text})
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
	sn := decide.SeenIn(s)
	return sn != nil && sn.NoteUser(text)
}

// userLine answers a user line: its words are noted as the user's (rule
// P18), {"type":"noted","bytes":N}.
func (g *Gateway) userLine(req *request) []byte {
	if decide.SeenIn(g.opts.Session) == nil {
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
		g.recordUser(g.opts.Session, userText(req))
	}
	return marshal(struct {
		Type  string `json:"type"`
		Bytes int    `json:"bytes"`
	}{"noted", n})
}
