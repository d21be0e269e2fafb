package gate

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"cuelang.org/go/cue"

	"aimon.dev/gw/tools"
)

func TestS1ExportBuiltin(t *testing.T) {
	pkg := schemaPackage(t, "")
	// A policy holds a built-in's input as #Tool's {...} & #ReadInput; the
	// export must be the same self-contained, closed schema either way.
	for _, p := range []string{"#ReadInput", "#Read.input"} {
		b, err := ExportJSONSchema(pkg.LookupPath(cue.ParsePath(p)))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,` +
			`"properties":{"file_path":{"description":"The path of the file to read.","type":"string"},` +
			`"limit":{"description":"How many lines to return (default 2000).","type":"integer"},` +
			`"offset":{"description":"The 1-based line to start at (default 1).","type":"integer"}},` +
			`"required":["file_path"],"type":"object"}`
		if string(b) != want {
			t.Errorf("%s:\ngot  %s\nwant %s", p, b, want)
		}
	}
}

func TestS1ExportShapes(t *testing.T) {
	v := cueCtx().CompileString(`
#In: {
	// Where.
	path!: string & =~"^/srv/"
	n?: int & >=1 & <=10
	x?: number & >0 & <1
	mode: *"fast" | "slow"
	kind?: string | null
	items?: [...{name!: string}]
	labels?: [string]: string
	fixed: "v1"
}`)
	b, err := ExportJSONSchema(v.LookupPath(cue.ParsePath("#In")))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	props := got["properties"].(map[string]any)
	check := func(name, want string) {
		t.Helper()
		pb, _ := json.Marshal(props[name])
		if string(pb) != want {
			t.Errorf("%s: got %s, want %s", name, pb, want)
		}
	}
	check("path", `{"description":"Where.","pattern":"^/srv/","type":"string"}`)
	check("n", `{"maximum":10,"minimum":1,"type":"integer"}`)
	check("x", `{"exclusiveMaximum":1,"exclusiveMinimum":0,"type":"number"}`)
	check("mode", `{"default":"fast","enum":["fast","slow"]}`)
	check("kind", `{"type":["string","null"]}`)
	check("items", `{"items":{"additionalProperties":false,"properties":{"name":{"type":"string"}},"required":["name"],"type":"object"},"type":"array"}`)
	check("labels", `{"additionalProperties":{"type":"string"},"type":"object"}`)
	check("fixed", `{"const":"v1"}`)
	rb, _ := json.Marshal(got["required"])
	if string(rb) != `["path"]` {
		t.Errorf("required = %s, want only path (mode has a default, fixed a value)", rb)
	}
}

func TestExportBadSchema(t *testing.T) {
	for _, src := range []string{`x: string`, `x: 1 & 2`} {
		v := cueCtx().CompileString(src).LookupPath(cue.ParsePath("x"))
		if _, err := ExportJSONSchema(v); err == nil {
			t.Errorf("ExportJSONSchema(%s) = nil error", src)
		}
	}
}

func importGate(t *testing.T, schema string) *Gate {
	t.Helper()
	v, err := ImportJSONSchema(cueCtx(), []byte(schema))
	if err != nil {
		t.Fatalf("import %s: %v", schema, err)
	}
	g, err := Compile(v)
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	return g
}

func TestS3ImportOpenUnlessDeclared(t *testing.T) {
	cases := []struct{ schema, input, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"x","b":1}`, ""},
		{`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{"a":"x","b":1}`, "Unknown parameter 'b'."},
		{`{"type":"object","properties":{"query":{"type":"string"}},"additionalProperties":false}`, `{"qeury":"x"}`, "Unknown parameter 'qeury'. Did you mean 'query'?"},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"integer"}}}},"additionalProperties":false}`, `{"o":{"z":1}}`, ""},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false}}}`, `{"o":{"z":1}}`, "Unknown parameter 'o.z'."},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":null}`, "Missing required parameter 'a'."},
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"a":3.0}`, ""},
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, `{"a":3.5}`, "Parameter 'a' must be an integer, got number 3.5."},
		{`{"type":"object","properties":{"a":{"enum":["x","y"]}}}`, `{"a":"z"}`, `Parameter 'a' must be one of "x", "y", got string "z".`},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`, `{"a":["x",1]}`, "Parameter 'a[1]' must be a string, got number 1."},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"a":1,"b":"x"}`, `Parameter 'b' must be an integer, got string "x".`},
		{`{"properties":{"a":{"type":"string"}}}`, `{"a":"x"}`, ""},
		{`true`, `{"a":"x"}`, ""},
		{`{}`, `{"a":"x"}`, ""},
	}
	for _, tc := range cases {
		if got := sentences(t, importGate(t, tc.schema), tc.input); got != tc.want {
			t.Errorf("%s on %s:\ngot  %q\nwant %q", tc.schema, tc.input, got, tc.want)
		}
	}
}

func TestS7ImportIgnoresRange(t *testing.T) {
	g := importGate(t, `{"type":"object","properties":{
		"timeout":{"type":"integer","minimum":1,"maximum":600000,"default":120000,"multipleOf":1000},
		"name":{"type":"string","minLength":3,"maxLength":4,"pattern":"^[a-z]+$","format":"email"},
		"tags":{"type":"array","minItems":2,"maxItems":3,"uniqueItems":true},
		"o":{"type":"object","minProperties":2}
	},"additionalProperties":false}`)
	if got := sentences(t, g, `{"timeout":9999999,"name":"A!","tags":["a","a","a","a"],"o":{}}`); got != "" {
		t.Errorf("range keywords were enforced: %s", got)
	}
	// Type and names still are.
	if got := sentences(t, g, `{"timeout":"1"}`); got != `Parameter 'timeout' must be an integer, got string "1".` {
		t.Errorf("got %q", got)
	}
}

func TestS8ImportLetsUnreadablePass(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
		`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`,
		`{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}}}`,
		`{"type":"object","properties":{"a":{"not":{"type":"boolean"}}}}`,
		`{"type":"object","properties":{"a":{"type":"strnig"}}}`,
		`{"type":"object","properties":{"a":{"type":["string","date"]}}}`,
		`{"type":"object","properties":{"a":{"if":{"type":"string"},"then":{"minLength":9}}}}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"(?<=x)y":{}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"items":[{"type":"string"}]}}}`,
	} {
		g := importGate(t, schema)
		if got := sentences(t, g, `{"a":true,"other":[1]}`); got != "" && !strings.Contains(schema, `"a":{"type":"string"}`) {
			t.Errorf("%s refused an input it cannot read: %s", schema, got)
		}
	}
	// The readable parts of such a schema still count.
	g := importGate(t, `{"type":"object","properties":{"a":{"$ref":"#/x"},"b":{"type":"integer"}},"required":["b"]}`)
	if got := sentences(t, g, `{"a":1}`); got != "Missing required parameter 'b'." {
		t.Errorf("got %q", got)
	}
}

func TestImportBadSchema(t *testing.T) {
	for _, schema := range []string{
		``, `{`, `{"type":"object"} {}`, `[1]`, `{"type":"string"}`, `{"type":["integer","null"]}`,
	} {
		if _, err := ImportJSONSchema(cueCtx(), []byte(schema)); err == nil {
			t.Errorf("ImportJSONSchema(%q) = nil error", schema)
		}
	}
}

// An exported built-in, imported back as an outside tool would declare it,
// gives the same verdicts (rules S1, S3).
func TestExportImportRoundTrip(t *testing.T) {
	pkg := schemaPackage(t, "")
	r := rand.New(rand.NewPCG(3, 4))
	for name, in := range builtinInputs(t, pkg) {
		b, err := ExportJSONSchema(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ImportJSONSchema(cueCtx(), b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g1, err := Compile(in)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := Compile(back)
		if err != nil {
			t.Fatal(err)
		}
		for range 200 {
			x := gen{r}.input(g1)
			v1, v2 := g1.Check(x), g2.Check(x)
			if tools1, tools2 := sentencesOf(v1), sentencesOf(v2); tools1 != tools2 {
				xb, _ := json.Marshal(x)
				t.Errorf("%s on %s:\nbuilt-in  %s\nround trip %s", name, xb, tools1, tools2)
			}
		}
	}
}

func sentencesOf(vs []tools.Violation) string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Sentence)
	}
	return strings.Join(s, " ")
}

// A policy may narrow an outside tool's schema in CUE; that is its author's
// declaration, and enforced (rule S7), however the two were unified.
func TestS7PolicyNarrowsImportedSchema(t *testing.T) {
	ctx := cueCtx()
	declared, err := ImportJSONSchema(ctx, []byte(`{"type":"object","properties":{"a":{"type":"string","minLength":5},"o":{"type":"object","properties":{"b":{"type":"string"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	policy := ctx.CompileString(`tools: x: input: {a?: string & >="b", o?: b?: >="c"}`).LookupPath(cue.ParsePath("tools.x.input"))
	want := `Parameter 'a' must satisfy >="b", got string "a".` + "\n" + `Parameter 'o.b' must satisfy >="c", got string "a".`
	for _, schema := range []cue.Value{declared.Unify(policy), policy.Unify(declared)} {
		g, err := Compile(schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := sentences(t, g, `{"a": "a", "o": {"b": "a"}}`); got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
		if got := sentences(t, g, `{"a": "bb", "o": {"b": "c"}, "other": 1}`); got != "" {
			t.Errorf("valid input refused: %s", got)
		}
	}
}

func TestS1ExportPatterns(t *testing.T) {
	v := cueCtx().CompileString(`
#P: {a?: string, [=~"^x-"]: int}
`)
	b, err := ExportJSONSchema(v.LookupPath(cue.ParsePath("#P")))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"patternProperties":{"^x-":{"type":"integer"}},"properties":{"a":{"type":"string"}},"type":"object"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// An outside schema's additionalProperties schema survives the round trip.
	in := `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}`
	imp, err := ImportJSONSchema(cueCtx(), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	b, err = ExportJSONSchema(imp)
	if err != nil {
		t.Fatal(err)
	}
	want = `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":{"type":"integer"},"properties":{"a":{"type":"string"}},"type":"object"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

// FuzzImport: no panic on any schema, and an object schema that does not
// restrict the top level's type is never refused as unusual (rule S8).
func FuzzImport(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}`,
		`{"properties":{"a":{"$ref":"#/x","type":["string","string"]}},"additionalProperties":{"enum":[1,{}]}}`,
		`{"patternProperties":{"(?<=a)":{}},"additionalProperties":false,"items":[{}]}`,
		`{"properties":{"a":{"properties":{"b":{"required":[1,"c"]}}}},"required":"a"}`,
		`true`, `{}`, `[]`, `{"type":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ImportJSONSchema(cueCtx(), data)
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil || raw == nil {
			return
		}
		for _, k := range []string{"type", "enum", "const"} {
			if _, ok := raw[k]; ok {
				return
			}
		}
		if err != nil {
			t.Fatalf("%s refused: %v", data, err)
		}
		g, err := Compile(v)
		if err != nil {
			t.Fatalf("%s imported but does not compile: %v", data, err)
		}
		g.Check(map[string]any{"a": "x", "b": json.Number("1"), "c": []any{map[string]any{}}})
	})
}

func TestImportContradiction(t *testing.T) {
	_, err := ImportJSONSchema(cueCtx(), []byte(`{"type":"object","properties":{"x-1":{"type":"object"}},"required":["x-1"],"patternProperties":{"^x-":{"properties":{"a":false},"required":["a"]}}}`))
	if !errors.Is(err, ErrNoInput) {
		t.Fatalf("err = %v, want ErrNoInput", err)
	}
}

// TestS1ExportDescriptionStatesTheEnforcedBound: a bound the description
// states in words follows the bound the exported schema enforces, so that
// the model is not told a value the gate refuses (issue 33).
func TestS1ExportDescriptionStatesTheEnforcedBound(t *testing.T) {
	for _, tc := range []struct{ note, field, want string }{
		{"a policy narrows the built-in's bound", `int & <=300000`, "Wait (at most 300000, at least 1)."},
		{"no bound in the schema: the words stay", `int`, "Wait (at most 600000, at least 1)."},
		{"a wider bound does not widen the words", `int & <=900000 & >=0`, "Wait (at most 600000, at least 1)."},
		{"a tighter lower bound", `int & >=10`, "Wait (at most 600000, at least 10)."},
		{"both", `int & >=10 & <=20`, "Wait (at most 20, at least 10)."},
		{"a fractional bound is left to the keyword", `number & <=2.5`, "Wait (at most 600000, at least 1)."},
	} {
		v := cueCtx().CompileString("#In: {\n\t// Wait (at most 600000, at least 1).\n\tn?: " + tc.field + "\n}")
		b, err := ExportJSONSchema(v.LookupPath(cue.ParsePath("#In")))
		if err != nil {
			t.Fatalf("%s: %v", tc.note, err)
		}
		var got struct {
			Properties map[string]struct{ Description string }
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if d := got.Properties["n"].Description; d != tc.want {
			t.Errorf("%s: description %q, want %q", tc.note, d, tc.want)
		}
	}
}
