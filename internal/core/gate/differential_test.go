package gate

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// diffSchemas are the schemas the differential test runs: shapes the gate
// models itself and shapes it leaves to CUE, side by side.
const diffSchemas = `
import (
	"strings"
	"struct"
)

#Flat: {a!: string, b?: int, c?: bool, d?: number, e?: float}
#Enum: {mode?: "x" | "y" | 3 | true | null, n?: 1 | 2.5}
#Nested: {
	a!: {b!: {c?: int}, d?: [...{e!: string}]}
	l?: [...[...int]]
}
#Open: {a?: int, ...}
#Map: {[string]: int}
#MapTyped: {a?: string, [string]: string | int}
#Pattern: {[=~"^x-"]: int, a?: string}
#Bounds: {a?: int & >=1 & <=10, b?: string & =~"^/srv/", c?: strings.MinRunes(2), d?: !="no"}
#Regular: {a: string, b: int | *3, c: "fixed", d?: int}
#RegularStruct: {s: {x!: int}, t: {y?: int}}
#Disj: {u?: {k: "a", x!: int} | {k: "b", y!: string}}
#Kinds: {a?: string | int, b?: null | [...string], c?: _, d?: {...} | string, e?: bytes, f?: bytes | string}
#Prefix: {p?: [int, string], q?: [], r?: [int, ...string]}
#Def: {a?: #Sub, b?: [...#Sub]}
#Sub: {x!: int, y?: #Sub}
#Embed: #Flat & {b?: >=0}
#Cross: {lo?: int, hi?: int & >=lo}
#NumBounds: {a?: number & >-1.5 & <2.5, b?: int & <5.5 & >=-3, c?: float & >=0.25, d?: uint, e?: >=10 & <=1e2}
#Regexes: {a?: =~"^[a-c]" & !~"b$", b?: string & =~"é", c?: =~"^(x|y)$" | =~"^/"}
#StrBound: {a?: string & >="b"}
#Excl: {a?: string, "b.c"?: int, {[!~"^(a|b\\.c)$"]: int}}
#ExclCUE: {a?: string & >="b", {[!~"^(a)$"]: int & >=1}}
#MapAnd: {a?: {[string]: int} & {x?: int}}
#Validator: {a?: struct.MinFields(1) & {x?: int}}
`

var diffNames = []string{
	"a", "b", "c", "d", "e", "mode", "n", "l", "x-1", "x-", "k", "x", "y", "u",
	"p", "q", "r", "s", "t", "lo", "hi", "é", "file_path", "offset", "limit", "pattern",
	"output_mode", "-i", "-A", "content", "old_string", "new_string", "edits", "zz",
}

var diffStrings = []string{"", "x", "y", "a", "b", "ab", "cb", "c", "no", "/srv/a", "/etc", "10", "3", "content", "count", "é"}

// gen builds a random decoded-JSON value from r, as the wire decoder would.
type gen struct{ r *rand.Rand }

func (g gen) value(depth int) any {
	switch n := g.r.IntN(12); {
	case n == 0:
		return nil
	case n == 1:
		return g.r.IntN(2) == 0
	case n == 2:
		return json.Number([]string{"0", "1", "3", "-1", "-3", "-4", "5", "6", "10", "11", "1e2", "100", "101"}[g.r.IntN(13)])
	case n == 3:
		return json.Number([]string{"3.0", "2.5", "3.5", "-0.0", "1e-2", "30e-1", "1e400", "-1.5", "-1.4", "0.25", "0.2500", "2.49", "5.5", "1.0e1"}[g.r.IntN(14)])
	case n <= 6:
		return diffStrings[g.r.IntN(len(diffStrings))]
	case n <= 9 && depth < 5:
		return g.object(depth + 1)
	case depth < 5:
		l := g.r.IntN(4)
		a := make([]any, l)
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	}
	return "leaf"
}

// forNode builds a value that mostly follows n, so that valid inputs and
// near misses are both common.
func (g gen) forNode(n *node, depth int) any {
	if n == nil || depth > 6 || g.r.IntN(5) == 0 {
		return g.value(depth)
	}
	if n.Enum != nil && g.r.IntN(4) != 0 {
		s := n.Enum[g.r.IntN(len(n.Enum))]
		switch s.K {
		case kNull:
			return nil
		case kBool:
			return s.B
		case kString:
			return s.S
		}
		l := s.String()
		if s.K == kFrac && !strings.ContainsAny(l, ".e") {
			l += ".5"
		}
		return json.Number(l)
	}
	switch {
	case n.Kinds&kObject != 0 && (n.Fields != nil || g.r.IntN(2) == 0):
		m := map[string]any{}
		for _, name := range n.names {
			if g.r.IntN(10) < 7 {
				m[name] = g.forNode(n.Fields[name].Node, depth+1)
			}
		}
		if g.r.IntN(5) == 0 {
			m[diffNames[g.r.IntN(len(diffNames))]] = g.forNode(n.Extra, depth+1)
		}
		return m
	case n.Kinds&kArray != 0 && g.r.IntN(3) != 0:
		a := make([]any, g.r.IntN(4))
		for i := range a {
			a[i] = g.forNode(n.Elem, depth+1)
		}
		return a
	case n.Kinds&kString != 0 && g.r.IntN(4) != 0:
		return diffStrings[g.r.IntN(len(diffStrings))]
	case n.Kinds&kInt != 0 && g.r.IntN(4) != 0:
		return json.Number([]string{"0", "1", "3", "-1", "-3", "-4", "5", "6", "10", "11", "3.0", "100", "101", "1e2"}[g.r.IntN(14)])
	case n.Kinds&kBool != 0 && g.r.IntN(4) != 0:
		return g.r.IntN(2) == 0
	}
	return g.value(depth)
}

func (g gen) object(depth int) map[string]any {
	m := map[string]any{}
	for range g.r.IntN(5) {
		m[diffNames[g.r.IntN(len(diffNames))]] = g.value(depth)
	}
	return m
}

// reference is what the gate promises to equal: CUE's Unify+Validate of the
// whole input, with the gate's reading of JSON (a null in an object is
// missing, rule S4; 3.0 is an int, S5) and nothing dropped.
func reference(schema cue.Value, in map[string]any) error {
	return schema.Unify(schema.Context().Encode(encode(nil, in))).Validate(cue.Concrete(true))
}

// importedSchemas are outside tools' schemas, read as ImportJSONSchema reads them.
var importedSchemas = []string{
	`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a"],"additionalProperties":{"type":"integer"}}`,
	`{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false}`,
	`{"properties":{"a":{"properties":{"b":{"type":"string"}}},"c":{"enum":[1,"x",null,{"k":1}]}}}`,
	`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}},"additionalProperties":false}}}}`,
}

type diffCase struct {
	name   string
	gate   *Gate
	schema cue.Value // CUE's reference; the gate keeps it only when it needs it
}

func diffGates(t testing.TB) []diffCase {
	t.Helper()
	v := cuecontext.New().CompileString(diffSchemas)
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	var cs []diffCase
	it, err := v.Fields(cue.Definitions(true))
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		g, err := Compile(it.Value())
		if err != nil {
			t.Fatalf("%s: %v", it.Selector(), err)
		}
		cs = append(cs, diffCase{it.Selector().String(), g, it.Value()})
	}
	for i, js := range importedSchemas {
		v, err := ImportJSONSchema(cuecontext.New(), []byte(js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		g, err := Compile(v)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		cs = append(cs, diffCase{fmt.Sprintf("imported[%d]", i), g, v})
	}
	pkg := schemaPackage(t, `narrowed: #Read & {input: file_path: =~"^/srv/", input: limit?: int & >=1}`)
	for _, p := range []string{"#ReadInput", "#WriteInput", "#EditInput", "#BashInput", "#GrepInput", "#GlobInput", "#EchoInput", "#Read.input", "narrowed.input"} {
		v := pkg.LookupPath(cue.ParsePath(p))
		g, err := Compile(v)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		cs = append(cs, diffCase{p, g, v})
	}
	return cs
}

// limited reports whether a violation is one of the gate's own size limits,
// which CUE does not have.
func limited(g *Gate, in map[string]any) bool {
	for _, v := range g.Check(in) {
		if strings.Contains(v.Sentence, "at most") || strings.Contains(v.Sentence, "too large to check") || strings.Contains(v.Sentence, "levels deep") {
			return true
		}
	}
	return false
}

// agree fails t unless the gate and CUE agree on in, and reports whether in
// is valid.
func agree(t *testing.T, c diffCase, in map[string]any) bool {
	t.Helper()
	if limited(c.gate, in) {
		return false
	}
	vs := c.gate.Check(in)
	err := reference(c.schema, in)
	if (len(vs) == 0) != (err == nil) {
		b, _ := json.Marshal(in)
		t.Errorf("%s: gate and CUE disagree on %s\ngate: %v\nCUE:  %v", c.name, b, vs, err)
	}
	return len(vs) == 0
}

// TestShapeEqualsCUE runs the differential check on a fixed stream of
// random inputs in every plain test run; FuzzShapeEqualsCUE explores further.
func TestShapeEqualsCUE(t *testing.T) {
	cs := diffGates(t)
	r := rand.New(rand.NewPCG(1, 2))
	n := 400
	if testing.Short() {
		n = 50
	}
	valid := map[string]int{}
	for range n {
		for _, c := range cs {
			for _, in := range []map[string]any{gen{r}.object(1), gen{r}.input(c.gate)} {
				if agree(t, c, in) {
					valid[c.name]++
				}
			}
		}
		if t.Failed() {
			return
		}
	}
	// The check is only as good as its inputs: each schema must have met
	// both valid and invalid ones (the short run meets too few to say).
	for _, c := range cs {
		if testing.Short() {
			break
		}
		if v := valid[c.name]; v == 0 || v == 2*n {
			t.Errorf("%s: %d of %d random inputs valid; the generator does not exercise it", c.name, v, 2*n)
		}
	}
}

func (g gen) input(gt *Gate) map[string]any {
	if m, ok := g.forNode(gt.root, 1).(map[string]any); ok {
		return m
	}
	return g.object(1)
}

func FuzzShapeEqualsCUE(f *testing.F) {
	for i := range uint64(16) {
		f.Add(i, i*7+1)
	}
	cs := diffGates(f)
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		g := gen{rand.New(rand.NewPCG(s1, s2))}
		for _, c := range cs {
			agree(t, c, g.object(1))
			agree(t, c, g.input(c.gate))
		}
	})
}

// The shape must carry the common schemas alone, CUE only the unusual:
// this pins which is which, for speed and for the interning of names.
func TestShapeCoversCommonSchemas(t *testing.T) {
	byName := map[string]*Gate{}
	for _, c := range diffGates(t) {
		byName[c.name] = c.gate
	}
	for name, wantCUE := range map[string]bool{
		"#Flat": false, "#Enum": false, "#Nested": false, "#Open": false, "#Map": false, "#MapTyped": false,
		"#NumBounds": false, "#Regexes": true, "#Embed": false, "#Kinds": false,
		"#ReadInput": false, "#GrepInput": false, "#EditInput": false, "#Read.input": false, "narrowed.input": false,
		"#Excl": false, "#ExclCUE": true, "imported[0]": false, "imported[3]": false, "#MapAnd": false, "#Pattern": true, "#Disj": true, "#Cross": true, "#StrBound": true, "#Validator": true, "#Prefix": true, "#Def": true,
	} {
		g, ok := byName[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		if g.root.CUE != wantCUE {
			t.Errorf("%s: goes through CUE = %v, want %v", name, g.root.CUE, wantCUE)
		}
	}
}

func TestCompareNumbers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1", "1.0", 0}, {"1", "2", -1}, {"-1", "1", -1}, {"0", "-0.0", 0}, {"-2", "-1.5", -1},
		{"10", "9.99", 1}, {"1e2", "100", 0}, {"0.25", "0.2500", 0}, {"0.3", "0.25", 1}, {"-0.3", "-0.25", -1},
		{"123", "1.23e2", 0}, {"1e400", "1e399", 1}, {"0", "1e-400", -1},
	} {
		a, _ := parseNumber(tc.a)
		b, _ := parseNumber(tc.b)
		if got := compare(a, b); got != tc.want {
			t.Errorf("compare(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
