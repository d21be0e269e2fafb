package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"aimon.dev/gw/internal/core/gate"
)

// TestS1ExportSaysWhatTheGateEnforces: for random inputs, a draft 2020-12
// validator of the exported schema and the gate agree, for the built-ins
// and for policy narrowings (enums, lengths, bounds, patterns). The one
// difference by design is left out: a null for an optional parameter is
// missing to the gate (rule S4), a wrong type to JSON Schema.
func TestS1ExportSaysWhatTheGateEnforces(t *testing.T) {
	g, _ := newGateway(t, "import \"strings\"\n"+allBuiltins+`
tools: Narrow: schema.#Grep & {input: {output_mode?: "content" | "count", pattern!: strings.MaxRunes(5), head_limit?: >=1 & <=10, glob?: =~"^[a-z*.]+$"}}
`, nil)
	cur := g.Current()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range cur.Names() {
		tool := cur.Tools[name]
		t.Run(name, func(t *testing.T) {
			var doc any
			js, err := tool.JSONSchema()
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(js, &doc); err != nil {
				t.Fatal(err)
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("s.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("s.json")
			if err != nil {
				t.Fatalf("the export is not valid JSON Schema: %v", err)
			}
			props := doc.(map[string]any)["properties"].(map[string]any)
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range props {
					if !yield(k) {
						return
					}
				}
			})
			for i := range 400 {
				in := map[string]any{}
				for _, p := range names {
					if v, ok := randomValue(rng, props[p].(map[string]any)); ok {
						in[p] = v
					}
				}
				if rng.IntN(8) == 0 {
					in["zzqq"] = 1
				}
				raw, _ := json.Marshal(in)
				decoded, err := gate.Decode(raw, gate.DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
				byJSONSchema := sch.Validate(inst) == nil
				byGate := len(tool.Gate.Check(decoded)) == 0
				if byJSONSchema != byGate {
					t.Fatalf("input %d %s: JSON Schema says %v, the gate %v (%v); export %s", i, raw, byJSONSchema, byGate, tool.Gate.Check(decoded), js)
				}
			}
		})
	}
}

// randomValue picks a value for a property: often one its schema admits,
// sometimes one of another type or out of range; ok false leaves it out.
func randomValue(rng *rand.Rand, p map[string]any) (any, bool) {
	if rng.IntN(4) == 0 {
		return nil, false
	}
	if enum, ok := p["enum"].([]any); ok && rng.IntN(3) > 0 {
		return enum[rng.IntN(len(enum))], true
	}
	pool := []any{"", "a", "content", "files_with_matches", "count", "abcdef", "x.go", "A*", 0, 1, 3, 10, 11, -1, 3.0, 2.5, true, false, []any{}, map[string]any{}}
	switch p["type"] {
	case "string":
		if rng.IntN(3) > 0 {
			return []string{"", "a", "abc", "abcdef", "x.go", "*.go", "A*", "content"}[rng.IntN(8)], true
		}
	case "integer":
		if rng.IntN(3) > 0 {
			return []any{0, 1, 5, 10, 11, -3, 3.0, json.Number("1e2")}[rng.IntN(8)], true
		}
	case "boolean":
		if rng.IntN(3) > 0 {
			return rng.IntN(2) == 0, true
		}
	}
	v := pool[rng.IntN(len(pool))]
	return v, fmt.Sprint(v) != "<nil>"
}
