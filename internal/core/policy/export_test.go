package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"aimon.dev/gw/internal/core/gate"
)

// distinctPolicy is a policy of n built-in tools each narrowed its own way,
// in the forms policies narrow with (patterns, bounds, enums, defaults,
// doc comments), so that no two share a gate.
func distinctPolicy(t testing.TB, n int) string {
	var s strings.Builder
	s.WriteString(header + "tools: {\n")
	for i := range n {
		switch i % 6 {
		case 0:
			fmt.Fprintf(&s, "\tT%d: schema.#Echo & {input: message: =~\"^m%d\"}\n", i, i)
		case 1:
			fmt.Fprintf(&s, "\tT%d: schema.#Read & {input: {file_path: =~\"^/srv/%d/\", limit?: int & >=1 & <=%d}}\n", i, i, 100+i)
		case 2:
			fmt.Fprintf(&s, "\tT%d: schema.#Grep & {input: {output_mode?: \"content\" | \"count\", head_limit?: *%d | int}}\n", i, i)
		case 3:
			fmt.Fprintf(&s, "\tT%d: schema.#Bash & {input: timeout?: int & <=%d}\n", i, 1000+i)
		case 4:
			fmt.Fprintf(&s, "\tT%d: schema.#Glob & {input: {\n\t\t// Only below /w%d.\n\t\tpath?: =~\"^/w%d\" | null\n\t}}\n", i, i, i)
		case 5:
			fmt.Fprintf(&s, "\tT%d: schema.#Write & {input: content: string & !~\"secret%d\"}\n", i, i)
		}
	}
	s.WriteString("}\n")
	return writePolicy(t, map[string]string{"policy.cue": s.String()})
}

// scriptPolicies writes the policies of the command's test scripts and
// returns their directories: each directory of an archive that holds a
// cue.mod.
func scriptPolicies(t *testing.T) []string {
	archives, err := filepath.Glob("../../../cmd/aimon-gw/testdata/script/*.txtar")
	if err != nil || len(archives) == 0 {
		t.Fatalf("no test scripts: %v", err)
	}
	var dirs []string
	for _, a := range archives {
		ar, err := txtar.ParseFile(a)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		for _, f := range ar.Files {
			p := filepath.Join(root, f.Name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			if dir, ok := strings.CutSuffix(f.Name, "cue.mod/module.cue"); ok {
				dirs = append(dirs, filepath.Join(root, dir))
			}
		}
	}
	return dirs
}

// TestS1ExportEqualsCUE: every tool's JSON Schema, built from its gate, is
// byte for byte what CUE's exporter writes of its input, on the shipped
// examples, the default policy, the test scripts' policies and a policy of
// tools each narrowed its own way.
func TestS1ExportEqualsCUE(t *testing.T) {
	keepCUE = true
	defer func() { keepCUE = false }()
	dirs := map[string]string{
		"default":  "../defaultpolicy",
		"distinct": distinctPolicy(t, 60),
	}
	examples, _ := filepath.Glob("../../../examples/policies/*")
	for _, d := range examples {
		dirs["example "+filepath.Base(d)] = d
	}
	for _, d := range scriptPolicies(t) {
		dirs["script "+d] = d
	}
	loaded, compared, shaped := 0, 0, 0
	for note, dir := range dirs {
		g, err := Load(dir)
		if err != nil {
			if !strings.HasPrefix(note, "script ") {
				t.Errorf("%s: %v", note, err)
			}
			continue // a script's policy may be wrong on purpose
		}
		loaded++
		for _, name := range g.Names() {
			tool := g.Tools[name]
			if tool.Gate == nil || tool.declared != nil || !tool.Input.Exists() {
				continue
			}
			if !tool.Gate.NeedsCUE() && !tool.Gate.Exported() {
				shaped++ // the shape writes it
			}
			want, werr := gate.ExportJSONSchema(tool.Input)
			got, err := tool.JSONSchema()
			if werr != nil || err != nil || string(got) != string(want) {
				t.Errorf("%s: tool %s exports\n%s (%v)\nCUE's exporter\n%s (%v)", note, name, got, err, want, werr)
			}
			compared++
		}
	}
	t.Logf("%d of %d policies loaded, %d tools compared, %d exported from the shape", loaded, len(dirs), compared, shaped)
	if loaded < 10 || compared < 100 || shaped < compared/2 {
		t.Errorf("%d policies loaded, %d tools compared, %d from the shape: the test compares too little", loaded, compared, shaped)
	}
}

// TestS1LoadExportsNoSchema: a load, vet and the decisions of a chain build
// no JSON Schema (issue 32); the first list does, once a gate, and Save
// builds what no list asked for, since a restored gate cannot.
func TestS1LoadExportsNoSchema(t *testing.T) {
	before := gate.ExportsBuilt()
	g, err := Load(distinctPolicy(t, 12))
	if err != nil {
		t.Fatal(err)
	}
	Vet(g)
	e, err := g.Effective([]string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	e.Decide("T0", map[string]any{"message": "m0"}, "/")
	g.Tools["T0"].Gate.Check(map[string]any{"message": "x"})
	if n := gate.ExportsBuilt() - before; n != 0 {
		t.Fatalf("a load, vet and a decision built %d JSON Schemas; they need none", n)
	}
	for name, tool := range g.Tools {
		if tool.Gate.Exported() {
			t.Errorf("%s: its JSON Schema was built at load", name)
		}
	}
	if _, err := g.Tools["T0"].JSONSchema(); err != nil {
		t.Fatal(err)
	}
	if n := gate.ExportsBuilt() - before; n != 1 || !g.Tools["T0"].Gate.Exported() || g.Tools["T1"].Gate.Exported() {
		t.Errorf("asking for one tool's JSON Schema built %d", n)
	}
	// A plan saves only gates that decide without CUE.
	if g, err = Load(writePolicy(t, map[string]string{"policy.cue": header + `tools: {A: schema.#Echo & {input: message: =~"^a"}, B: schema.#Read}`})); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Save(); err != nil {
		t.Fatal(err)
	}
	for name, tool := range g.Tools {
		if !tool.Gate.Exported() {
			t.Errorf("%s: Save did not build its JSON Schema", name)
		}
	}
}
