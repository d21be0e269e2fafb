package policy

import (
	"errors"
	"fmt"
	"strings"

	"aimon.dev/gw/policy/allow"
)

// compileLists compiles every declared allow list once per generation
// (rules P1, P7, P10). An entry that cannot be used is reported; it denies.
func (c *compiler) compileLists(g *Generation) {
	subjects := map[string]allow.Subject{}
	for name, t := range g.Tools {
		var s allow.Subject
		if t.Subject != nil {
			s = allow.Subject{Field: t.Subject.Field, Kind: allow.Kind(t.Subject.Kind)}
		}
		subjects[name] = s
	}
	g.lists = map[string][]*allow.List{}
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		if !s.Declared {
			continue
		}
		sources := s.Sources
		if len(sources) == 0 {
			sources = []Source{{Start: 0, End: len(s.Entries)}}
		}
		for _, src := range sources {
			entries := c.resolveEntries(s.Entries[src.Start:src.End], subjects)
			l, errs := allow.Compile(c.ctx, entries, subjects)
			g.lists[ref] = append(g.lists[ref], l)
			for _, err := range errs {
				pos := Position{}
				var ee *allow.EntryError
				if errors.As(err, &ee) {
					for i, e := range entries {
						if e == ee.Entry {
							pos = s.EntryPos[src.Start+i]
							break
						}
					}
				}
				c.warn(pos, "P7", "%s: %v; until it is fixed it denies.", ref, err)
			}
		}
	}
}

// Effective returns the effective allow list of a surface chain: the
// unification of the lists along it (rule P10), computed once per
// generation. The main agent is always the chain's root. A chain that names
// a surface the policy does not declare, or that leaves no tool, is refused
// with a sentence (rule P11).
func (g *Generation) Effective(chain []string) (*allow.Effective, error) {
	if len(chain) == 0 || chain[0] != "agent" {
		chain = append([]string{"agent"}, chain...)
	}
	var lists []*allow.List
	for _, ref := range chain {
		if _, ok := g.Surfaces[ref]; !ok {
			return nil, fmt.Errorf("The surface %q is not declared in the policy; declared surfaces are %s.", ref, joinNames(g.SurfaceRefs()))
		}
		if ls := g.lists[ref]; ls != nil {
			lists = append(lists, ls...)
		} else {
			lists = append(lists, nil)
		}
	}
	e, err := g.chains.Get(strings.Join(chain, "\x00"), lists...)
	if err != nil {
		return nil, fmt.Errorf("The run on %s is refused: %w.", strings.Join(chain, " > "), err)
	}
	return e, nil
}

// unknownWorkdir stands for the working directory when a load is given none
// (vet): a relative pattern then matches nothing rather than everything.
const unknownWorkdir = "/nonexistent/aimon-gw/workdir"

// resolveEntries rewrites path patterns written relative to the working
// directory ("./src/**", ".") as absolute ones (rule P4), so that a policy
// can say "under the working directory" without knowing where that is.
func (c *compiler) resolveEntries(entries []string, subjects map[string]allow.Subject) []string {
	out := make([]string, len(entries))
	for i, raw := range entries {
		out[i] = raw
		e, err := allow.ParseEntry(raw)
		if err != nil || !e.HasPattern || subjects[e.Tool].Kind != allow.Path {
			continue
		}
		if e.Pattern != "." && !strings.HasPrefix(e.Pattern, "./") {
			continue
		}
		wd := c.opts.workdir
		if wd == "" {
			wd = unknownWorkdir
		}
		abs := strings.TrimSuffix(wd, "/") + strings.TrimPrefix(e.Pattern, ".")
		if abs == "" {
			abs = "/"
		}
		out[i] = e.Tool + "(" + abs + ")"
	}
	return out
}
