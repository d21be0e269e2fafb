package gate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

func TestS6UnknownSentence(t *testing.T) {
	g := builtinGate(t, "#ReadInput")
	vs := g.Check(decode(t, `{"file_paht": "/tmp/x"}`))
	got := tools.Sentences(vs, false)
	want := "Missing required parameter 'file_path'. Unknown parameter 'file_paht'. Did you mean 'file_path'? The tool was not executed."
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	vs = g.Check(decode(t, `{"file_path": "/x", "file_paht": "/tmp/x"}`))
	got = tools.Sentences(vs, false)
	want = "Unknown parameter 'file_paht'. Did you mean 'file_path'? The tool was not executed."
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestS6UnknownBesideTheDeclared: the gate skips its search for unknown
// names only when every name given is declared (issue 49), so an unknown
// name is found beside all the declared ones, or among as many names as
// the schema declares, and a null under an unknown name stays missing.
func TestS6UnknownBesideTheDeclared(t *testing.T) {
	read := builtinGate(t, "#ReadInput") // file_path, offset, limit
	for _, tc := range []struct{ input, want string }{
		{`{"file_path": "/a", "offset": 1, "limit": 2}`, ""},
		{`{"file_path": "/a", "offset": 1, "limit": 2, "mode": "x"}`, "Unknown parameter 'mode'."},
		{`{"file_path": "/a", "offset": 1, "mode": "x"}`, "Unknown parameter 'mode'."},
		{`{"file_path": "/a", "offset": null, "mode": null}`, ""},
		{`{"offset": 1, "limit": 2, "file_paht": "/a"}`, "Missing required parameter 'file_path'.\nUnknown parameter 'file_paht'. Did you mean 'file_path'?"},
	} {
		if got := sentences(t, read, tc.input); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.input, got, tc.want)
		}
	}
}

func TestS4(t *testing.T) {
	read := builtinGate(t, "#ReadInput")
	grep := builtinGate(t, "#GrepInput")
	cases := []struct {
		name  string
		g     *Gate
		input string
		want  string
	}{
		{"valid", read, `{"file_path": "/a", "offset": 1, "limit": 2}`, ""},
		{"missing", read, `{}`, "Missing required parameter 'file_path'."},
		{"null is missing", read, `{"file_path": null}`, "Missing required parameter 'file_path'."},
		{"null optional is absent", read, `{"file_path": "/a", "offset": null}`, ""},
		{"type", read, `{"file_path": 3}`, "Parameter 'file_path' must be a string, got number 3."},
		{"S11 string number", read, `{"file_path": "/a", "limit": "10"}`, `Parameter 'limit' must be an integer, got string "10".`},
		{"bool for int", read, `{"file_path": "/a", "limit": true}`, `Parameter 'limit' must be an integer, got boolean true.`},
		{"object for string", read, `{"file_path": {"a": 1}}`, `Parameter 'file_path' must be a string, got an object.`},
		{"enum ok", grep, `{"pattern": "x", "output_mode": "count"}`, ""},
		{"enum", grep, `{"pattern": "x", "output_mode": "lines"}`,
			`Parameter 'output_mode' must be one of "content", "files_with_matches", "count", got string "lines".`},
		{"wire names", grep, `{"pattern": "x", "-i": true, "-A": 3}`, ""},
		{"wire name type", grep, `{"pattern": "x", "-A": "3"}`, `Parameter '-A' must be an integer, got string "3".`},
		{"unknown no suggestion", grep, `{"pattern": "x", "recursive": true}`, "Unknown parameter 'recursive'."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sentences(t, tc.g, tc.input); got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestS5Integer(t *testing.T) {
	g := compileCUE(t, `#In: {i?: int, n?: number, f?: float}`, "#In")
	for _, tc := range []struct {
		input string
		ok    bool
	}{
		{`{"i": 3}`, true},
		{`{"i": 3.0}`, true},
		{`{"i": 30e-1}`, true},
		{`{"i": -0.0}`, true},
		{`{"i": 1e2}`, true},
		{`{"i": 3.5}`, false},
		{`{"i": 1e-2}`, false},
		{`{"n": 3}`, true},
		{`{"n": 3.0}`, true},
		{`{"n": 3.5}`, true},
		{`{"n": "3"}`, false},
		// CUE's float is a number with a fraction; 3.0 is an int (S5).
		{`{"f": 3.5}`, true},
		{`{"f": 3.0}`, false},
	} {
		vs := g.Check(decode(t, tc.input))
		if (len(vs) == 0) != tc.ok {
			t.Errorf("%s: ok=%v, violations %v", tc.input, tc.ok, vs)
		}
	}
	if got := sentences(t, g, `{"i": 3.5}`); got != "Parameter 'i' must be an integer, got number 3.5." {
		t.Errorf("sentence %q", got)
	}
}

func TestS10AllAtOnce(t *testing.T) {
	g := builtinGate(t, "#EditInput")
	got := sentences(t, g, `{"file_path": 1, "old_strin": "a", "new_string": null, "replace_all": "yes"}`)
	want := strings.Join([]string{
		"Parameter 'file_path' must be a string, got number 1.",
		"Missing required parameter 'new_string'.",
		"Missing required parameter 'old_string'.",
		`Parameter 'replace_all' must be a boolean, got string "yes".`,
		"Unknown parameter 'old_strin'. Did you mean 'old_string'?",
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestS4Nested(t *testing.T) {
	g := compileCUE(t, `
#In: {
	edits!: [...{old!: string, new?: string, opts?: {deep!: bool}}]
	meta?: {tag?: "a" | "b"}
	tags?: [...string]
	open?: {known?: int, ...}
	counts?: [string]: int
	anything?: _
}`, "#In")
	cases := []struct{ input, want string }{
		{`{"edits": []}`, ""},
		{`{"edits": [{"old": "a", "opts": {"deep": true}}], "meta": {"tag": "a"}, "tags": ["x"], "open": {"zzz": 1}, "counts": {"a": 1}, "anything": {"q": [1]}}`, ""},
		{`{"edits": [{"old": "a"}, {"olt": "b"}]}`, "Missing required parameter 'edits[1].old'.\nUnknown parameter 'edits[1].olt'. Did you mean 'edits[1].old'?"},
		{`{"edits": [{"old": "a", "opts": {}}]}`, "Missing required parameter 'edits[0].opts.deep'."},
		{`{"edits": [{"old": "a", "opts": {"deep": true, "deeper": 1}}]}`, "Unknown parameter 'edits[0].opts.deeper'."},
		{`{"edits": "x"}`, `Parameter 'edits' must be an array, got string "x".`},
		{`{"edits": [1]}`, `Parameter 'edits[0]' must be an object, got number 1.`},
		{`{"edits": [], "meta": {"tag": "c", "x": 1}}`, `Parameter 'meta.tag' must be one of "a", "b", got string "c".` + "\nUnknown parameter 'meta.x'."},
		{`{"edits": [], "tags": ["a", 2]}`, `Parameter 'tags[1]' must be a string, got number 2.`},
		{`{"edits": [], "open": {"known": "1"}}`, `Parameter 'open.known' must be an integer, got string "1".`},
		{`{"edits": [], "counts": {"a": "1"}}`, `Parameter 'counts.a' must be an integer, got string "1".`},
	}
	for _, tc := range cases {
		if got := sentences(t, g, tc.input); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.input, got, tc.want)
		}
	}
}

func TestS7AuthorConstraintsEnforced(t *testing.T) {
	pkg := schemaPackage(t, `narrowed: #Read & {input: file_path: =~"^/srv/", input: limit?: int & >=1 & <=100}`)
	g, err := Compile(pkg.LookupPath(cueParse("narrowed.input")))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ input, want string }{
		{`{"file_path": "/srv/a", "limit": 5}`, ""},
		{`{"file_path": "/etc/passwd"}`, `Parameter 'file_path' must satisfy =~"^/srv/", got string "/etc/passwd".`},
		{`{"file_path": "/srv/a", "limit": 500}`, `Parameter 'limit' must satisfy >=1 & <=100, got number 500.`},
		{`{"file_path": "/etc/a", "limit": 0}`, `Parameter 'file_path' must satisfy =~"^/srv/", got string "/etc/a".` + "\n" +
			`Parameter 'limit' must satisfy >=1 & <=100, got number 0.`},
		// Bounds and regular expressions are checked with the rest, all at once.
		{`{"file_path": "/etc/a", "limt": 0}`, `Parameter 'file_path' must satisfy =~"^/srv/", got string "/etc/a".` + "\nUnknown parameter 'limt'. Did you mean 'limit'?"},
	}
	for _, tc := range cases {
		if got := sentences(t, g, tc.input); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.input, got, tc.want)
		}
	}
}

func TestCompileBadSchema(t *testing.T) {
	for _, src := range []string{`x: string`, `x: 1 & 2`, `x: [...int]`} {
		v := cueCtx().CompileString(src)
		if _, err := Compile(v.LookupPath(cueParse("x"))); err == nil {
			t.Errorf("Compile(%s) = nil error", src)
		}
	}
	if _, err := Compile(cueCtx().CompileString("{}").LookupPath(cueParse("nope"))); err == nil {
		t.Error("Compile of a missing value = nil error")
	}
}

func TestLimits(t *testing.T) {
	g, err := CompileLimits(cueCtx().CompileString(`#In: {s?: string, o?: {...}, a?: [...]}`).LookupPath(cueParse("#In")),
		Limits{MaxDepth: 4, MaxKeys: 3, MaxKeyLen: 8, MaxString: 10, MaxItems: 3})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ input, want string }{
		{`{"s": "0123456789"}`, ""},
		{`{"s": "01234567890"}`, "Parameter 's' is a string of 11 bytes; at most 10 are accepted."},
		{`{"o": {"a": 1, "b": 2, "c": 3, "d": 4}}`, "Parameter 'o' has 4 names; at most 3 are accepted."},
		{`{"o": {"abcdefghi": 1}}`, "Parameter 'o.abcdefghi' is a name of 9 bytes; at most 8 are accepted."},
		{`{"o": {"a": {"b": {"c": 1}}}}`, ""},
		{`{"o": {"a": {"b": {"c": {"d": 1}}}}}`, "Parameter 'o.a.b.c' is nested more than 4 levels deep."},
		{`{"a": [1, 2, 3, 4]}`, "Parameter 'a' has 4 items; at most 3 are accepted."},
		{`{"a": [[[[1]]]]}`, "Parameter 'a[0][0][0]' is nested more than 4 levels deep."},
		{`{"o": {"n": 1e999}}`, "Parameter 'o.n' is a number too large to check (number 1e999)."},
	}
	for _, tc := range cases {
		if got := sentences(t, g, tc.input); got != tc.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tc.input, got, tc.want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok       bool
		integral bool
		key      string
	}{
		{"0", true, true, "0"},
		{"-0.0", true, true, "0"},
		{"3", true, true, "3e0"},
		{"3.0", true, true, "3e0"},
		{"30e-1", true, true, "3e0"},
		{"300", true, true, "3e2"},
		{"1E2", true, true, "1e2"},
		{"1e+2", true, true, "1e2"},
		{"-2.50", true, false, "-25e-1"},
		{"0.001", true, false, "1e-3"},
		{"1e400", true, true, "1e400"},
		{"", false, false, ""},
		{"-", false, false, ""},
		{"1e", false, false, ""},
		{".5", false, false, ""},
		{"1.2.3", false, false, ""},
		{"0x10", false, false, ""},
		{"1e999999999", false, false, ""},
	} {
		n, ok := parseNumber(tc.in)
		if ok != tc.ok || (ok && (n.integral() != tc.integral || n.key() != tc.key)) {
			t.Errorf("parseNumber(%q) = %+v, %v; want ok=%v integral=%v key=%s", tc.in, n, ok, tc.ok, tc.integral, tc.key)
		}
	}
}

// Check is called from the batches of many sessions at once (rule K2).
func TestCheckConcurrent(t *testing.T) {
	pkg := schemaPackage(t, `cross: #Read & {input: {offset?: int, limit?: int & >=offset}}`)
	shape := builtinGate(t, "#EditInput")
	viaCUE, err := Compile(pkg.LookupPath(cueParse("cross.input")))
	if err != nil {
		t.Fatal(err)
	}
	if !viaCUE.root.CUE {
		t.Fatal("cross.input should need CUE")
	}
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 50 {
				in := map[string]any{"file_path": "/a", "offset": json.Number("5"), "limit": json.Number(fmt.Sprint(i + j))}
				want := i+j < 5
				if got := len(viaCUE.Check(in)) > 0; got != want {
					t.Errorf("limit %d: refused=%v, want %v", i+j, got, want)
				}
				if vs := shape.Check(map[string]any{"file_path": "/a"}); len(vs) != 2 {
					t.Errorf("edit: %v", vs)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

// A Go caller may pass float64 and int instead of json.Number.
func TestCheckGoNumbers(t *testing.T) {
	g := compileCUE(t, `#In: {i?: int & >=1, n?: number}`, "#In")
	for _, tc := range []struct {
		in map[string]any
		ok bool
	}{
		{map[string]any{"i": 3, "n": 2.5}, true},
		{map[string]any{"i": 3.0}, true},
		{map[string]any{"i": int64(3)}, true},
		{map[string]any{"i": 3.5}, false},
		{map[string]any{"i": 0}, false},
		{map[string]any{"i": uint8(3)}, false}, // not a decoded JSON value
	} {
		if got := len(g.Check(tc.in)) == 0; got != tc.ok {
			t.Errorf("%v: ok=%v, want %v (%v)", tc.in, got, tc.ok, g.Check(tc.in))
		}
	}
}

// What CUE finds comes back in the gateway's sentences, not CUE's.
func TestCUEPathSentences(t *testing.T) {
	cases := []struct{ def, input, want string }{
		{"#Pattern", `{"x-a": 1, "a": "s"}`, ""},
		{"#Pattern", `{"zz": 1, "x-a": 1}`, "Unknown parameter 'zz'."},
		{"#Pattern", `{"x-a": "s"}`, `Parameter 'x-a' must satisfy int, got string "s".`},
		{"#Cross", `{"lo": 1, "hi": 5}`, ""},
		{"#Cross", `{"lo": 5, "hi": 1}`, `Parameter 'hi' must satisfy >=lo, got number 1.`},
		{"#StrBound", `{"a": "a"}`, `Parameter 'a' must satisfy >="b", got string "a".`},
		{"#Validator", `{"a": {"x": 1}}`, ""},
		{"#Validator", `{"a": {}}`, `Parameter 'a' must satisfy struct.MinFields(1) & {}, got an object.`},
		{"#Disj", `{"u": {"k": "a", "x": 1}}`, ""},
		{"#Disj", `{"u": {"k": "a", "y": "s"}}`, `Parameter 'u' must satisfy { k: "a" x!: int } | { k: "b" y!: string }, got an object.`},
		{"#Prefix", `{"p": [1, 2]}`, `Parameter 'p[1]' must satisfy its schema, got number 2.`},
	}
	for _, tc := range cases {
		g := compileCUE(t, diffSchemas, tc.def)
		if got := sentences(t, g, tc.input); got != tc.want {
			t.Errorf("%s %s:\ngot  %q\nwant %q", tc.def, tc.input, got, tc.want)
		}
	}
}

// Bad input gets a sentence, never a panic or a hang, with the default
// limits and whatever encoding/json lets through.
func TestBadInputDefaultLimits(t *testing.T) {
	g := compileCUE(t, `#In: {s?: string, a?: _, o?: {...}}`, "#In")
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	many := make([]string, 300)
	for i := range many {
		many[i] = fmt.Sprintf("%q: 1", fmt.Sprint("k", i))
	}
	cases := []struct{ name, input, want string }{
		{"deep", `{"a": ` + deep + `}`, "Parameter 'a" + strings.Repeat("[0]", 63) + "' is nested more than 64 levels deep."},
		{"huge string", `{"s": "` + strings.Repeat("x", 16<<20+1) + `"}`, "Parameter 's' is a string of 16777217 bytes; at most 16777216 are accepted."},
		{"many names", `{"o": {` + strings.Join(many, ", ") + `}}`, "Parameter 'o' has 300 names; at most 256 are accepted."},
		{"long name", `{"o": {"` + strings.Repeat("n", 300) + `": 1}}`, "Parameter 'o." + strings.Repeat("n", 40) + "…' is a name of 300 bytes; at most 256 are accepted."},
		{"huge number", `{"a": 1e999999}`, "Parameter 'a' is a number too large to check (number 1e999999)."},
	}
	for _, tc := range cases {
		if got := sentences(t, g, tc.input); got != tc.want {
			t.Errorf("%s: got %.200q\nwant %.200q", tc.name, got, tc.want)
		}
	}
}

// Below the depth the shape compiles, CUE judges, and sees the whole value.
func TestDeepSchema(t *testing.T) {
	const levels = maxCompileDepth + 6
	src := "#In: " + strings.Repeat("{a?: ", levels) + "{x!: int}" + strings.Repeat("}", levels)
	g := compileCUE(t, src, "#In")
	input := func(x string) string {
		return strings.Repeat(`{"a": `, levels) + `{"x": ` + x + `}` + strings.Repeat("}", levels)
	}
	if got := sentences(t, g, input("1")); got != "" {
		t.Errorf("valid deep input refused: %s", got)
	}
	if got := sentences(t, g, input(`"s"`)); got == "" {
		t.Error("a wrong type below the compiled depth passed")
	}
	if got := sentences(t, g, input(`1, "y": 2`)); got == "" {
		t.Error("an unknown name below the compiled depth passed")
	}
}
