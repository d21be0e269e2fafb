package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/rule"
)

// savedFormat changes whenever the saved form does.
const savedFormat = 4

// ErrNotSaved says why a generation cannot be saved: some decision of it
// needs more than its saved form holds.
var ErrNotSaved = errors.New("the generation cannot be saved")

type saved struct {
	Format       int
	Dir          string
	Revision     string
	Tools        map[string]*Tool
	Gates        map[string]*gate.Saved
	Surfaces     map[string]*Surface
	Parallel     Parallel
	Validation   rule.Mode
	UnknownTools string
	Tests        []Test
	Principals   []*Principal
	Warnings     []Diagnostic
	Dirs         []string
	Inputs       []string
	// Chains name the effective lists of the chains a hook decides under
	// (the agent, and the agent with each other surface), by Effective's
	// key, in the order of the lines that follow the object; Workdir is
	// the working directory they were resolved against, "" when no entry
	// is relative to it.
	Chains  []string
	Workdir string
}

// Save returns what Restore needs to make a generation that decides every
// call as g does: the compiled gates and the allow lists as written, as a
// JSON object, then the effective list of each chain a hook decides under
// as a line of JSON of its own. It refuses (ErrNotSaved) a generation whose decisions depend on more than
// its files: a plugin's or an upstream server's declared tools, or a gate
// that needs CUE for some input.
func (g *Generation) Save() ([]byte, error) {
	s := saved{Format: savedFormat, Dir: g.Dir, Revision: g.Revision, Tools: g.Tools, Gates: map[string]*gate.Saved{},
		Surfaces: g.Surfaces, Parallel: g.Parallel, Validation: g.Validation, UnknownTools: g.UnknownTools,
		Tests: g.Tests, Principals: g.Principals, Warnings: g.Warnings, Dirs: g.Dirs, Inputs: g.Inputs}
	if len(g.Wildcards) > 0 {
		return nil, fmt.Errorf("%w: a server exposes \"*\", whose tools it lists when it runs", ErrNotSaved)
	}
	for _, name := range g.Names() {
		t := g.Tools[name]
		switch {
		case t.Plugin != nil || t.Upstream != nil || t.pending:
			return nil, fmt.Errorf("%w: %s is a %s tool, whose schema its implementation declares", ErrNotSaved, name, t.Kind())
		case t.Gate == nil:
			return nil, fmt.Errorf("%w: %s has no gate", ErrNotSaved, name)
		}
		gs, err := t.Gate.Save()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNotSaved, name, err)
		}
		s.Gates[name] = gs
	}
	var lists [][]byte
	for _, ref := range g.SurfaceRefs() {
		chain := []string{"agent"}
		if ref != "agent" {
			chain = append(chain, ref)
		}
		// A chain whose list needs CUE, or that is refused, is left to
		// be compiled from the lists on use.
		if e, err := g.Effective(chain); err == nil {
			if se, err := e.Save(); err == nil {
				b, err := json.Marshal(se)
				if err != nil {
					return nil, err
				}
				s.Chains = append(s.Chains, chainKey(chain))
				lists = append(lists, b)
			}
		}
	}
	if g.comp != nil && g.relative() {
		s.Workdir = g.comp.opts.workdir
	}
	// The lists follow the object, a line each (JSON holds no newline),
	// so that a restore reads only the one a decision needs.
	out, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	for _, b := range lists {
		out = append(append(out, '\n'), b...)
	}
	return out, nil
}

// Restore makes a generation from what Save wrote, with path patterns
// relative to the working directory resolving as opts say (WithWorkdir),
// as a load with the same options would. Its tools have no CUE Input
// (their gates decide without it) and it cannot be completed; a restored
// generation is for deciding calls.
func Restore(data []byte, opts ...Option) (*Generation, error) {
	var s saved
	head, rest, _ := bytes.Cut(data, []byte("\n"))
	if err := json.Unmarshal(head, &s); err != nil {
		return nil, fmt.Errorf("the saved policy cannot be read: %w", err)
	}
	if s.Format != savedFormat {
		return nil, fmt.Errorf("the saved policy is of format %d, not %d", s.Format, savedFormat)
	}
	if s.Surfaces["agent"] == nil {
		return nil, errors.New("the saved policy has no agent surface")
	}
	g := &Generation{Dir: s.Dir, Revision: s.Revision, Tools: s.Tools, Surfaces: s.Surfaces, Parallel: s.Parallel,
		Validation: s.Validation, UnknownTools: s.UnknownTools, Tests: s.Tests, Principals: s.Principals, Warnings: s.Warnings,
		Dirs: s.Dirs, Inputs: s.Inputs, Restored: true, chains: &allow.Chains{}}
	if g.Tools == nil {
		g.Tools = map[string]*Tool{}
	}
	for name, t := range g.Tools {
		if t == nil || t.Name != name {
			return nil, fmt.Errorf("the saved tool %q is not named so", name)
		}
		gt, err := gate.Restore(s.Gates[name])
		if err != nil {
			return nil, fmt.Errorf("the saved tool %s: %w", name, err)
		}
		t.Gate = gt
	}
	for ref, sf := range g.Surfaces {
		if sf == nil || sf.Ref != ref {
			return nil, fmt.Errorf("the saved surface %q is not named so", ref)
		}
		for _, src := range sf.Sources {
			if src.Start < 0 || src.Start > src.End || src.End > len(sf.Entries) {
				return nil, fmt.Errorf("the saved surface %s has a list outside its entries", ref)
			}
		}
		if len(sf.EntryPos) != len(sf.Entries) || len(sf.DeniedPos) != len(sf.Denied) || len(sf.AskedPos) != len(sf.Asked) {
			return nil, fmt.Errorf("the saved surface %s has %d positions for %d entries", ref, len(sf.EntryPos)+len(sf.DeniedPos)+len(sf.AskedPos), len(sf.Entries)+len(sf.Denied)+len(sf.Asked))
		}
	}
	// The lists are compiled as a load compiles them, from the entries as
	// written, so that they resolve against this working directory; each
	// when a chain first needs it.
	c := newCompiler(s.Dir, opts)
	c.ctx = cuecontext.New()
	g.lazy = &lazyLists{c: c, subjects: listSubjects(g), done: map[string][]*allow.List{}, effective: map[string]*allow.Effective{}}
	lists := map[string][]byte{}
	for _, key := range s.Chains {
		var line []byte
		if len(rest) == 0 {
			return nil, errors.New("the saved policy has fewer effective lists than it names")
		}
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		lists[key] = line
	}
	if len(rest) > 0 {
		return nil, errors.New("the saved policy has more effective lists than it names")
	}
	if s.Workdir == "" || s.Workdir == c.opts.workdir {
		g.lazy.saved = lists
	}
	return g, nil
}

// Relative reports whether some entry resolves against the working
// directory g was loaded with ("./" patterns), so that its decisions hold
// for that directory alone; true for a restored generation, which cannot
// tell.
func (g *Generation) Relative() bool { return g.comp == nil || g.relative() }

// relative reports whether some entry resolves against the working
// directory, so that the effective lists depend on it.
func (g *Generation) relative() bool {
	subjects := listSubjects(g)
	for _, s := range g.Surfaces {
		for _, es := range [][]string{s.Entries, s.Denied, s.Asked} {
			if !slices.Equal(g.comp.resolveEntries(es, subjects), es) {
				return true
			}
		}
	}
	return false
}
