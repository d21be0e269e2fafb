package gateway

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
)

// content reads what an allowed call's result holds (rule P18): a match of
// a label's content gives the call's session that label, whether the call
// succeeded or not, and a redacting label's matches are replaced, in the
// text and in the structured result, before the model sees either. It
// returns the labels given.
func (g *Gateway) content(p prepared, r *result) []string {
	if p.cur.Session == nil {
		return nil
	}
	text, labels := p.cur.Content(r.Content)
	r.Content = text
	if r.structured != nil {
		if raw, err := json.Marshal(r.structured); err == nil {
			seen, more := p.cur.Content(string(raw))
			labels = append(labels, more...)
			if seen != string(raw) {
				var v any
				if json.Unmarshal([]byte(seen), &v) != nil {
					v = nil // what cannot be redacted is not shown
				}
				r.structured = v
			}
		}
	}
	slices.Sort(labels)
	labels = slices.Compact(labels)
	if len(labels) > 0 {
		g.gainContent(context.Background(), p.Session, labels, Source{Tool: p.Name, ID: p.ID, Subject: subjectIn(p, p.In)})
	}
	return labels
}

// gainContent gives s the labels a result's content gave; the log says
// which, never the secret.
func (g *Gateway) gainContent(ctx context.Context, s Session, labels []string, from Source) {
	g.log.Info("result holds a secret's shape", "labels", strings.Join(labels, ","), "tool", from.Tool, "id", from.ID)
	if s == nil {
		return
	}
	if err := s.Gain(ctx, labels, from); err != nil {
		g.log.Warn("the session's labels cannot be kept", "labels", strings.Join(labels, ","), "tool", from.Tool, "id", from.ID, "cause", err)
	}
}
