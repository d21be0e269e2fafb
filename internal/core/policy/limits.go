package policy

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// A Limit bounds how often the calls it selects run (rule P19): a rate
// with a burst (GCRA: one call every Per/Rate, Burst of them at once) and a
// quota (Quota calls per fixed Window). It is decided after the lists, for
// each caller apart: its counters are kept per caller's subject (callers
// with no identity share one), so a new session is no new allowance.
type Limit struct {
	Name string
	// Who selects callers by the claims of their token, as a principal
	// does; all empty selects every caller, also one with no identity.
	Subject, Group, Client string
	// Surface selects calls whose chain runs through it; Tool calls of that
	// tool (SERVER__* for every tool of a server); Entry calls that allow
	// entry let run. "" selects all.
	Surface, Tool, Entry string
	// Rate calls per Per, Burst at once; Rate 0 for no rate.
	Rate, Burst int64
	Per         time.Duration
	// Emission is Per/Rate, the time one call of the rate takes up (the
	// GCRA's emission interval), computed once.
	Emission time.Duration
	// Quota calls per Window; 0 for no quota.
	Quota  int64
	Window time.Duration
	Pos    Position
}

// Selects reports whether the limit bounds a call of tool on chain by the
// caller, allowed by entries.
func (l *Limit) Selects(c *Claims, chain []string, tool string, entries []string) bool {
	switch {
	case l.Subject != "" && l.Subject != c.Subject,
		l.Group != "" && !slices.Contains(c.Groups, l.Group),
		l.Client != "" && l.Client != c.Client,
		l.Surface != "" && !slices.Contains(chain, l.Surface),
		l.Entry != "" && !slices.Contains(entries, l.Entry):
		return false
	case l.Tool == "":
		return true
	case strings.HasSuffix(l.Tool, "__*"):
		return strings.HasPrefix(tool, l.Tool[:len(l.Tool)-1])
	}
	return l.Tool == tool
}

// Interval is the GCRA's emission interval: the time one call of the rate
// takes up.
func (l *Limit) Interval() time.Duration { return l.Emission }

// Describe says what the limit allows, for sentences.
func (l *Limit) Describe() string {
	var parts []string
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%d calls per %s with a burst of %d", l.Rate, period(l.Per), l.Burst))
	}
	if l.Quota > 0 {
		parts = append(parts, fmt.Sprintf("%d calls per %s", l.Quota, period(l.Window)))
	}
	return strings.Join(parts, " and ")
}

func period(d time.Duration) string {
	for _, u := range units {
		if d == u.d {
			return u.names[len(u.names)-1]
		}
	}
	return d.String()
}

// units are the periods a rate or quota may name, each with its spellings
// (the last is how a sentence names it).
var units = []struct {
	d     time.Duration
	names []string
}{
	{time.Second, []string{"s", "sec", "second"}},
	{time.Minute, []string{"m", "min", "minute"}},
	{time.Hour, []string{"h", "hr", "hour"}},
	{24 * time.Hour, []string{"d", "day"}},
	{7 * 24 * time.Hour, []string{"w", "wk", "week"}},
}

// parseRate reads "N/UNIT" or "N/DURATION" ("30/min", "5/10s").
func parseRate(s string) (int64, time.Duration, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if !ok || err != nil || n < 1 {
		return 0, 0, fmt.Errorf("%q is not a count per period; write it as N/UNIT with N a whole number of at least 1, such as \"30/min\", \"2000/day\" or \"5/10s\"", s)
	}
	unit = strings.TrimSpace(unit)
	for _, u := range units {
		if slices.Contains(u.names, unit) {
			return n, u.d, nil
		}
	}
	d, err := time.ParseDuration(unit)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("%q names the period %q, which is neither a unit (s, min, h, day, week) nor a duration such as 10s", s, unit)
	}
	return n, d, nil
}

// limits reads the limits block, after the tools, surfaces and principals
// it refers to; each problem is an error at its place.
func (c *compiler) limits(g *Generation, v cue.Value) {
	iter, err := v.Fields()
	if err != nil {
		return
	}
	var subjects map[string]allow.Subject
	for iter.Next() {
		lv := iter.Value()
		l := &Limit{Name: iter.Selector().Unquoted(), Pos: c.pos(lv, 0)}
		field := func(path string) cue.Value { return lv.LookupPath(cue.ParsePath(path)) }
		l.Subject, l.Group, l.Client = str(field("who.subject")), str(field("who.group")), str(field("who.client"))
		l.Surface, l.Tool, l.Entry = str(field("surface")), str(field("tool")), str(field("entry"))
		ok := true
		bad := func(at cue.Value, format string, args ...any) {
			c.fail(at, rule.P19, "limit %q: "+format, append([]any{l.Name}, args...)...)
			ok = false
		}
		if pv := field("who.principal"); pv.Exists() {
			name := str(pv)
			i := slices.IndexFunc(g.Principals, func(p *Principal) bool { return p.Name == name })
			switch {
			case i < 0:
				bad(pv, "who names the principal %q, which the policy does not declare; declared are %s.", name, joinNames(principalNames(g)))
			case l.Subject != "" || l.Group != "" || l.Client != "":
				bad(pv, "who names a principal and claims too; name one or the other.")
			default:
				p := g.Principals[i]
				l.Subject, l.Group, l.Client = p.Subject, p.Group, p.Client
			}
		}
		if l.Surface != "" {
			if _, declared := g.Surfaces[l.Surface]; !declared {
				bad(field("surface"), "the surface %s is not declared in the policy; declared are %s.", l.Surface, joinNames(g.SurfaceRefs()))
			}
		}
		if l.Tool != "" && !c.knownTool(g, l.Tool) {
			bad(field("tool"), "the tool %s is not one the policy declares%s.", l.Tool, closestTool(g, l.Tool))
		}
		if l.Entry != "" {
			e, err := allow.ParseEntry(l.Entry)
			switch {
			case err != nil:
				bad(field("entry"), "the entry %q cannot be read: %v.", l.Entry, err)
			case !c.knownTool(g, e.Tool):
				bad(field("entry"), "the entry %s is of the tool %s, which the policy does not declare%s.", l.Entry, e.Tool, closestTool(g, e.Tool))
			case l.Tool != "" && l.Tool != e.Tool:
				bad(field("entry"), "the entry %s is of %s, not of the limit's tool %s, so the limit would select no call.", l.Entry, e.Tool, l.Tool)
			default:
				if subjects == nil {
					subjects = listSubjects(g)
				}
				// Compared with the entries that allowed a call, which
				// have ./ resolved as the lists do.
				l.Entry = c.resolveEntries([]string{l.Entry}, subjects)[0]
				if !c.allowedSomewhere(g, l.Entry, subjects) {
					bad(field("entry"), "the entry %s is in no surface's allowed-tools, so the limit would select no call; write it as the list does.", l.Entry)
				}
			}
		}
		if rv := field("rate"); rv.Exists() {
			if l.Rate, l.Per, err = parseRate(str(rv)); err != nil {
				bad(rv, "the rate %v.", err)
			} else if l.Per/time.Duration(l.Rate) < time.Microsecond {
				bad(rv, "the rate %s allows more than one call a microsecond, which no gateway can count; give a lower rate.", str(rv))
			}
		}
		if bv := field("burst"); bv.Exists() {
			l.Burst = int64(integer(bv))
			switch {
			case l.Burst < 1:
				bad(bv, "the burst is %d; a burst is how many calls may run at once, at least 1.", l.Burst)
			case !field("rate").Exists():
				bad(bv, "a burst is given without a rate; give the rate it bursts above, such as rate: \"30/min\".")
			}
		} else {
			l.Burst = l.Rate // the rate's count at once, then its pace
		}
		if qv := field("quota"); qv.Exists() {
			if l.Quota, l.Window, err = parseRate(str(qv)); err != nil {
				bad(qv, "the quota %v.", err)
			} else if l.Window < time.Second {
				bad(qv, "the quota %s counts in windows shorter than a second; give a rate for that, or a longer window.", str(qv))
			}
		}
		if !field("rate").Exists() && !field("quota").Exists() {
			bad(lv, "it gives neither a rate nor a quota, so it bounds nothing; give rate: \"30/min\" (with a burst) or quota: \"2000/day\".")
		}
		if ok {
			if l.Rate > 0 {
				l.Emission = l.Per / time.Duration(l.Rate)
			}
			g.Limits = append(g.Limits, l)
		}
	}
	sort.Slice(g.Limits, func(i, j int) bool { return g.Limits[i].Name < g.Limits[j].Name })
}

// knownTool reports whether name is a declared tool, or SERVER__* of a
// declared server.
func (c *compiler) knownTool(g *Generation, name string) bool {
	if g.Tools[name] != nil {
		return true
	}
	server, ok := strings.CutSuffix(name, "__*")
	if !ok {
		return false
	}
	if g.Wildcards[server] != nil {
		return true
	}
	for _, t := range g.Tools {
		if t.Upstream != nil && t.Upstream.Server == server {
			return true
		}
	}
	return false
}

func closestTool(g *Generation, name string) string {
	names := make([]string, 0, len(g.Tools))
	for n := range g.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	if near := tools.Closest(name, names); near != "" {
		return fmt.Sprintf(" (did you mean %s?)", near)
	}
	return fmt.Sprintf("; declared are %s", joinNames(names))
}

func principalNames(g *Generation) []string {
	var names []string
	for _, p := range g.Principals {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

// allowedSomewhere reports whether some surface's allowed-tools holds entry
// (after ./ is resolved).
func (c *compiler) allowedSomewhere(g *Generation, entry string, subjects map[string]allow.Subject) bool {
	for _, s := range g.Surfaces {
		if slices.Contains(c.resolveEntries(s.Entries, subjects), entry) {
			return true
		}
	}
	return false
}
