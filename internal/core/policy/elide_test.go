package policy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
)

// TestC1ElidedToolsAreOnlyWhatNothingNames holds which tools a load leaves
// out of CUE's evaluation (issue 49): a tool written and laid out as an
// earlier one in the same file, whose name nothing in the policy uses;
// none when the tools could be reached without their names (tools named,
// aliased, self).
func TestC1ElidedToolsAreOnlyWhatNothingNames(t *testing.T) {
	for _, tc := range []struct {
		note   string
		body   string
		elided []string
	}{
		{note: "alike tools", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n\tC: schema.#Echo\n\tR: schema.#Read\n}\n", elided: []string{"B", "C"}},
		// Its first line's places move by columns too (issue 49).
		{note: "one text further along its line", body: "tools: {\n\tA: schema.#Echo & {timeout: \"1s\"}\n\tB:  schema.#Echo & {timeout: \"1s\"}\n\tC: schema.#Echo & {timeout: \"1s\"}\n}\n", elided: []string{"B", "C"}},
		{note: "one text written otherwise", body: "tools: {\n\tA: schema.#Echo & {timeout: \"1s\"}\n\tB: schema.#Echo & {timeout:  \"1s\"}\n\tC: schema.#Echo & {timeout: \"1s\"}\n}\n", elided: []string{"C"}},
		{note: "a tool another names", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n\tC: schema.#Echo\n\tD: B & {timeout: \"2s\"}\n}\n", elided: []string{"C"}},
		{note: "a tool a definition selects", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\n_d: {x: _}.B\n", elided: nil},
		{note: "a tool indexed by its name", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n\tC: schema.#Echo\n}\n_d: _x[\"B\"]\n_x: {}\n", elided: []string{"C"}},
		{note: "tools named", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\nagent: \"allowed-tools\": [for k, _ in tools {k}]\n", elided: nil},
		{note: "tools aliased", body: "T=tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\nagent: \"allowed-tools\": [for k, _ in T {k}]\n", elided: nil},
		{note: "self in the tools", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n\tC: {description: \"\\(len([for k, _ in self {k}]))\"}\n}\n", elided: nil},
		{note: "a tool declared twice", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\ntools: B: timeout: \"3s\"\n", elided: nil},
		{note: "a server's tool and a name #Policy does not take", body: "tools: {\n\tA: schema.#Echo\n\ts__t: schema.#Echo\n\t\"b c\": schema.#Echo\n\tD: schema.#Echo\n}\n", elided: []string{"D"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			f, err := parser.ParseFile("/p/a.cue", header+tc.body)
			if err != nil {
				t.Fatal(err)
			}
			ctx := cuecontext.New()
			def, err := Schema(ctx)
			if err != nil {
				t.Fatal(err)
			}
			files := []*ast.File{f}
			c := &compiler{ctx: ctx, def: def, decls: toolDecls(files, nil)}
			out, e := c.elide(files)
			var got []string
			if e != nil {
				got = slices.Sorted(maps.Keys(e.shared))
			}
			if !slices.Equal(got, tc.elided) {
				t.Fatalf("left out %v, want %v", got, tc.elided)
			}
			if e == nil && out[0] != f || e != nil && out[0] == f {
				t.Fatalf("the syntax built is the file's own: %v, with %d left out", out[0] == f, len(got))
			}
			// The syntax read for everything else is the file as parsed.
			if n := strings.Count(mustFormat(t, f), "schema.#Echo"); n != strings.Count(tc.body, "schema.#Echo") {
				t.Fatalf("the parsed file changed: %d declarations of Echo", n)
			}
		})
	}
}

func mustFormat(t *testing.T, f *ast.File) string {
	t.Helper()
	b, err := format.Node(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestC1ElidedToolsSayTheirOwnProblems: a policy whose alike tools are
// wrong reports each at its own file:line:col, as a load that evaluates
// every tool does, and so does one whose problem lies elsewhere.
func TestC1ElidedToolsSayTheirOwnProblems(t *testing.T) {
	for _, tc := range []struct {
		note, body string
		at         []string
	}{
		{note: "alike tools that widen their built-in", body: "tools: {\n\tA: schema.#Echo & {input: extra: string}\n\tB: schema.#Echo & {input: extra: string}\n}\n",
			at: []string{"a.cue:6:", "a.cue:7:"}},
		{note: "alike tools with an unknown field", body: "tools: {\n\tA: schema.#Echo & {bogus: 1}\n\tB: schema.#Echo & {bogus: 1}\n}\n",
			at: []string{"a.cue:6:", "a.cue:7:"}},
		{note: "alike tools beside a bad surface", body: "tools: {\n\tA: schema.#Echo\n\tB: schema.#Echo\n}\nagent: \"max-effect\": \"sometimes\"\n",
			at: []string{"a.cue:9:"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"a.cue": header + tc.body})
			_, err := Load(dir)
			shareTools = false
			_, whole := Load(dir)
			shareTools = true
			if err == nil || whole == nil || err.Error() != whole.Error() {
				t.Fatalf("the load says:\n%v\nwith every tool evaluated:\n%v", err, whole)
			}
			for _, at := range tc.at {
				if !strings.Contains(err.Error(), at) {
					t.Errorf("no problem at %s:\n%v", at, err)
				}
			}
		})
	}
}
