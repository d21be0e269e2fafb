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

// sameExport fails t unless g's JSON Schema is byte for byte what the CUE
// exporter writes for schema, the reference (rule S1). It reports whether
// the shape wrote it (neither CUE nor made at compile time).
func sameExport(t *testing.T, name string, g *Gate, schema cue.Value) bool {
	t.Helper()
	want, werr := ExportJSONSchema(schema)
	fromShape := !g.root.CUE && !g.Exported()
	got, gerr := g.JSONSchema()
	if string(got) != string(want) || (gerr == nil) != (werr == nil) {
		t.Errorf("%s: the gate exports\n%s (%v)\nCUE's exporter\n%s (%v)", name, got, gerr, want, werr)
	}
	return fromShape
}

// TestS1ExportFromShape: the export a gate builds from its compiled shape
// is the CUE exporter's, byte for byte, on the hand-written, built-in,
// imported and random schemas of the differential tests; most of them are
// written from the shape.
func TestS1ExportFromShape(t *testing.T) {
	tests := []struct {
		note     string
		schemas  func(yield func(string, *Gate, cue.Value))
		minShape float64 // the least share of them the shape must write
	}{
		{note: "hand-written, imported and built-in", schemas: func(yield func(string, *Gate, cue.Value)) {
			for _, c := range diffGates(t) {
				yield(c.name, c.gate, c.schema)
			}
		}, minShape: 0.5},
		{note: "random CUE schemas", schemas: func(yield func(string, *Gate, cue.Value)) {
			r := rand.New(rand.NewPCG(21, 22))
			for i := range 600 {
				src := "#In: " + schemaGen{r}.structLit(0)
				v := cuecontext.New().CompileString(src).LookupPath(cue.ParsePath("#In"))
				if g, err := Compile(v); err == nil {
					yield(fmt.Sprintf("random[%d] %s", i, src), g, v)
				}
			}
		}, minShape: 0.3},
		{note: "random imported JSON Schemas", schemas: func(yield func(string, *Gate, cue.Value)) {
			r := rand.New(rand.NewPCG(23, 24))
			for i := range 300 {
				js, _ := json.Marshal(jsonSchemaGen{r}.object(0))
				v, err := ImportJSONSchema(cuecontext.New(), js)
				if err != nil {
					continue
				}
				if g, err := Compile(v); err == nil {
					yield(fmt.Sprintf("imported random[%d] %s", i, js), g, v)
				}
			}
		}, minShape: 0.3},
	}
	for _, tt := range tests {
		n, shaped := 0, 0
		tt.schemas(func(name string, g *Gate, v cue.Value) {
			n++
			if sameExport(t, tt.note+": "+name, g, v) {
				shaped++
			}
		})
		t.Logf("%s: %d schemas, %d exported from the shape", tt.note, n, shaped)
		if n == 0 || float64(shaped) < tt.minShape*float64(n) {
			t.Errorf("%s: %d of %d schemas exported from the shape, want at least %.0f%%", tt.note, shaped, n, 100*tt.minShape)
		}
	}
}

// TestS1ExportLazy: compiling a schema builds no JSON Schema; the first
// call builds it once, for every caller.
func TestS1ExportLazy(t *testing.T) {
	g := builtinGate(t, "#ReadInput")
	if g.Exported() {
		t.Fatal("Compile built the JSON Schema; it must wait for a list to ask")
	}
	before := ExportsBuilt()
	a, err := g.JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := g.JSONSchema()
	if !g.Exported() || ExportsBuilt()-before != 1 || string(a) != string(b) {
		t.Errorf("two calls built %d exports (exported %v): %s, %s", ExportsBuilt()-before, g.Exported(), a, b)
	}
}

// TestS1ExportBadInput: a schema whose shape cannot carry its export is
// exported from CUE when compiled, as the shape could not write it; a gate
// read from a plan has no export of its own and says so.
func TestS1ExportBadInput(t *testing.T) {
	tests := []struct {
		note, src string
	}{
		{note: "an arm the shape does not model", src: `#In: {a?: string | =~"^x"}`},
		{note: "an arm no value meets", src: `#In: {a?: {b: =~"^/", [string]: 1} | null | string}`},
		{note: "a float beyond float64", src: `#In: {a?: 1e400 | 2e400}`},
	}
	for _, tt := range tests {
		v := cuecontext.New().CompileString(tt.src).LookupPath(cue.ParsePath("#In"))
		g, err := Compile(v)
		if err != nil {
			t.Fatalf("%s: %v", tt.note, err)
		}
		if g.root.CUE {
			t.Errorf("%s: the shape needs CUE to decide; the case is of a shape that decides alone", tt.note)
			continue
		}
		if !g.Exported() {
			t.Errorf("%s: the gate waits to export a schema its shape cannot write", tt.note)
		}
		sameExport(t, tt.note, g, v)
	}
	data, err := json.Marshal(builtinGate(t, "#ReadInput"))
	if err != nil {
		t.Fatal(err)
	}
	var d Gate
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if _, err := d.JSONSchema(); err == nil || !strings.Contains(err.Error(), "saved plan") {
		t.Errorf("a decoded gate's export: %v, want a sentence that the plan keeps it", err)
	}
}
