package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// session is what one session has read (rule P18): the labels the results
// of its calls gave it, each with the call that first gave it. Labels are
// sticky: nothing takes one away while the session lasts, a policy reload
// included. It lives in the gateway, which serves one session (serve, MCP
// over stdio); a gateway shared by callers (HTTP) keeps none.
type session struct {
	mu     sync.Mutex
	labels []heldLabel // sorted by label
	set    heldSet     // what held returns, replaced whole
}

// heldSet is the labels a session holds, their names, and the key that
// names the set for the policy's cache of flows.
type heldSet struct {
	labels []heldLabel
	names  []string
	key    string
}

// heldLabel is a label a session holds and the call whose result gave it.
type heldLabel struct {
	label, tool, id, subject string
}

// by says which earlier call gave the label, for a refusal's sentence.
func (h heldLabel) by() string {
	if h.subject != "" {
		return fmt.Sprintf("%s of %s (call %s)", h.tool, h.subject, h.id)
	}
	return fmt.Sprintf("%s (call %s)", h.tool, h.id)
}

// held returns the labels the session holds.
func (s *session) held() heldSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set // never written in place: gain replaces it
}

// gain gives the session the labels of a call's result, keeping the call
// that first gave each.
func (s *session) gain(labels []string, tool, id, subject string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.labels
	for _, l := range labels {
		i, found := slices.BinarySearchFunc(next, l, func(h heldLabel, l string) int { return strings.Compare(h.label, l) })
		if found {
			continue
		}
		if len(next) == len(s.labels) {
			next = slices.Clone(s.labels) // held's callers keep what they read
		}
		next = slices.Insert(next, i, heldLabel{label: l, tool: tool, id: id, subject: subject})
	}
	if len(next) == len(s.labels) {
		return
	}
	s.labels = next
	names := make([]string, len(next))
	for i, h := range next {
		names[i] = h.label
	}
	s.set = heldSet{labels: next, names: names, key: strings.Join(names, "\x00")}
}

// labelResult gives the session the labels that the result of an allowed
// call that succeeded carries (rule P18).
func (g *Gateway) labelResult(p prepared, d rule.Decision) {
	if g.session == nil || p.tool == nil || p.cur.Session == nil {
		return
	}
	labels := p.cur.LabelsOf(p.tool, d.Input, g.opts.Workdir)
	if len(labels) == 0 {
		return
	}
	subject := ""
	if p.tool.Subject != nil && d.Input != nil {
		if v, ok := d.Input[p.tool.Subject.Field].(string); ok {
			subject = v
		}
	}
	g.session.gain(labels, p.Name, p.ID, subject)
	g.log.Info("session labelled", "labels", strings.Join(labels, ","), "tool", p.Name, "id", p.ID)
}

// flows decides the deny and ask entries that the session's labels bring
// (rule P18) on a call the lists allow or ask for: a flow's deny refuses
// it, a flow's ask makes an allowed call ask. The sentence names the
// earlier call that labelled the session.
func (g *Gateway) flows(p prepared, in tools.Input, d rule.Decision) rule.Decision {
	if g.session == nil || !(d.Allowed || d.Ask) || !p.cur.FlowBinds(p.Name) {
		return d
	}
	held := g.session.held()
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
