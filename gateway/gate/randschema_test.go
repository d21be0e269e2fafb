package gate

import (
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
		b.WriteString("[string]: " + g.scalar())
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
			if g.root.cue {
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
	c := diffCase{fmt.Sprintf("random[%d] %s", i, src), g}
	for range 40 {
		agree(t, c, gen{r}.input(g))
		agree(t, c, gen{r}.object(1))
	}
	return g
}
