package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
)

// newSessionID names a session in the decision log: random, so that the
// sessions of processes sharing a log stay apart.
func newSessionID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SessionID names the session the gateway serves in its decision log; ""
// when it serves none.
func (g *Gateway) SessionID() string { return sessionName(g.opts.Session) }

// sessionName is s's name in the decision log.
func sessionName(s Session) string {
	switch s := s.(type) {
	case *session:
		return s.id
	case *stored:
		// Its parts are joined by NULs (claude-code, the caller, the
		// session id): quoted, so that replay prints the name as text,
		// and no two names meet.
		q := strconv.QuoteToASCII(s.id)
		return q[1 : len(q)-1]
	}
	return ""
}

// detail is what the decision log records beyond the decisions.
func (g *Gateway) detail() decisionlog.Detail { return detailOf(g.opts.Decisions) }

func detailOf(l DecisionLog) decisionlog.Detail {
	if d, ok := l.(interface{ Detail() decisionlog.Detail }); ok {
		return d.Detail()
	}
	return decisionlog.Detail{}
}

// RecordsCalls is whether l records the calls and results that aimon-gw
// replay re-decides (--decision-log-calls).
func RecordsCalls(l DecisionLog) bool { return l != nil && detailOf(l).Calls }

// RecordUserWords records text as the user's words of the session s (nil
// for the gateway's), with a decision log that records calls, and keeps
// them nowhere: a hook whose policy reads none of the user's words records
// them still, for replay under a candidate that does (rule P18).
func (g *Gateway) RecordUserWords(s Session, text string) {
	if s == nil {
		s = g.opts.Session
	}
	if g.opts.Decisions != nil {
		g.recordUser(s, []string{text})
	}
}

// replayable adds to rec what aimon-gw replay needs (rule P18): the
// session, the canonical call a decision was made on, a result's labels
// and digest, and with dt.Content its text.
func (g *Gateway) replayable(rec *decisionlog.Record, dt decisionlog.Detail, p prepared, d rule.Decision) {
	rec.V, rec.Session, rec.Workdir = decisionlog.Version, sessionName(p.Session), p.Workdir
	if rec.Phase != decisionlog.Result {
		if rec.Input = d.Input; rec.Input == nil {
			rec.Input = p.In
		}
		return
	}
	rec.Labels = p.labels
	if p.text != nil {
		digestText(rec, *p.text, dt.Content)
	}
}

// digestText puts text's digest, and with content text itself, in rec.
func digestText(rec *decisionlog.Record, text string, content bool) {
	sum := sha256.Sum256([]byte(text))
	rec.TextSHA256, rec.TextBytes = "sha256:"+hex.EncodeToString(sum[:]), len(text)
	if content {
		rec.Text = &text
	}
}

// recordUser records the user's words a user line gave the session s.
func (g *Gateway) recordUser(s Session, texts []string) {
	dt := g.detail()
	if !dt.Calls {
		return
	}
	rec := decisionlog.Record{Time: time.Now().UTC(), Phase: decisionlog.User, V: decisionlog.Version, Session: sessionName(s), Workdir: g.opts.Workdir, Revision: g.Current().Revision, Generation: g.Current().Number}
	digestText(&rec, strings.Join(texts, "\n"), dt.Content)
	g.unrecorded(g.opts.Decisions.Log(rec))
}
