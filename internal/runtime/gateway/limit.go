package gateway

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/state"
)

// limits is the gateway's decide.Limiter: its Limits' counts.
type limits struct{ g *Gateway }

func (l limits) Limit(p decide.Prepared, d rule.Decision) rule.Decision {
	l.g.limit(&p, &d)
	return d
}

// LimitEntry is how a decision refused by a limit names it in its entries
// (and so in the decision log and /metrics): "limits." and its name.
const LimitEntry = "limits."

// limit decides the policy's limits of an allowed call (rule P19), after
// every list has allowed it, so that a call the lists refuse spends
// nothing: one Take for every limit that selects the call (one round trip
// to a shared store), which spends from all of them or, when one refuses,
// from none. A call no limit selects costs no Take at all.
func (g *Gateway) limit(p *decide.Prepared, d *rule.Decision) {
	who := g.callerOf(p)
	var buf [4]*policy.Limit
	selected := buf[:0]
	for _, l := range p.Gen.Limits {
		if l.Selects(&who, p.Chain, p.Name, d.Entries) {
			selected = append(selected, l)
		}
	}
	if len(selected) == 0 {
		return
	}
	caller := who.Subject
	if caller == "" {
		caller = who.Client
	}
	var i int
	var wait time.Duration
	var err error
	if m, ok := g.opts.Limits.(*state.Memory); ok {
		// Called directly, the cells stay on the stack.
		var cb [4]state.Cell
		at := p.At
		if at.IsZero() {
			at = time.Now()
		}
		i, wait, err = m.TakeAt(at, cellsOf(cb[:0], selected, caller))
	} else {
		i, wait, err = g.opts.Limits.Take(context.Background(), cellsOf(nil, selected, caller))
	}
	if err != nil {
		g.log.Error("a limited call is refused: its limit cannot be checked", "tool", p.Name, "id", p.ID, "cause", err)
		*d = limited(d, selected[0], fmt.Sprintf("%s was not run: the limit %q bounds it, and its count cannot be checked (%v); a limited call runs only once its count is known, so try again once the state store answers.", p.Name, selected[0].Name, err), 0)
		return
	}
	if i < 0 {
		return
	}
	l := selected[i]
	secs := math.Max(1, math.Ceil(wait.Seconds()))
	var by string
	if caller == "" {
		by = "for callers with no identity, who share one count"
	} else {
		by = fmt.Sprintf("for %s", caller)
	}
	*d = limited(d, l, fmt.Sprintf("%s was not run: the limit %q (%s, per caller) allows no more of these calls %s now; retry after %.0f seconds (at %s).", p.Name, l.Name, l.Describe(), by, secs, time.Now().Add(wait).UTC().Format(time.RFC3339)), secs)
}

// cellsOf appends to dst the cells of the limits for caller.
func cellsOf(dst []state.Cell, limits []*policy.Limit, caller string) []state.Cell {
	for _, l := range limits {
		dst = append(dst, state.Cell{Limit: l.Name, Caller: caller, Interval: l.Interval(), Burst: l.Burst, Quota: l.Quota, Window: l.Window})
	}
	return dst
}

// limited is d refused by the limit l with the sentence why, to be
// retried after secs (0: no time is known).
func limited(d *rule.Decision, l *policy.Limit, why string, secs float64) rule.Decision {
	r := decide.Refuse(rule.P19, why)
	r.Entries = []string{LimitEntry + l.Name}
	r.Effective, r.Violations, r.Mode, r.Ceiling, r.Input = d.Effective, d.Violations, d.Mode, d.Ceiling, d.Input
	r.RetryAfter = secs
	return r
}

// callerOf is who makes the call, as the limits select callers: the
// front end's claims (HTTP), else the gateway's principal (the HTTP
// hook), else no one (serve, the command hook: only limits without who
// apply, and all such callers share one count).
func (g *Gateway) callerOf(p *decide.Prepared) policy.Claims {
	var c policy.Claims
	switch {
	case p.Caller != nil:
		c = *p.Caller
	case g.opts.Caller != nil:
		c = *g.opts.Caller
	}
	if c.Subject == "" {
		c.Subject = p.Principal
	}
	if c.Subject == "" {
		c.Subject = g.opts.Principal
	}
	return c
}

// LimitedName is the limit a refusal's entries name, "" for another
// refusal.
func LimitedName(entries []string) string {
	if len(entries) == 1 && strings.HasPrefix(entries[0], LimitEntry) {
		return entries[0][len(LimitEntry):]
	}
	return ""
}

// LimitsIn is where a gateway whose approvals are spent in a's store keeps
// its limits' counts (rule P19): that store when a fleet shares it
// (Redis, --state redis://), else this process's memory.
func LimitsIn(a *Approvals) state.Limiter {
	if a != nil && a.store != nil {
		if l := state.LimiterOf(a.store); l != nil {
			return l
		}
	}
	return state.NewMemory(nil)
}
