package policy

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"aimon.dev/gw/internal/core/allow"
)

// compileLists compiles every declared allow list once per generation
// (rules P1, P7, P10), and the effective list of the main agent and of
// each surface it starts, so that their cost is paid within the load's
// time bound (rule R5) rather than by a call. An entry that cannot be used
// is reported; it denies.
func (c *compiler) compileLists(g *Generation) {
	for _, ref := range g.SurfaceRefs() {
		g.Effective([]string{ref}) // a refusal is kept for the calls too
	}
}

// listSubjects maps every tool to its declared subject, for allow.Compile.
func listSubjects(g *Generation) map[string]allow.Subject {
	subjects := map[string]allow.Subject{}
	for name, t := range g.Tools {
		var s allow.Subject
		if t.Subject != nil {
			s = allow.Subject{Field: t.Subject.Field, Kind: allow.Kind(t.Subject.Kind)}
		}
		subjects[name] = s
	}
	return subjects
}

// readers maps each tool of g that reads the file its subject names (reads
// "file": Read, Claude Code's Read, Gemini CLI's read_file, a path tool
// whose effect is read) to the other tools that read files and those that
// search a tree (reads "tree": Grep, Glob, theirs), which its deny and ask
// entries bind too (rule P17), whoever runs them; nil when there are none.
// It is a property the schema declares (ReadsAs), so a runtime's tools and
// an MCP server's readers are bound as the built-ins are.
func readers(g *Generation) *allow.Readers {
	reads := map[string]bool{}
	var all []string
	for _, name := range slices.Sorted(maps.Keys(g.Tools)) {
		switch g.Tools[name].ReadsAs() {
		case "file":
			reads[name] = true
			all = append(all, name)
		case "tree":
			all = append(all, name)
		}
	}
	return allow.NewReaders(reads, all)
}

// surfaceLists compiles the lists of one surface, one per source; nil when
// it declares none. Its deny and ask entries, which accumulate rather than
// meet (rule P14), go with its first list, or make one of their own when
// it declares no allowed-tools.
func (c *compiler) surfaceLists(s *Surface, subjects map[string]allow.Subject, readers *allow.Readers) []*allow.List {
	if !s.Declared && len(s.Denied) == 0 && len(s.Asked) == 0 {
		return nil
	}
	sources := s.Sources
	if len(sources) == 0 {
		sources = []Source{{Start: 0, End: len(s.Entries)}}
	}
	var out []*allow.List
	for i, src := range sources {
		d := allow.Decl{AllowNone: !s.Declared, Readers: readers}
		if s.Declared {
			d.Allow = c.resolveEntries(s.Entries[src.Start:src.End], subjects)
		}
		if i == 0 {
			d.Deny, d.Ask = c.resolveEntries(s.Denied, subjects), c.resolveEntries(s.Asked, subjects)
		}
		l, errs := allow.CompileDecl(c.lists, d, subjects)
		out = append(out, l)
		for _, err := range errs {
			c.warn(s.errorPlace(err, d, src.Start), "P7", "%s: %v; until it is fixed it denies.", s.Ref, err)
		}
	}
	return out
}

// errorPlace is where the entry of an *allow.EntryError is written.
func (s *Surface) errorPlace(err error, d allow.Decl, start int) Position {
	var ee *allow.EntryError
	if !errors.As(err, &ee) {
		return Position{}
	}
	entries, pos := d.Allow, s.EntryPos[start:]
	switch ee.List {
	case allow.DeniedTools:
		entries, pos = d.Deny, s.DeniedPos
	case allow.AskTools:
		entries, pos = d.Ask, s.AskedPos
	}
	if i := slices.Index(entries, ee.Entry); i >= 0 && i < len(pos) {
		return pos[i]
	}
	return Position{}
}

// chainKey names a chain in Chains.
func chainKey(chain []string) string { return strings.Join(chain, "\x00") }

// surfaceLists are a generation's declared lists by surface reference,
// one per source, each compiled from the plan when first asked: a load
// asks for all of them, a restored generation (a hook decision) for one or
// two.
type surfaceLists struct {
	mu       sync.Mutex
	subjects map[string]allow.Subject
	readers  *allow.Readers
	by       map[string][]*allow.List
}

func newSurfaceLists() *surfaceLists {
	return &surfaceLists{by: map[string][]*allow.List{}}
}

// listsOf returns the compiled lists of the surface ref.
func (g *Generation) listsOf(ref string) []*allow.List {
	m := g.lists
	m.mu.Lock()
	defer m.mu.Unlock()
	ls, ok := m.by[ref]
	if !ok {
		if m.subjects == nil {
			m.subjects, m.readers = listSubjects(g), readers(g)
		}
		ls = g.comp.surfaceLists(g.Surfaces[ref], m.subjects, m.readers)
		m.by[ref] = ls
	}
	return ls
}

// Rooted is chain with the main agent as its root: every chain's.
func Rooted(chain []string) []string {
	if len(chain) == 0 || chain[0] != "agent" {
		return append([]string{"agent"}, chain...)
	}
	return chain
}

// Extends reports whether chain, rooted, begins with ceiling (rooted):
// whether a gateway, or a principal, of chain ceiling decides it, or
// refuses it (rule R5).
func Extends(ceiling, chain []string) bool {
	line := Rooted(chain)
	return len(line) >= len(ceiling) && slices.Equal(line[:len(ceiling)], ceiling)
}

// Effective returns the effective allow list of a surface chain: the
// unification of the lists along it (rule P10), computed once per
// generation. The main agent is always the chain's root. A chain that names
// a surface the policy does not declare, or that leaves no tool, is refused
// with a sentence (rule P11).
func (g *Generation) Effective(chain []string) (*allow.Effective, error) {
	if len(chain) == 0 || len(chain) == 1 && chain[0] == "agent" {
		// The main agent's, asked for by nearly every line serve reads:
		// kept apart, so that it costs no key, lock or list (issue 49).
		return g.chains.Root(func() (*allow.Effective, error) { return g.effective(rootChain) })
	}
	return g.effective(Rooted(chain))
}

var rootChain = []string{"agent"}

// effective is Effective of a rooted chain.
func (g *Generation) effective(chain []string) (*allow.Effective, error) {
	for _, ref := range chain {
		if _, ok := g.Surfaces[ref]; !ok {
			if !wellFormedRef(ref) {
				return nil, fmt.Errorf("The surface %q is not a surface reference, which is agent, subagent:NAME, skill:NAME or command:NAME; declared surfaces are %s.", ref, joinNames(g.SurfaceRefs()))
			}
			return nil, fmt.Errorf("The surface %q is not declared in the policy; declared surfaces are %s.", ref, joinNames(g.SurfaceRefs()))
		}
	}
	var lists []*allow.List
	for _, ref := range chain {
		if ls := g.listsOf(ref); ls != nil {
			lists = append(lists, ls...)
		} else {
			lists = append(lists, nil)
		}
	}
	e, err := g.chains.Get(chainKey(chain), lists...)
	if err != nil {
		return nil, fmt.Errorf("The run on %s is refused: %w.", strings.Join(chain, " > "), err)
	}
	return e, nil
}

// wellFormedRef reports whether ref has the form of a surface reference
// (agent, subagent:NAME, skill:NAME, command:NAME), so that a refusal
// can tell a misspelt kind from a surface the policy lacks.
func wellFormedRef(ref string) bool {
	kind, name, ok := strings.Cut(ref, ":")
	return ref == "agent" || ok && name != "" && (kind == "subagent" || kind == "skill" || kind == "command")
}

// unknownWorkdir stands for the working directory when a load is given none
// (vet): a relative pattern then matches nothing rather than everything.
const unknownWorkdir = "/nonexistent/aimon-gw/workdir"

// globEscaper escapes the characters a doublestar pattern reads as glob.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`, "{", `\{`, "}", `\}`)

// resolveEntries rewrites path patterns written relative to the working
// directory ("./src/**", ".") or to the home directory ("~/.ssh/**") as
// absolute ones (rule P4), so that a policy can say "under the working
// directory" or "in the user's home" without knowing where that is.
func (c *compiler) resolveEntries(entries []string, subjects map[string]allow.Subject) []string {
	out := make([]string, len(entries))
	for i, raw := range entries {
		out[i] = raw
		e, err := allow.ParseEntry(raw)
		if err != nil || !e.HasPattern || subjects[e.Tool].Kind != allow.Path {
			continue
		}
		if rest, ok := strings.CutPrefix(e.Pattern, "~/"); ok {
			// The home of the user the lists are compiled for, where the
			// call runs (a hook's user), not where the policy was written.
			if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
				out[i] = e.Tool + "(" + globEscaper.Replace(strings.TrimSuffix(home, "/")) + "/" + rest + ")"
			}
			continue
		}
		if e.Pattern != "." && !strings.HasPrefix(e.Pattern, "./") {
			continue
		}
		wd := c.opts.workdir
		if wd == "" {
			wd = unknownWorkdir
		}
		// The working directory is a name, not a pattern: its glob
		// characters are escaped as doublestar reads escapes.
		abs := globEscaper.Replace(strings.TrimSuffix(wd, "/")) + strings.TrimPrefix(e.Pattern, ".")
		if abs == "" {
			abs = "/"
		}
		out[i] = e.Tool + "(" + abs + ")"
	}
	return out
}
