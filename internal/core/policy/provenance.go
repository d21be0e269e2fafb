package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/provenance"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// The sources an argument's value may be required to come from (rule P18).
const (
	// FromUser is the user's own words: a user line of the line protocol.
	FromUser = "user"
	// FromPolicy is a value the policy lists itself.
	FromPolicy = "policy"
	// FromTrusted is the result of a call that gave the session no label.
	FromTrusted = "trusted"
)

// A Provenance requires the value of a field of a tool's input to come
// from one of its sources (rule P18): each string in it (of a list, of an
// object, a number as JSON writes it) must occur, exactly or normalised
// (provenance.Normal), in the user's words or a trusted result, or equal
// a value the policy lists.
type Provenance struct {
	Tool, Field string
	Pos         Position
	From        []string
	// Values are what the policy vouches for (FromPolicy), as written.
	Values []string
}

// Vouches reports whether the policy lists v (normalised) for p.
func (p *Provenance) Vouches(normal string) bool {
	if !slices.Contains(p.From, FromPolicy) {
		return false
	}
	for _, v := range p.Values {
		if provenance.Normal(v) == normal {
			return true
		}
	}
	return false
}

// Allows reports whether p accepts a value found in source.
func (p *Provenance) Allows(source string) bool { return slices.Contains(p.From, source) }

// ProvenanceOf is what the policy requires of the arguments of a call of
// tool; nil for nothing.
func (g *Generation) ProvenanceOf(tool string) []*Provenance {
	if len(g.Provenance) == 0 {
		return nil
	}
	i := sort.Search(len(g.Provenance), func(i int) bool { return g.Provenance[i].Tool >= tool })
	j := i
	for j < len(g.Provenance) && g.Provenance[j].Tool == tool {
		j++
	}
	if i == j {
		return nil
	}
	return g.Provenance[i:j]
}

// provenance reads provenance: TOOL: FIELD: [sources] or {from, values},
// sorted by tool and field, reporting what cannot be used: a tool the
// policy does not define, a field its input has not, no source, a policy
// source with no value.
func (c *compiler) provenance(g *Generation, v cue.Value) {
	tv, _ := v.LookupPath(cue.ParsePath("provenance")).Fields()
	for tv.Next() {
		tool := tv.Selector().Unquoted()
		if _, _, wild := c.wildcardTool(tool); !defines(g, tool) && !wild {
			msg := fmt.Sprintf("provenance names the tool %q, which the policy does not define, so it would check nothing", tool)
			if near := tools.Closest(tool, g.Names()); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			} else {
				msg += "; " + theTools(g.Names())
			}
			c.errs = append(c.errs, Diagnostic{Pos: c.pos(tv.Value(), 0), Code: rule.P18, Message: msg + " Correct the name or remove it."})
			continue
		}
		fields := inputFields(g.Tools[tool])
		fv, _ := tv.Value().Fields()
		for fv.Next() {
			p := &Provenance{Tool: tool, Field: fv.Selector().Unquoted(), Pos: c.pos(fv.Value(), 0)}
			val := fv.Value()
			if val.IncompleteKind() != cue.ListKind {
				val.LookupPath(cue.ParsePath("values")).Decode(&p.Values)
				val = val.LookupPath(cue.ParsePath("from"))
			}
			val.Decode(&p.From)
			switch {
			case fields != nil && !slices.Contains(fields, p.Field):
				c.errs = append(c.errs, Diagnostic{Pos: p.Pos, Code: rule.P18, Message: fmt.Sprintf("provenance of %s names the field %q, which its input does not have, so it would check nothing; its fields are %s.", tool, p.Field, joinNames(fields))})
			case len(p.From) == 0:
				c.errs = append(c.errs, Diagnostic{Pos: p.Pos, Code: rule.P18, Message: fmt.Sprintf("provenance of %s.%s names no source, so no value could pass; give the sources its value may come from: %q, %q or %q.", tool, p.Field, FromUser, FromPolicy, FromTrusted)})
			case p.Allows(FromPolicy) && len(p.Values) == 0:
				c.errs = append(c.errs, Diagnostic{Pos: p.Pos, Code: rule.P18, Message: fmt.Sprintf("provenance of %s.%s names the source %q but lists no value, so the policy vouches for none; write it {from: [...], values: [...]}, or drop %q.", tool, p.Field, FromPolicy, FromPolicy)})
			case !p.Allows(FromPolicy) && len(p.Values) > 0:
				c.warn(p.Pos, rule.P18, "provenance of %s.%s lists values but not the source %q, so they vouch for nothing; add %q to from, or drop the values.", tool, p.Field, FromPolicy, FromPolicy)
			}
			g.Provenance = append(g.Provenance, p)
		}
	}
	slices.SortFunc(g.Provenance, func(a, b *Provenance) int {
		if a.Tool != b.Tool {
			return strings.Compare(a.Tool, b.Tool)
		}
		return strings.Compare(a.Field, b.Field)
	})
}

// inputFields are the top-level fields of t's input, sorted; nil when not
// known (a tool whose schema its server gives later, or none).
func inputFields(t *Tool) []string {
	if t == nil || t.Gate == nil {
		return nil
	}
	data, err := t.Gate.JSONSchema()
	if err != nil {
		return nil
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(data, &s) != nil || len(s.Properties) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// testSession reads a test's session: each step the user's words, or a
// call of a tool the policy defines with its result; what cannot be used
// is a warning at its place, as the rest of a test's problems are.
func (c *compiler) testSession(g *Generation, name string, v cue.Value) []Step {
	iter, err := v.List()
	if err != nil {
		return nil
	}
	var out []Step
	for i := 1; iter.Next(); i++ {
		sv := iter.Value()
		st := Step{Pos: c.pos(sv, 0), User: str(sv.LookupPath(cue.ParsePath("user"))), Tool: str(sv.LookupPath(cue.ParsePath("tool"))),
			Result: str(sv.LookupPath(cue.ParsePath("result"))), Error: boolean(sv.LookupPath(cue.ParsePath("error")))}
		switch {
		case (st.User == "") == (st.Tool == ""):
			c.warn(st.Pos, rule.P18, "test %q: step %d of its session must give either user (the user's words) or tool and input (a call and its result), not both or neither.", name, i)
			continue
		case st.Tool != "":
			if _, ok := g.Tools[st.Tool]; !ok {
				msg := fmt.Sprintf("test %q: step %d of its session calls %s, a tool the policy does not define", name, i, st.Tool)
				if near := tools.Closest(st.Tool, g.Names()); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else {
					msg += "; " + theTools(g.Names())
				}
				c.warn(st.Pos, rule.P18, "%s", msg)
				continue
			}
			in := sv.LookupPath(cue.ParsePath("input"))
			data, err := in.MarshalJSON()
			if !in.Exists() || err != nil {
				c.warn(st.Pos, rule.P18, "test %q: step %d of its session needs its call's input as concrete JSON.", name, i)
				continue
			}
			st.Input = data
		}
		out = append(out, st)
	}
	return out
}
