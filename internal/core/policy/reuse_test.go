package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// reloadLike loads dir reusing prev, and from scratch, and holds the two
// to be the same load: the same errors, or the same plan (Save, or each
// tool's form where a plan is not saved), positions, vet's diagnostics
// and decisions. It returns the generation loaded with reuse, nil when
// the load failed.
func reloadLike(t *testing.T, dir string, prev *Generation) *Generation {
	t.Helper()
	got, gerr := Load(dir, WithPrevious(prev), WithWorkdir("/w"))
	want, werr := Load(dir, WithWorkdir("/w"))
	if gerr != nil || werr != nil {
		if gerr == nil || werr == nil || gerr.Error() != werr.Error() {
			t.Fatalf("with reuse the load says:\n%v\nfrom scratch:\n%v", gerr, werr)
		}
		return nil
	}
	gs, gserr := got.Save()
	ws, wserr := want.Save()
	if fmt.Sprint(gserr) != fmt.Sprint(wserr) || string(gs) != string(ws) {
		t.Fatalf("with reuse the plan is (%v)\n%s\nfrom scratch (%v)\n%s", gserr, gs, wserr, ws)
	}
	if !slices.Equal(got.Names(), want.Names()) {
		t.Fatalf("with reuse the tools are %v, from scratch %v", got.Names(), want.Names())
	}
	for _, name := range want.Names() {
		g, w := got.Tools[name], want.Tools[name]
		if gf, wf := planForm(t, g), planForm(t, w); gf != wf || g.subjectPos != w.subjectPos {
			t.Fatalf("tool %s with reuse:\n%s (subject at %v)\nfrom scratch:\n%s (subject at %v)", name, gf, g.subjectPos, wf, w.subjectPos)
		}
		for _, in := range reuseInputs {
			if g.Gate == nil || w.Gate == nil {
				if g.Gate != w.Gate {
					t.Fatalf("tool %s has a gate only one way", name)
				}
				continue
			}
			if gv, wv := g.Gate.Check(in), w.Gate.Check(in); !reflect.DeepEqual(gv, wv) {
				t.Fatalf("tool %s decides %v with reuse as %v, from scratch as %v", name, in, gv, wv)
			}
		}
	}
	if gv, wv := fmt.Sprint(Vet(got)), fmt.Sprint(Vet(want)); gv != wv {
		t.Fatalf("vet with reuse:\n%s\nfrom scratch:\n%s", gv, wv)
	}
	for _, ref := range want.SurfaceRefs() {
		ge, gerr := got.Effective([]string{ref})
		we, werr := want.Effective([]string{ref})
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("%s with reuse: %v, from scratch: %v", ref, gerr, werr)
		}
		for _, name := range want.Names() {
			for _, in := range reuseInputs {
				if werr == nil && !reflect.DeepEqual(ge.Decide(name, in, "/w"), we.Decide(name, in, "/w")) {
					t.Fatalf("%s: %s %v is decided otherwise with reuse", ref, name, in)
				}
			}
		}
	}
	return got
}

var reuseInputs = []map[string]any{{"message": "m1"}, {"message": "a1"}, {"message": "b1"}, {"message": "string"},
	{"file_path": "/srv/a"}, {"file_path": "/etc/x"}, {"pattern": "x", "path": "/srv"}, {}}

// planForm is a tool as its plan says it, positions and JSON Schema
// included, but its gate (compared by its decisions: a gate that needs
// CUE is not data).
func planForm(t *testing.T, tool *Tool) string {
	t.Helper()
	js, jerr := tool.JSONSchema()
	c := *tool
	c.Gate = nil
	b, err := json.Marshal(toolData(c))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s\nJSON Schema (%v): %s", b, jerr, js)
}

// rewrite replaces the policy files of dir by files (the module aside).
func rewrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	old, _ := os.ReadDir(dir)
	for _, e := range old {
		if policyFile(e.Name()) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestR3ReloadReusesWhatDidNotChange: a reload reuses the tools whose key
// holds (their gate is the previous generation's), compiles the others
// again, and is the load from scratch either way (issue 32).
func TestR3ReloadReusesWhatDidNotChange(t *testing.T) {
	const tools = "tools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n\tB: schema.#Echo & {input: message: =~#Pat}\n\tC: schema.#Echo & {input: message: =~#Deep}\n\tD: schema.#Read & {input: file_path: =~\"^/srv/\"}\n\tF: schema.#Echo & {input: message: #S}\n}\n"
	const defs = "#Pat: \"^m\"\n#Deep: \"\\(#Pat)1$\"\n#S: \"string\" // vet finds a type's name here\n"
	const agent = "agent: \"allowed-tools\": [\"A\", \"B\", \"C\", \"D\"]\n"
	base := map[string]string{"a.cue": header + tools + defs + agent}
	for _, tc := range []struct {
		note   string
		after  map[string]string
		reused []string
	}{
		{note: "nothing changed", after: base, reused: []string{"A", "B", "C", "D", "F"}},
		{note: "one tool's declaration changed", reused: []string{"B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + strings.Replace(tools, "^a", "^b", 1) + defs + agent}},
		{note: "a definition a tool names changed, and one the definition names", reused: []string{"A", "D", "F"},
			after: map[string]string{"a.cue": header + tools + strings.Replace(defs, "^m", "^b", 1) + agent}},
		{note: "a definition only one tool names through another changed", reused: []string{"A", "B", "D", "F"},
			after: map[string]string{"a.cue": header + tools + strings.Replace(defs, "1$", "2$", 1) + agent}},
		{note: "the definition where vet finds a type's name changed", reused: []string{"A", "B", "C", "D"},
			after: map[string]string{"a.cue": header + tools + strings.Replace(defs, "\"string\"", "\"int\"", 1) + agent}},
		{note: "a definition declared again in another file", reused: []string{"A", "D", "F"},
			after: map[string]string{"a.cue": header + tools + defs + agent, "b.cue": "package policy\n\n#Pat: string\n"}},
		{note: "an allow list changed on its own line", reused: []string{"A", "B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + tools + defs + "agent: \"allowed-tools\": [\"A\", \"D\"]\n"}},
		{note: "a file added beside", reused: []string{"A", "B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + tools + defs + agent, "b.yaml": "subagents:\n  r:\n    allowed-tools: [A]\n"}},
		{note: "a line inserted above the tools moves them and the definitions", reused: []string{"A", "B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + "// moved\n" + tools + defs + agent}},
		{note: "a tool added above the others", reused: []string{"A", "B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + strings.Replace(tools, "{\n", "{\n\tE: schema.#Grep\n", 1) + defs + agent}},
		{note: "a line inserted between the tools and a definition they name", reused: []string{"A", "B", "C", "D", "F"},
			after: map[string]string{"a.cue": header + tools + "\n\n" + defs + agent}},
		{note: "a tool's declaration spread over two lines", reused: []string{"A", "B", "C", "F"},
			after: map[string]string{"a.cue": header + strings.Replace(tools, "D: schema.#Read & {", "D: schema.#Read & {\n\t\t", 1) + defs + agent}},
		{note: "a tool moved within its line", reused: []string{"A", "B", "C", "F"},
			after: map[string]string{"a.cue": header + strings.Replace(tools, "D: schema", "D:  schema", 1) + defs + agent}},
		{note: "the policy's validation mode changed", reused: nil,
			after: map[string]string{"a.cue": header + tools + defs + agent + "validation: \"enforce\"\n"}},
		{note: "an import added to the tools' file", reused: nil,
			after: map[string]string{"a.cue": strings.Replace(header, "import ", "import \"strings\"\nimport ", 1) + tools + defs + agent + "_s: strings.ToUpper(\"x\")\n"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"a.cue": base["a.cue"]})
			prev, err := Load(dir, WithPrevious(nil), WithWorkdir("/w"))
			if err != nil {
				t.Fatal(err)
			}
			rewrite(t, dir, tc.after)
			got := reloadLike(t, dir, prev)
			if got == nil {
				t.Fatal("the edit did not load")
			}
			var reused []string
			for _, name := range got.Names() {
				if old := prev.Tools[name]; old != nil && got.Tools[name].Gate == old.Gate {
					reused = append(reused, name)
				}
			}
			if !slices.Equal(reused, tc.reused) {
				t.Errorf("reused %v, want %v", reused, tc.reused)
			}
		})
	}
}

// TestR3ReloadNeverReusesWhatCouldChange: a declaration whose value the
// syntax cannot follow is compiled again on every reload: one that names
// a tool beside it, or tools, or lies beside an embedding; so is a gate
// that decides through CUE (it would hold the previous load's CUE alive).
func TestR3ReloadNeverReusesWhatCouldChange(t *testing.T) {
	for _, tc := range []struct {
		note, body string
		fresh      []string // compiled again each time
	}{
		{note: "a tool names the tool beside it", body: "tools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n\tB: A\n}\n", fresh: []string{"B"}},
		{note: "a definition names tools", body: "tools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n\tB: _t\n}\n_t: tools.A\n", fresh: []string{"B"}},
		{note: "an embedding at the top", body: "_x: {}\n_x\ntools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n}\n", fresh: []string{"A"}},
		{note: "a gate that needs CUE", body: "tools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n\tR: schema.#Read & {input: {offset?: int, limit?: int & >offset}}\n}\n", fresh: []string{"R"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"a.cue": header + tc.body})
			prev, err := Load(dir, WithPrevious(nil))
			if err != nil {
				t.Fatal(err)
			}
			got := reloadLike(t, dir, prev)
			for _, name := range got.Names() {
				if reused := got.Tools[name].Gate == prev.Tools[name].Gate; reused == slices.Contains(tc.fresh, name) {
					t.Errorf("tool %s reused: %v", name, reused)
				}
			}
		})
	}
}

// TestR3ReloadToABrokenPolicy: a reload to a policy that does not load
// fails as a load from scratch does, and the next reuses the last good
// generation as if the broken one never was.
func TestR3ReloadToABrokenPolicy(t *testing.T) {
	good := header + "tools: {\n\tA: schema.#Echo & {input: message: =~\"^a\"}\n\tB: schema.#Echo & {input: message: =~\"^b\"}\n}\n"
	dir := writePolicy(t, map[string]string{"a.cue": good})
	prev, err := Load(dir, WithPrevious(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ note, body string }{
		{"a syntax error", good + "agent: {\n"},
		{"a tool that does not compile beside one reused", strings.Replace(good, "=~\"^b\"", "=~\"^b\" & \"a\"", 1)},
		{"an unknown definition", strings.Replace(good, "=~\"^b\"", "#Missing", 1)},
		{"a tool widened", strings.Replace(good, "message: =~\"^b\"", "extra: string", 1)},
	} {
		t.Run(tc.note, func(t *testing.T) {
			rewrite(t, dir, map[string]string{"a.cue": tc.body})
			if g := reloadLike(t, dir, prev); g != nil {
				t.Fatal("the broken policy loaded")
			}
			rewrite(t, dir, map[string]string{"a.cue": strings.Replace(good, "^a", "^c", 1)})
			g := reloadLike(t, dir, prev)
			if g.Tools["B"].Gate != prev.Tools["B"].Gate {
				t.Error("B, unchanged since the last good generation, was not reused")
			}
			if d := g.Tools["A"].Gate.Check(map[string]any{"message": "c1"}); d != nil {
				t.Errorf("A, changed, decides as before: %v", d)
			}
		})
	}
}

// FuzzR3ReloadReuseIsALoad: a chain of generated edits, each loaded
// reusing the last good generation, gives at every step the load from
// scratch (reloadLike): tools changed, definitions they name changed,
// lists changed, files added and removed, YAML, lines inserted, edits
// that break the policy.
func FuzzR3ReloadReuseIsALoad(f *testing.F) {
	for i := range uint64(4) {
		f.Add(i, i*31+5)
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		r := rand.New(rand.NewPCG(s1, s2))
		dir := writePolicy(t, map[string]string{})
		var prev *Generation
		p := newGenPolicy(r)
		for range 6 {
			p.edit(r)
			rewrite(t, dir, p.files())
			if g := reloadLike(t, dir, prev); g != nil {
				prev = g
			}
		}
	})
}

// genPolicy is a generated policy: tools in two CUE files and a YAML one,
// definitions they may name, and lists.
type genPolicy struct {
	tools  [3][]string // per file: a.cue, b.cue, c.yaml
	defs   map[string]string
	lists  []string
	top    int // blank lines above a.cue's tools
	mode   string
	broken bool
}

var genDecls = []string{
	"schema.#Echo & {input: message: =~\"^a\"}", "schema.#Echo & {input: message: =~\"^b\"}",
	"schema.#Echo & {input: message: =~#P}", "schema.#Echo & {input: message: =~#Q}", "schema.#Echo",
	"schema.#Echo & {input: message: \"string\"}", "schema.#Read & {input: file_path: =~\"^/srv/\"}",
	"schema.#Grep & {timeout: \"20s\"}", "schema.#Grep & {timeout: #D}",
	"schema.#Read & {input: {offset?: int, limit?: int & >offset}}",
}

var genYAML = []string{"{builtin: Echo}", "{builtin: Read}", "{builtin: Echo, input: {type: object, properties: {message: {type: string, pattern: '^b'}}}}",
	"{builtin: Echo, input: {message: string}}"}

func newGenPolicy(r *rand.Rand) *genPolicy {
	p := &genPolicy{defs: map[string]string{"#P": "\"^m\"", "#Q": "\"\\(#P)1$\"", "#D": "\"5s\""}}
	for range 4 {
		p.addTool(r)
	}
	return p
}

func (p *genPolicy) addTool(r *rand.Rand) {
	f := r.IntN(3)
	if f == 2 {
		p.tools[f] = append(p.tools[f], genYAML[r.IntN(len(genYAML))])
		return
	}
	p.tools[f] = append(p.tools[f], genDecls[r.IntN(len(genDecls))])
}

// edit makes one random edit.
func (p *genPolicy) edit(r *rand.Rand) {
	p.broken = false
	switch r.IntN(10) {
	case 0:
		p.addTool(r)
	case 1: // change a tool
		f := r.IntN(2)
		if n := len(p.tools[f]); n > 0 {
			p.tools[f][r.IntN(n)] = genDecls[r.IntN(len(genDecls))]
		}
	case 2: // remove a tool
		f := r.IntN(3)
		if n := len(p.tools[f]); n > 0 {
			i := r.IntN(n)
			p.tools[f] = slices.Delete(p.tools[f], i, i+1)
		}
	case 3:
		p.defs["#P"] = []string{"\"^m\"", "\"^b\"", "\"^[ab]\"", "string"}[r.IntN(4)]
	case 4:
		p.defs["#Q"] = []string{"\"\\(#P)1$\"", "\"1$\"", "#P"}[r.IntN(3)]
	case 5:
		p.lists = append(p.lists, []string{"Base", "Ta0", "Ta1", "Tb0", "Tc0", "Tc1", "Tx"}[r.IntN(7)])
	case 6:
		p.top = r.IntN(3)
	case 7:
		p.mode = []string{"", "enforce", "warn"}[r.IntN(3)]
	case 8:
		p.broken = true
	case 9:
		p.defs["#D"] = []string{"\"5s\"", "\"20s\""}[r.IntN(2)]
	}
}

// files renders the policy; its tools are named after their file and index.
func (p *genPolicy) files() map[string]string {
	out := map[string]string{}
	for i, name := range []string{"a.cue", "b.cue"} {
		if len(p.tools[i]) == 0 && i == 1 {
			continue
		}
		var s strings.Builder
		s.WriteString(header)
		if i == 0 {
			s.WriteString(strings.Repeat("\n", p.top))
		}
		s.WriteString("tools: {\n")
		if i == 0 {
			s.WriteString("\tBase: schema.#Echo\n") // the import is used
		}
		for j, d := range p.tools[i] {
			fmt.Fprintf(&s, "\tT%c%d: %s\n", 'a'+i, j, d)
		}
		s.WriteString("}\n")
		if i == 0 {
			for _, k := range slices.Sorted(maps.Keys(p.defs)) {
				fmt.Fprintf(&s, "%s: %s\n", k, p.defs[k])
			}
			var quoted []string
			for _, e := range p.lists {
				quoted = append(quoted, fmt.Sprintf("%q", e))
			}
			fmt.Fprintf(&s, "agent: \"allowed-tools\": [%s]\n", strings.Join(quoted, ", "))
			if p.mode != "" {
				fmt.Fprintf(&s, "validation: %q\n", p.mode)
			}
			if p.broken {
				s.WriteString("tools: Ta0: input: extra: string\n")
			}
		}
		out[name] = s.String()
	}
	if len(p.tools[2]) > 0 {
		var s strings.Builder
		s.WriteString("tools:\n")
		for j, d := range p.tools[2] {
			fmt.Fprintf(&s, "  Tc%d: %s\n", j, d)
		}
		out["c.yaml"] = s.String()
	}
	return out
}

// TestR3OneShotLoadKeepsNothing: a load that no reload follows (check,
// vet: no WithPrevious) keeps no tools for one, and a reload from such a
// generation compiles everything, as a load from scratch.
func TestR3OneShotLoadKeepsNothing(t *testing.T) {
	dir := writePolicy(t, map[string]string{"a.cue": header + "tools: A: schema.#Echo & {input: message: =~\"^a\"}\n"})
	once, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if once.reuse != nil {
		t.Errorf("a one-shot load kept %d tools", len(once.reuse))
	}
	if g := reloadLike(t, dir, once); g.Tools["A"].Gate == once.Tools["A"].Gate || len(g.reuse) != 1 {
		t.Errorf("the reload reused a tool, or keeps %d", len(g.reuse))
	}
}
