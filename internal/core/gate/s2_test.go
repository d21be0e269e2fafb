package gate

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"cuelang.org/go/cue"
)

// builtinInputs finds every built-in tool's input schema: the package's
// definitions that unify with #Tool and name a builtin. No list is kept
// here, so a new built-in is checked the day it is declared.
func builtinInputs(t *testing.T, pkg cue.Value) map[string]cue.Value {
	t.Helper()
	tool := pkg.LookupPath(cue.ParsePath("#Tool"))
	if !tool.Exists() {
		t.Fatal("the schema package has no #Tool")
	}
	inputs := map[string]cue.Value{}
	it, err := pkg.Fields(cue.Definitions(true))
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		def := it.Value()
		b := def.LookupPath(cue.ParsePath("builtin"))
		if !b.Exists() || b.Kind() != cue.StringKind || def.Unify(tool).Err() != nil {
			continue
		}
		name, _ := b.String()
		inputs[name] = def.LookupPath(cue.ParsePath("input"))
	}
	return inputs
}

// openInCUE lists the places where v accepts an undeclared name.
func openInCUE(v cue.Value, path string) []string {
	probe := v.Context().CompileString(`{"gate·probe": _}`)
	var open []string
	var walk func(v cue.Value, path string, depth int)
	walk = func(v cue.Value, path string, depth int) {
		if depth > maxCompileDepth || v.Err() != nil {
			return
		}
		if op, args := v.Expr(); op == cue.OrOp {
			for _, a := range args {
				walk(a, path, depth+1)
			}
			return
		}
		switch v.IncompleteKind() {
		case cue.StructKind:
			if v.Unify(probe).Err() == nil {
				open = append(open, path)
			}
			it, err := v.Fields(cue.Optional(true))
			if err != nil {
				return
			}
			for it.Next() {
				walk(it.Value(), path+"."+it.Selector().Unquoted(), depth+1)
			}
		case cue.ListKind:
			walk(v.LookupPath(cue.MakePath(cue.AnyIndex)), path+"[]", depth+1)
		}
	}
	walk(v, path, 0)
	return open
}

// openInJSONSchema lists the object schemas without additionalProperties: false.
func openInJSONSchema(s any, path string) []string {
	var open []string
	switch x := s.(type) {
	case map[string]any:
		if x["type"] == "object" || x["properties"] != nil {
			if x["additionalProperties"] != false {
				open = append(open, path)
			}
		}
		for k, sub := range x {
			switch k {
			case "properties":
				if m, ok := sub.(map[string]any); ok {
					for name, ps := range m {
						open = append(open, openInJSONSchema(ps, path+"."+name)...)
					}
				}
			case "items", "additionalProperties":
				open = append(open, openInJSONSchema(sub, path+"["+k+"]")...)
			case "anyOf", "oneOf", "allOf", "prefixItems":
				if l, ok := sub.([]any); ok {
					for i, e := range l {
						open = append(open, openInJSONSchema(e, fmt.Sprintf("%s[%s %d]", path, k, i))...)
					}
				}
			}
		}
	}
	return open
}

func exportedOpen(t *testing.T, v cue.Value, name string) []string {
	t.Helper()
	b, err := ExportJSONSchema(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var s any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return openInJSONSchema(s, name)
}

func TestS2BuiltinsClosed(t *testing.T) {
	pkg := schemaPackage(t, "")
	inputs := builtinInputs(t, pkg)
	// Every name #BuiltinName admits has its definition.
	_, names := pkg.LookupPath(cue.ParsePath("#BuiltinName")).Expr()
	if len(names) == 0 {
		t.Fatal("#BuiltinName lists no names")
	}
	for _, n := range names {
		s, _ := n.String()
		if _, ok := inputs[s]; !ok {
			t.Errorf("built-in %s has no definition that unifies with #Tool", s)
		}
	}
	for name, in := range inputs {
		if open := openInCUE(in, name); len(open) > 0 {
			t.Errorf("built-in %s: the CUE schema is open at %v (rule S2)", name, open)
		}
		if open := exportedOpen(t, in, name); len(open) > 0 {
			t.Errorf("built-in %s: the JSON Schema lacks additionalProperties: false at %v (rule S2)", name, open)
		}
	}
}

// The two checks above must be able to fail.
func TestS2CheckFindsOpenSchemas(t *testing.T) {
	v := cueCtx().CompileString(`
#Top: {a?: int, ...}
#Nested: {a?: {b?: int, ...}}
#InList: {l?: [...{c?: int, ...}]}
#Map: {m?: [string]: int}
#Closed: {a?: {b?: int}, l?: [...{c!: int}]}
`)
	for _, tc := range []struct {
		def  string
		want []string
	}{
		{"#Top", []string{"#Top"}},
		{"#Nested", []string{"#Nested.a"}},
		{"#InList", []string{"#InList.l[]"}},
		{"#Map", []string{"#Map.m"}},
		{"#Closed", nil},
	} {
		s := v.LookupPath(cue.ParsePath(tc.def))
		if got := openInCUE(s, tc.def); !slices.Equal(got, tc.want) {
			t.Errorf("openInCUE(%s) = %v, want %v", tc.def, got, tc.want)
		}
		if got := exportedOpen(t, s, tc.def); (len(got) > 0) != (len(tc.want) > 0) {
			t.Errorf("exported %s open at %v, want open at %v", tc.def, got, tc.want)
		}
	}
}
