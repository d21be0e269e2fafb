package policy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestC1SharedToolsCompileAsAlone holds the compiled tools of a policy,
// where tools written alike share one compiled form, equal to compiling
// each on its own; where the syntax may hide a conjunct (a tool declared
// twice, a pattern, an embedding) nothing is shared (issue 32).
func TestC1SharedToolsCompileAsAlone(t *testing.T) {
	for _, tc := range []struct {
		note    string
		files   map[string]string
		timeout map[string]time.Duration // what a shared form would lose
	}{
		{note: "alike and unlike declarations in two files", files: map[string]string{
			"a.cue": header + "tools: {\n\tE1: schema.#Echo\n\tE2: schema.#Echo\n\tR1: schema.#Read & {input: file_path: =~\"^/srv/\"}\n\tR2: schema.#Read & {input: file_path: =~\"^/srv/\"}\n\tR3: schema.#Read\n}\n",
			"b.cue": header + "tools: E3: schema.#Echo\ntools: \"E-4\": schema.#Echo & {timeout: \"9s\"}\n",
		}, timeout: map[string]time.Duration{"E-4": 9 * time.Second}},
		{note: "a tool declared twice meets both", files: map[string]string{
			"a.cue": header + "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\ntools: A: timeout: \"5s\"\n",
		}, timeout: map[string]time.Duration{"A": 5 * time.Second}},
		{note: "a pattern adds to every tool", files: map[string]string{
			"a.cue": header + "tools: [string]: timeout: \"7s\"\ntools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\n",
		}, timeout: map[string]time.Duration{"A": 7 * time.Second, "B": 7 * time.Second}},
		{note: "an embedding adds to one tool", files: map[string]string{
			"a.cue": header + "_extra: tools: B: timeout: \"3s\"\n_extra\ntools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\n",
		}, timeout: map[string]time.Duration{"B": 3 * time.Second}},
		{note: "alike tools vet warns of, and one another names", files: map[string]string{
			"a.cue": header + "tools: {\n\tM: schema.#Echo & {input: message: \"string\"}\n\tB: schema.#Echo & {input: message: \"string\"}\n\tC: schema.#Echo & {input: message: \"string\"}\n\tD: C & {timeout: \"4s\"}\n}\nagent: \"allowed-tools\": [\"M\", \"B\", \"Z\"]\n",
		}, timeout: map[string]time.Duration{"D": 4 * time.Second}},
		{note: "values over several lines, with comments and commas, read from the file's bytes", files: map[string]string{
			"a.cue": header + "tools: {\n\tA: schema.#Echo & { // two seconds\n\t\ttimeout: \"2s\"\n\t}\n\tB: schema.#Echo & { // two seconds\n\t\ttimeout: \"2s\"\n\t}, C: schema.#Echo & {timeout: \"3s\"},\n\tD: schema.#Echo & {timeout: \"3s\"}\n\tE: schema.#Echo & { // two seconds\n\t\ttimeout: \"2s\"\n\t\tinput: message: =~\"^m\"\n\t}\n}\n",
		}, timeout: map[string]time.Duration{"A": 2 * time.Second, "B": 2 * time.Second, "C": 3 * time.Second, "D": 3 * time.Second, "E": 2 * time.Second}},
		{note: "a let beside the tools", files: map[string]string{
			"a.cue": header + "let e = schema.#Echo\ntools: {\n\tA: e\n\tB: e & {timeout: \"2s\"}\n}\n",
		}, timeout: map[string]time.Duration{"B": 2 * time.Second}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, tc.files)
			shared, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			shareTools = false
			alone, err := Load(dir)
			shareTools = true
			if err != nil {
				t.Fatal(err)
			}
			if len(shared.Tools) != len(alone.Tools) {
				t.Fatalf("%d tools shared, %d alone", len(shared.Tools), len(alone.Tools))
			}
			// What vet says of a tool sharing another's form is placed in
			// the tool's own declaration, not in the other's (these are
			// one line each). Tools of one gate are reported once.
			gates := map[any]int{}
			for _, tool := range shared.Tools {
				gates[tool.Gate]++
			}
			for _, d := range Vet(shared) {
				name, _, ok := strings.Cut(strings.TrimPrefix(d.Message, "tool "), ":")
				if tool := shared.Tools[name]; ok && tool != nil && gates[tool.Gate] > 1 && d.Pos.Line != tool.ImplPos.Line {
					t.Errorf("vet places %q at %v, tool %s is declared at %v", d.Message, d.Pos, name, tool.ImplPos)
				}
			}
			for name, a := range alone.Tools {
				s := shared.Tools[name]
				if s == nil {
					t.Fatalf("tool %s is missing when shared", name)
				}
				if got, want := toolForm(t, s), toolForm(t, a); got != want {
					t.Errorf("tool %s shared:\n%s\nalone:\n%s", name, got, want)
				}
				if s.Timeout != tc.timeout[name] {
					t.Errorf("tool %s has timeout %v, want %v", name, s.Timeout, tc.timeout[name])
				}
				if !s.ImplPos.IsValid() || s.ImplPos.File != a.ImplPos.File || s.Pos != a.Pos {
					t.Errorf("tool %s is placed at %v (implementation %v), alone at %v (%v)", name, s.Pos, s.ImplPos, a.Pos, a.ImplPos)
				}
			}
		})
	}
}

// toolForm is what a compiled tool says, its CUE value and gate aside
// (the gate is derived from the schema, which is compared).
func toolForm(t *testing.T, tool *Tool) string {
	t.Helper()
	c := *tool
	c.Gate, c.Pos, c.ImplPos = nil, Position{}, Position{}
	b, err := json.MarshalIndent(c, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestC1SharedToolsArePlacedInTheirOwnColumns: tools whose names differ in
// length, written alike on one line each, share one compiled form (issue
// 49: a 1,000-tool policy evaluated Tool9, Tool10 and Tool100 each), and
// what vet places in that form, on the declaration's first line, is at
// each tool's own column and line, as compiling each alone places it.
func TestC1SharedToolsArePlacedInTheirOwnColumns(t *testing.T) {
	decl := `schema.#Echo & {input: message: "string", subject: {field: "message", kind: "path"}}`
	dir := writePolicy(t, map[string]string{"a.cue": header + "tools: {\n\tM: " + decl + "\n\tLonger: " + decl + "\n\tLongest10: " + decl + "\n}\n"})
	var evaluated []string
	evaluating = func(name string) { evaluated = append(evaluated, name) }
	shared, err := Load(dir)
	evaluating = nil
	if err != nil {
		t.Fatal(err)
	}
	if len(evaluated) != 1 {
		t.Errorf("tools %v were evaluated; want one, the others sharing its form", evaluated)
	}
	shareTools = false
	alone, err := Load(dir)
	shareTools = true
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range alone.Tools {
		s := shared.Tools[name]
		if len(a.typeNames) == 0 || !a.subjectPos.IsValid() {
			t.Fatalf("tool %s alone has no type name finding or subject place to compare: %+v %v", name, a.typeNames, a.subjectPos)
		}
		if !slices.Equal(s.typeNames, a.typeNames) || s.subjectPos != a.subjectPos {
			t.Errorf("tool %s shared places %+v and its subject at %v; alone %+v and %v", name, s.typeNames, s.subjectPos, a.typeNames, a.subjectPos)
		}
	}
}
