package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// schemaGen writes random CUE input schemas from the forms tool schemas
// use, for the differential check beyond hand-written schemas.
type schemaGen struct{ r *rand.Rand }

var genNames = []string{"a", "b", "c", "file_path", "mode", "n", "x-1", "-i", "é", "list"}

func (g schemaGen) structLit(depth int) string {
	var b strings.Builder
	b.WriteString("{")
	used := map[string]bool{}
	for range 1 + g.r.IntN(4) {
		name := genNames[g.r.IntN(len(genNames))]
		if used[name] {
			continue
		}
		used[name] = true
		mark := []string{"?", "!", "", "?"}[g.r.IntN(4)]
		fmt.Fprintf(&b, "%q%s: %s, ", name, mark, g.value(depth+1))
	}
	switch g.r.IntN(6) {
	case 0:
		b.WriteString("...")
	case 1:
		b.WriteString("[string]: " + g.value(depth+1))
	case 2:
		b.WriteString(`[=~"^x-"]: ` + g.scalar())
	}
	b.WriteString("}")
	return b.String()
}

func (g schemaGen) scalar() string {
	return []string{
		"string", "int", "number", "float", "bool", "null", "_", "string | int", "null | string",
		`"x" | "y"`, `1 | 2.5 | "x"`, `*"x" | "y"`, `*3 | int`, `"fixed"`,
		"int & >=1", "int & >=0 & <=10", "number & >-1.5 & <2.5", ">=10 & <=1e2",
		`=~"^/srv/"`, `string & !~"b$"`, `=~"^(x|y)$" | =~"^/"`, `string & >="b"`, `!="no"`,
	}[g.r.IntN(23)]
}

func (g schemaGen) value(depth int) string {
	if depth > 3 {
		return g.scalar()
	}
	switch g.r.IntN(10) {
	case 0, 1:
		return g.structLit(depth)
	case 2:
		return "[..." + g.value(depth+1) + "]"
	case 3:
		return g.structLit(depth) + " | " + g.scalar()
	}
	return g.scalar()
}

// TestRandomSchemasShapeEqualsCUE runs the differential check on random
// schemas: whatever the shape does with them must agree with CUE.
func TestRandomSchemasShapeEqualsCUE(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	n := 150
	if testing.Short() {
		n = 20
	}
	compiled, viaCUE := 0, 0
	for i := range n {
		if g := checkRandomSchema(t, r, i); g != nil {
			compiled++
			if g.root.CUE {
				viaCUE++
			}
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d of %d random schemas compiled, %d of them need CUE", compiled, n, viaCUE)
	// The check is only as good as its schemas: most must compile, and
	// both paths must be exercised.
	if compiled < n/2 || viaCUE == 0 || viaCUE == compiled {
		t.Errorf("%d of %d random schemas compiled, %d need CUE: the generator does not exercise the gate", compiled, n, viaCUE)
	}
}

func FuzzRandomSchemas(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i, i+100)
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		checkRandomSchema(t, rand.New(rand.NewPCG(s1, s2)), 0)
	})
}

func checkRandomSchema(t *testing.T, r *rand.Rand, i int) *Gate {
	src := "#In: " + schemaGen{r}.structLit(0)
	v := cuecontext.New().CompileString(src)
	if v.Err() != nil {
		return nil // not every random schema is valid CUE
	}
	schema := v.LookupPath(cue.ParsePath("#In"))
	if schema.Err() != nil || schema.Validate() != nil {
		return nil
	}
	g, err := Compile(schema)
	if err != nil {
		return nil
	}
	roundTrip(t, g)
	c := diffCase{fmt.Sprintf("random[%d] %s", i, src), g, schema}
	for range 40 {
		agree(t, c, gen{r}.input(g))
		agree(t, c, gen{r}.object(1))
	}
	return g
}

// jsonSchemaGen writes random JSON Schemas as outside tools declare them.
type jsonSchemaGen struct{ r *rand.Rand }

func (g jsonSchemaGen) object(depth int) map[string]any {
	s := map[string]any{}
	if g.r.IntN(4) != 0 {
		s["type"] = "object"
	}
	props := map[string]any{}
	var required []any
	for range g.r.IntN(4) {
		name := genNames[g.r.IntN(len(genNames))]
		props[name] = g.schema(depth + 1)
		if g.r.IntN(3) == 0 {
			required = append(required, name)
		}
	}
	if len(props) > 0 {
		s["properties"] = props
	}
	if required != nil {
		s["required"] = required
	}
	switch g.r.IntN(5) {
	case 0:
		s["additionalProperties"] = false
	case 1:
		s["additionalProperties"] = g.schema(depth + 1)
	case 2:
		s["patternProperties"] = map[string]any{"^x-": g.schema(depth + 1)}
	}
	return s
}

func (g jsonSchemaGen) schema(depth int) any {
	if depth < 3 && g.r.IntN(4) == 0 {
		return g.object(depth)
	}
	switch g.r.IntN(10) {
	case 0:
		return map[string]any{"type": "array", "items": g.schema(depth + 1)}
	case 1:
		return map[string]any{"enum": []any{"x", "y", 3, nil}}
	case 2:
		return map[string]any{"type": []any{"string", "null"}}
	case 3:
		return map[string]any{"type": "integer", "minimum": 1}
	case 4:
		return map[string]any{"anyOf": []any{map[string]any{"type": "string"}}}
	case 5:
		return map[string]any{"const": "fixed"}
	case 6:
		return true
	case 7:
		// What S7 and S8 say the gate lets pass.
		return []any{
			map[string]any{"$ref": "#/nope"},
			map[string]any{"items": []any{map[string]any{}}},
			map[string]any{"type": []any{"string", "string"}},
			map[string]any{"type": "string", "format": "email", "pattern": "^a", "maxLength": 2},
			map[string]any{"patternProperties": map[string]any{"(?<=x)": map[string]any{}}, "additionalProperties": false},
			map[string]any{"not": map[string]any{}, "if": true, "then": false},
			map[string]any{"enum": []any{map[string]any{"k": json.Number("1")}, []any{json.Number("1")}, "x"}},
			map[string]any{"type": "strnig"},
			map[string]any{"required": []any{"a", "a", 3}, "properties": map[string]any{"a": false}},
		}[g.r.IntN(9)]
	}
	return map[string]any{"type": []string{"string", "integer", "number", "boolean", "null"}[g.r.IntN(5)]}
}

// TestRandomImportedSchemasShapeEqualsCUE: the CUE that ImportJSONSchema
// makes of random outside schemas is judged by the shape as CUE judges it,
// and no such schema is refused (rule S8).
func TestRandomImportedSchemasShapeEqualsCUE(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	viaCUE := 0
	const n = 150
	for i := range n {
		if g := checkRandomImported(t, r, i); g != nil && g.root.CUE {
			viaCUE++
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d random outside schemas, %d of them need CUE", n, viaCUE)
	if viaCUE == 0 || viaCUE == n {
		t.Errorf("%d of %d need CUE: the generator does not exercise both paths", viaCUE, n)
	}
}

func FuzzRandomImportedSchemas(f *testing.F) {
	for i := range uint64(8) {
		f.Add(i, i+200)
	}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		checkRandomImported(t, rand.New(rand.NewPCG(s1, s2)), 0)
	})
}

func checkRandomImported(t *testing.T, r *rand.Rand, i int) *Gate {
	js, _ := json.Marshal(jsonSchemaGen{r}.object(0))
	v, err := ImportJSONSchema(cuecontext.New(), js)
	if errors.Is(err, ErrNoInput) {
		return nil // contradicts itself: refused, and rightly
	}
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	g, err := Compile(v)
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	roundTrip(t, g)
	c := diffCase{fmt.Sprintf("imported random[%d] %s", i, js), g, v}
	for range 40 {
		agree(t, c, gen{r}.input(g))
		agree(t, c, gen{r}.object(1))
	}
	return g
}
