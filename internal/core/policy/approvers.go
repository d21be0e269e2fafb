package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/allow"
)

// An Approver names who may approve, out of band, the calls that some ask
// entries ask for (rule P15): the people a group of their token, or a
// subject, names.
type Approver struct {
	Name string
	// Group and Subject are the claims an approver's token must carry,
	// each that is not "".
	Group, Subject string
	// Ask are the ask-tools entries, as the surfaces write them, whose
	// calls these people approve.
	Ask []string
	// Self lets the caller who asked approve its own call.
	Self bool
	Pos  Position
}

// Admits reports whether c is one of the approver's people.
func (a *Approver) Admits(c Claims) bool {
	return (a.Subject == "" || a.Subject == c.Subject) && (a.Group == "" || slices.Contains(c.Groups, a.Group))
}

// Covers reports whether a call the entries asked for (as the surfaces
// write them) is one the approver approves.
func (a *Approver) Covers(entries []string) bool {
	for _, mine := range a.Ask {
		if slices.Contains(entries, mine) {
			return true
		}
	}
	return false
}

// Who names the approver's people in a sentence.
func (a *Approver) Who() string {
	switch {
	case a.Group != "" && a.Subject != "":
		return fmt.Sprintf("subject %q of group %q", a.Subject, a.Group)
	case a.Group != "":
		return fmt.Sprintf("group %q", a.Group)
	}
	return fmt.Sprintf("subject %q", a.Subject)
}

// ApproversOf are the approvers of a call the entries asked for.
func (g *Generation) ApproversOf(entries []string) []*Approver {
	var out []*Approver
	for _, a := range g.Approvers {
		if a.Covers(entries) {
			out = append(out, a)
		}
	}
	return out
}

// approvers reads the approvers block. An approver that names no one, a
// group or subject no token could carry, an entry that cannot be parsed
// or that no surface's ask-tools writes (so no call would ever reach the
// approver) is an error at its place.
func (c *compiler) approvers(g *Generation, v cue.Value) {
	iter, err := v.Fields()
	if err != nil {
		return
	}
	asked := map[string]bool{}
	for _, s := range g.Surfaces {
		for _, e := range s.Asked {
			asked[e] = true
		}
	}
	for iter.Next() {
		av := iter.Value()
		a := &Approver{Name: iter.Selector().Unquoted(), Pos: c.pos(av, 0),
			Group: str(av.LookupPath(cue.ParsePath("group"))), Subject: str(av.LookupPath(cue.ParsePath("subject"))),
			Self: boolean(av.LookupPath(cue.ParsePath("self")))}
		ok := true
		if a.Group == "" && a.Subject == "" {
			c.fail(av, "P15", "approver %q names no one; give it the group of its people's tokens, or a subject.", a.Name)
			ok = false
		}
		for _, f := range []struct{ field, value string }{{"group", a.Group}, {"subject", a.Subject}} {
			if f.value != "" && strings.IndexFunc(f.value, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
				c.fail(av.LookupPath(cue.ParsePath(f.field)), "P15", "approver %q's %s %q holds white space, which no token's claim carries; write the claim as the identity provider issues it.", a.Name, f.field, f.value)
				ok = false
			}
		}
		lv := av.LookupPath(cue.ParsePath("ask"))
		if lv.Decode(&a.Ask) != nil {
			continue // the schema has reported it
		}
		for i, e := range a.Ask {
			at := lv.LookupPath(cue.MakePath(cue.Index(i)))
			if _, err := allow.ParseEntry(e); err != nil {
				c.fail(at, "P7", "approver %q's entry %q cannot be parsed: %v.", a.Name, e, err)
				ok = false
				continue
			}
			if !asked[e] {
				c.fail(at, "P15", "approver %q approves %q, which no surface's ask-tools holds, so no call would ever wait for it; write an entry of an ask-tools list as it is written there (%s).", a.Name, e, askedList(asked))
				ok = false
			}
		}
		if ok {
			g.Approvers = append(g.Approvers, a)
		}
	}
	sort.Slice(g.Approvers, func(i, j int) bool { return g.Approvers[i].Name < g.Approvers[j].Name })
}

func askedList(asked map[string]bool) string {
	if len(asked) == 0 {
		return "the policy has none"
	}
	var all []string
	for e := range asked {
		all = append(all, fmt.Sprintf("%q", e))
	}
	sort.Strings(all)
	return "the policy's are " + strings.Join(all, ", ")
}
