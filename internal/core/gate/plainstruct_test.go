package gate

import (
	"testing"

	"cuelang.org/go/cue"
)

// plainStructByPath is plainStruct as it was before references were
// followed with Dereference: every reference through ReferencePath, which
// finalizes the reference's whole root. It is the meaning the fast path
// must keep.
func plainStructByPath(v cue.Value, depth int) bool { return plainVia(v, depth, byReferencePath) }

// TestS4PlainStructReferences pins what plainStruct answers for a schema
// that refers to a definition, so that following a reference cheaply (or
// remembering the answer) cannot change which schemas the shape decides
// alone: each answer is given, and equals the one found through
// ReferencePath.
func TestS4PlainStructReferences(t *testing.T) {
	const defs = `
import "struct"

#Plain: {a?: int, b!: string}
#Closed: close({a?: int})
#Min: struct.MinFields(1) & {a?: int}
#Or: {a?: int} | {b?: int}
#Str: string
#Nested: #Plain
#Deeper: #Nested & {c?: bool}
#Outer: {#Inner: {a?: int}, #Bad: {a?: int} | {b?: int}}
#Tmpl: {#U: {...}, x: #U}
#Narrowed: #Tmpl & {#U: {a?: int} | {b?: int}}
#Rec: {sub?: #Rec, a?: int}
`
	for _, tc := range []struct {
		note, in string
		want     bool
	}{
		{note: "a reference to a plain definition", in: `#Plain`, want: true},
		{note: "a reference to a closed literal", in: `#Closed`, want: true},
		{note: "a reference to a validator", in: `#Min`, want: false},
		{note: "a reference to a disjunction of structs", in: `#Or`, want: false},
		{note: "a reference to a scalar", in: `#Str`, want: false},
		{note: "a reference to a reference", in: `#Nested`, want: true},
		{note: "a reference to a reference narrowed", in: `#Deeper`, want: true},
		{note: "a reference narrowed by a literal", in: `#Plain & {c?: int}`, want: true},
		{note: "a reference beside a validator", in: `#Plain & #Min`, want: false},
		{note: "a selection of a plain nested definition", in: `#Outer.#Inner`, want: true},
		{note: "a selection of a non-plain nested definition", in: `#Outer.#Bad`, want: false},
		{note: "an alias of a plain definition", in: `X`, want: true},
		{note: "a let of a plain definition", in: `L`, want: true},
		{note: "the same name meaning a plain struct in the template", in: `#Tmpl.x`, want: true},
		{note: "the same name meaning a disjunction where it is narrowed", in: `#Narrowed.x`, want: false},
		{note: "a recursive definition", in: `#Rec`, want: true},
		{note: "a reference to a missing field", in: `#Outer.#Missing`, want: false},
	} {
		t.Run(tc.note, func(t *testing.T) {
			src := defs + "X=#Alias: #Plain\nlet L = #Plain\n_uses: [X, L]\nin: " + tc.in + "\n"
			root := cueCtx().CompileString(src)
			if err := root.Err(); err != nil && tc.want {
				t.Fatalf("the schema does not compile: %v", err)
			}
			v := root.LookupPath(cueParse("in"))
			if got := plainStruct(v, 0); got != tc.want {
				t.Errorf("plainStruct(%s) = %v, want %v", tc.in, got, tc.want)
			}
			if got := plainStructByPath(v, 0); got != tc.want {
				t.Errorf("plainStruct through ReferencePath (%s) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// TestS4PlainStructReferenceSchema holds plainStruct equal to its
// ReferencePath reading on every built-in input and on a policy's
// narrowing of one, the references the gateway meets most.
func TestS4PlainStructReferenceSchema(t *testing.T) {
	pkg := schemaPackage(t, "#Narrowed: #Echo & {input: message: =~\"^m\"}\n")
	inputs := builtinInputs(t, pkg)
	inputs["narrowed"] = pkg.LookupPath(cueParse("#Narrowed.input"))
	for name, in := range inputs {
		if got, want := plainStruct(in, 0), plainStructByPath(in, 0); got != want {
			t.Errorf("%s: plainStruct = %v, through ReferencePath %v", name, got, want)
		}
	}
}

// TestS4GateKeepsSchemaOnlyForCUE: a gate whose shape decides every input
// drops its CUE schema, which would hold the whole evaluated policy alive,
// and still decides as CUE does; a gate that leaves inputs to CUE keeps it.
func TestS4GateKeepsSchemaOnlyForCUE(t *testing.T) {
	for _, tc := range []struct {
		note, src, input, want string
		keeps                  bool
	}{
		{note: "a plain shape", src: `#In: {a!: int, s?: =~"^m"}`, input: `{"a": 1, "s": "x"}`,
			want: "Parameter 's' must satisfy =~\"^m\", got string \"x\".", keeps: false},
		{note: "a bound on another field", src: `#In: {lo!: int, hi!: >=lo}`, input: `{"lo": 2, "hi": 1}`,
			want: "Parameter 'hi' must satisfy >=lo, got number 1.", keeps: true},
		{note: "a disjunction of structs", src: `#In: {a!: int} | {b!: int}`, input: `{"a": 1}`, keeps: true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			g := compileCUE(t, tc.src, "#In")
			if got := g.Schema().Exists(); got != tc.keeps || got != g.NeedsCUE() {
				t.Fatalf("Schema().Exists() = %v, NeedsCUE() = %v, want %v", got, g.NeedsCUE(), tc.keeps)
			}
			if got := sentences(t, g, tc.input); got != tc.want {
				t.Errorf("Check(%s) = %q, want %q", tc.input, got, tc.want)
			}
		})
	}
}
