package builtin

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/internal/core/policy"
)

// schemaValue is the shipped schema package, built the way the policy
// loader builds it, so the test checks the schema the gateway uses.
func schemaValue(t *testing.T) cue.Value {
	t.Helper()
	v, err := policy.Schema(cuecontext.New())
	if err != nil {
		t.Fatalf("schema does not build: %v", err)
	}
	return v
}

// cueField is one field of a CUE input definition.
type cueField struct {
	required bool
	kind     cue.Kind
}

func cueFields(t *testing.T, def cue.Value) map[string]cueField {
	t.Helper()
	it, err := def.Fields(cue.Optional(true))
	if err != nil {
		t.Fatalf("%v is not a struct: %v", def.Path(), err)
	}
	out := map[string]cueField{}
	for it.Next() {
		sel := it.Selector()
		if sel.ConstraintType()&cue.PatternConstraint != 0 {
			t.Errorf("%v has a pattern constraint %v; a built-in's input is closed with named fields only (rule S2)", def.Path(), sel)
			continue
		}
		out[sel.Unquoted()] = cueField{
			required: sel.ConstraintType() == cue.RequiredConstraint,
			kind:     it.Value().IncompleteKind(),
		}
	}
	return out
}

func need(required bool) string {
	if required {
		return "required"
	}
	return "optional"
}

// goKind is the CUE kind that a Go field's type binds (tools.Bind).
func goKind(t reflect.Type) cue.Kind {
	switch t.Kind() {
	case reflect.String:
		return cue.StringKind
	case reflect.Bool:
		return cue.BoolKind
	case reflect.Int, reflect.Int32, reflect.Int64:
		return cue.IntKind
	case reflect.Float64:
		return cue.NumberKind
	}
	return cue.BottomKind
}

// TestS12BuiltinInputsMatchSchema proves that each built-in's Go input struct
// and its CUE definition #<Name>Input declare the same parameters: the same
// wire names, the same required-ness (CUE `!` is a non-pointer Go field) and
// the same kind. The schema is the one declaration; the struct may not drift.
func TestS12BuiltinInputsMatchSchema(t *testing.T) {
	v := schemaValue(t)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			def := v.LookupPath(cue.ParsePath("#" + name + "Input"))
			if !def.Exists() {
				t.Fatalf("schema has no #%sInput", name)
			}
			want := cueFields(t, def)
			st := reflect.TypeOf(registry[name].input()).Elem()
			seen := map[string]bool{}
			for i := range st.NumField() {
				f := st.Field(i)
				wire, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if wire == "" || wire == "-" {
					t.Errorf("%s.%s has no json wire name", st.Name(), f.Name)
					continue
				}
				seen[wire] = true
				c, ok := want[wire]
				if !ok {
					t.Errorf("%s.%s binds %q, which #%sInput does not declare", st.Name(), f.Name, wire, name)
					continue
				}
				typ, optional := f.Type, f.Type.Kind() == reflect.Pointer
				if optional {
					typ = typ.Elem()
				}
				if c.required == optional {
					t.Errorf("%q is %s in CUE but %s.%s is %s in Go (a pointer is optional)", wire, need(c.required), st.Name(), f.Name, need(!optional))
				}
				// Exact kinds: a Go float64 for a CUE int would take 1.5.
				if gk := goKind(typ); gk == cue.BottomKind || c.kind != gk {
					t.Errorf("%q is %v in CUE but %s.%s is %v", wire, c.kind, st.Name(), f.Name, typ)
				}
			}
			for wire := range want {
				if !seen[wire] {
					t.Errorf("#%sInput declares %q, which %s does not bind", name, wire, st.Name())
				}
			}
		})
	}
}

// TestBuiltinDeclarations checks what issue 5 asks each built-in to declare
// in CUE: its concurrency and interrupt kind (rule K1), and its permission
// subject (rule P2), a field of its own input.
func TestBuiltinDeclarations(t *testing.T) {
	v := schemaValue(t)
	want := []struct {
		name, concurrency, interrupt, field, kind string
	}{
		{"Read", "concurrent_safe", "cooperative", "file_path", "path"},
		{"Write", "sequential", "non_interruptible", "file_path", "path"},
		{"Edit", "sequential", "non_interruptible", "file_path", "path"},
		{"Bash", "sequential", "externally_terminated", "command", "command"},
		{"Grep", "concurrent_safe", "cooperative", "path", "path"},
		{"Glob", "concurrent_safe", "cooperative", "path", "path"},
		{"Echo", "concurrent_safe", "non_interruptible", "", ""},
	}
	var names []string
	for _, w := range want {
		names = append(names, w.name)
		def := v.LookupPath(cue.ParsePath("#" + w.name))
		str := func(path string) string {
			val := def.LookupPath(cue.ParsePath(path))
			if d, ok := val.Default(); ok {
				val = d
			}
			out, _ := val.String()
			return out
		}
		got := []string{str("builtin"), str("concurrency"), str("interrupt"), str("subject.field"), str("subject.kind")}
		exp := []string{w.name, w.concurrency, w.interrupt, w.field, w.kind}
		if !slices.Equal(got, exp) {
			t.Errorf("#%s declares %q, want %q", w.name, got, exp)
		}
		if _, ok := cueFields(t, v.LookupPath(cue.ParsePath("#"+w.name+"Input")))[w.field]; w.field != "" && !ok {
			t.Errorf("#%s's subject %q is not a field of #%sInput", w.name, w.field, w.name)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, Names()) {
		t.Errorf("Names() = %v, want %v", Names(), names)
	}
}
