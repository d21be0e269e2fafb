// Package gate checks a tool's input against its CUE schema before the tool
// runs (rules S4–S6, S10, S11) and converts schemas to and from JSON Schema
// (S1, S3, S7, S8).
//
// A schema is compiled once into a shape (fields, required names, kinds,
// enums, closedness, element schemas, numeric bounds and regular
// expressions) that the gate checks in Go: every violation at once, in the
// sentences of package tools, and without handing an unknown name to CUE,
// which interns every label it meets for the life of the process. Only an
// input that passes the shape, for a schema with constraints the shape does
// not model (a field bounded by another, string bounds, validators such as
// struct.MinFields, disjunctions of structs, fixed-length lists), then goes
// through CUE's Unify+Validate, without the names the shape has already
// judged. The verdict equals CUE's on every input (TestShapeEqualsCUE,
// FuzzShapeEqualsCUE).
//
// The gate reads JSON as the rules say, and CUE is given the same reading: a
// null in an object is a missing name (S4), and a number without a fraction
// is an integer whatever its spelling (S5: 3.0 is an int).
package gate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/tools"
)

// Limits bound what one input may hold; beyond them the gate answers with a
// violation, never a panic or a hang.
type Limits struct {
	// MaxDepth is the deepest nesting of objects and arrays.
	MaxDepth int
	// MaxKeys is the most names one object may hold.
	MaxKeys int
	// MaxKeyLen is the longest name, in bytes.
	MaxKeyLen int
	// MaxString is the longest string value, in bytes.
	MaxString int
	// MaxItems is the longest array.
	MaxItems int
	// MaxValues is the most values (of any kind, at any depth) one input
	// may hold, which bounds the memory its decoding takes; 0 means no bound.
	MaxValues int
}

// DefaultLimits are generous for any real tool call.
var DefaultLimits = Limits{
	MaxDepth:  64,
	MaxKeys:   256,
	MaxKeyLen: 256,
	MaxString: 16 << 20,
	MaxItems:  100_000,
	MaxValues: 500_000,
}

// A Gate checks inputs against one schema. It is safe for concurrent use:
// CUE values are immutable and their methods may be called concurrently
// (package cue, v0.17), and the rest is read-only after Compile.
type Gate struct {
	schema cue.Value
	root   *node
	lim    Limits
	js     *exported // its JSON Schema, built when first asked (export.go)
}

// Compile derives a gate from a tool's input schema: a closed definition for
// a built-in, possibly open for an outside tool. It fails when the schema is
// not an object schema or has an error.
func Compile(schema cue.Value) (*Gate, error) {
	return CompileLimits(schema, DefaultLimits)
}

// CompileLimits is Compile with other limits.
func CompileLimits(schema cue.Value, lim Limits) (*Gate, error) {
	if err := schema.Err(); err != nil {
		return nil, fmt.Errorf("the input schema has an error: %w", err)
	}
	if !schema.Exists() {
		return nil, fmt.Errorf("the input schema does not exist")
	}
	if k := schema.IncompleteKind(); k&cue.StructKind == 0 {
		return nil, fmt.Errorf("the input schema must describe an object, got %v", k)
	}
	c := &compiler{ctx: schema.Context(), basics: map[kinds]cue.Value{}}
	root, err := c.compile(schema, 0)
	if err != nil {
		return nil, fmt.Errorf("the input schema cannot be compiled: %w", err)
	}
	g := &Gate{root: root, lim: lim, js: &exported{}}
	switch {
	case root.CUE:
		// Only a shape that leaves inputs to CUE consults the schema; a
		// schema value holds its whole evaluated policy alive (issue 32:
		// most of a 1,000-tool policy's heap was held through its gates).
		g.schema = schema
	case !root.exportable(0):
		// The shape cannot write the export: it is made now, from CUE.
		g.schema = schema
		_, err := g.JSONSchema()
		g.schema = cue.Value{}
		if err != nil {
			return nil, fmt.Errorf("the input schema cannot be exported as JSON Schema: %w", err)
		}
	}
	return g, nil
}

// Schema returns the CUE schema the gate was compiled from, kept only when
// the gate needs CUE to decide some inputs (NeedsCUE); otherwise the zero
// value, as for a decoded gate.
func (g *Gate) Schema() cue.Value { return g.schema }

// Check returns every way in breaks the schema (rule S10), nil when none. in
// is a decoded JSON object with numbers as json.Number (float64 and int are
// accepted too). A JSON null counts as missing (S4); a string that spells a
// number is not a number (S11).
func (g *Gate) Check(in map[string]any) []tools.Violation {
	w := walker{lim: g.lim}
	w.object(g.root, in, &top, 1)
	if !g.root.CUE {
		return w.vs
	}
	if len(w.vs) == 0 {
		return g.checkCUE(in)
	}
	// All violations at once (rule S10): what only CUE checks is reported
	// beside the shape's, once per parameter.
	seen := map[string]bool{}
	for _, v := range w.vs {
		seen[v.Path] = true
	}
	for _, v := range g.checkCUE(in) {
		if !seen[v.Path] && v.Path != "" {
			seen[v.Path] = true
			w.vs = append(w.vs, v)
		}
	}
	return w.vs
}

type walker struct {
	lim Limits
	vs  []tools.Violation
}

func (w *walker) add(v tools.Violation) { w.vs = append(w.vs, v) }

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// loc is where the walker is, spelt only for a violation: most inputs
// have none, and building every path would cost more than the check.
type loc struct {
	parent *loc
	name   string
	index  int // an array index when name is "" and parent is not nil
}

func (l *loc) String() string {
	if l == nil || l.parent == nil {
		return ""
	}
	p := l.parent.String()
	if l.name == "" {
		return p + "[" + strconv.Itoa(l.index) + "]"
	}
	return join(p, l.name)
}

func (l *loc) field(name string) loc { return loc{parent: l, name: name} }

// top is the input's own place, never written.
var top loc

// value checks v at at, a copy: only a nested object or array moves its
// place to the heap (within), for its children to point to, so that the
// common input of scalars is checked without allocating.
func (w *walker) value(n *node, v any, at loc, depth int) {
	k, num, ok := kindOf(v)
	if !ok {
		w.add(tools.WrongType(at.String(), want(n.Kinds), v))
		return
	}
	if n.Kinds&k == 0 {
		w.add(tools.WrongType(at.String(), want(n.Kinds), v))
		return
	}
	switch x := v.(type) {
	case string:
		if len(x) > w.lim.MaxString {
			w.add(tools.Limit(at.String(), fmt.Sprintf("is a string of %d bytes; at most %d are accepted", len(x), w.lim.MaxString)))
			return
		}
	case map[string]any, []any:
		w.within(n, x, at, depth)
		return
	}
	if k&(kInt|kFrac) != 0 && num.tooLarge() {
		w.add(tools.Limit(at.String(), fmt.Sprintf("is a number too large to check (%s)", tools.Describe(v))))
		return
	}
	if n.Enum != nil && !slices.ContainsFunc(n.Enum, func(s scalar) bool { return s.matches(v) }) {
		allowed := make([]string, len(n.Enum))
		for i, s := range n.Enum {
			allowed[i] = s.String()
		}
		w.add(tools.OneOf(at.String(), allowed, v))
		return
	}
	if n.Checks != nil && !holds(n.Checks, v) {
		w.add(tools.Unsatisfied(at.String(), n.Text, v))
	}
}

// within checks the object or array v at at.
func (w *walker) within(n *node, v any, at loc, depth int) {
	if w.tooDeep(&at, depth) {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		w.object(n, x, &at, depth)
	case []any:
		w.array(n, x, &at, depth)
	}
}

// tooDeep reports, once, an object or array at a depth beyond the limit;
// the input object itself is at depth 1.
func (w *walker) tooDeep(at *loc, depth int) bool {
	if depth <= w.lim.MaxDepth {
		return false
	}
	w.add(tools.Limit(at.String(), fmt.Sprintf("is nested more than %d levels deep", w.lim.MaxDepth)))
	return true
}

func (w *walker) object(n *node, m map[string]any, at *loc, depth int) {
	if len(m) > w.lim.MaxKeys {
		w.add(tools.Limit(at.String(), fmt.Sprintf("has %d names; at most %d are accepted", len(m), w.lim.MaxKeys)))
		return
	}
	present := 0 // of m's names, those the schema declares
	for _, name := range n.names {
		f := n.Fields[name]
		v, ok := m[name]
		if ok {
			present++
		}
		if !ok || v == nil {
			if f.Required {
				w.add(tools.Missing(join(at.String(), name)))
			}
			continue
		}
		child := at.field(name)
		w.value(f.Node, v, child, depth+1)
	}
	if present == len(m) && n.Fields != nil {
		// Every name is declared: nothing is unknown, and m need not be
		// walked again (issue 49: a map's walk was a tenth of the gate).
		return
	}
	var unknown []string
	for name, v := range m {
		// A null is missing (rule S4), under any name.
		if _, ok := n.Fields[name]; !ok && v != nil {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		if len(name) > w.lim.MaxKeyLen {
			w.add(tools.Limit(join(at.String(), clip(name)), fmt.Sprintf("is a name of %d bytes; at most %d are accepted", len(name), w.lim.MaxKeyLen)))
			continue
		}
		child := at.field(name)
		switch {
		case n.Closed && !n.Patterned:
			w.unknown(at, name, n.names)
		case n.Closed && n.Allow != nil:
			if _, ok := n.admitted(name); !ok {
				w.unknown(at, name, n.names)
			}
		case n.Extra != nil:
			w.value(n.Extra, m[name], child, depth+1)
		default:
			// Any value; still bounded.
			w.value(anyNode, m[name], child, depth+1)
		}
	}
}

// unknown reports an undeclared name (rule S6), suggesting the closest
// declared one at the same place, spelt as a full path like the name.
func (w *walker) unknown(at *loc, name string, declared []string) {
	p := at.String()
	s := tools.Closest(name, declared)
	if s != "" {
		s = join(p, s)
	}
	w.add(tools.Unknown(join(p, name), s))
}

func (w *walker) array(n *node, a []any, at *loc, depth int) {
	if len(a) > w.lim.MaxItems {
		w.add(tools.Limit(at.String(), fmt.Sprintf("has %d items; at most %d are accepted", len(a), w.lim.MaxItems)))
		return
	}
	for i, e := range a {
		p := loc{parent: at, index: i}
		if n.Elem == nil {
			// Any value; still bounded.
			w.value(anyNode, e, p, depth+1)
			continue
		}
		w.value(n.Elem, e, p, depth+1)
	}
}

var anyNode = &node{Kinds: kAll}

// kindOf classifies a decoded JSON value.
func kindOf(v any) (kinds, number, bool) {
	switch v.(type) {
	case nil:
		return kNull, number{}, true
	case bool:
		return kBool, number{}, true
	case string:
		return kString, number{}, true
	case map[string]any:
		return kObject, number{}, true
	case []any:
		return kArray, number{}, true
	}
	n, ok := numberOf(v)
	if !ok {
		return 0, n, false
	}
	if n.integral() {
		return kInt, n, true
	}
	return kFrac, n, true
}

// want names the kinds for a sentence: "an integer", "a string or null".
func want(ks kinds) string {
	var alts []string
	add := func(k kinds, s string) {
		if ks&k != 0 {
			alts = append(alts, s)
		}
	}
	switch ks & (kInt | kFrac) {
	case kInt | kFrac:
		alts = append(alts, "a number")
	case kInt:
		alts = append(alts, "an integer")
	case kFrac:
		alts = append(alts, "a number with a fraction")
	}
	add(kString, "a string")
	add(kBool, "a boolean")
	add(kObject, "an object")
	add(kArray, "an array")
	add(kNull, "null")
	switch len(alts) {
	case 0:
		return "nothing (the schema allows no value)"
	case 1:
		return alts[0]
	}
	return strings.Join(alts[:len(alts)-1], ", ") + " or " + alts[len(alts)-1]
}

// clip shortens a name for a sentence.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	return strings.ToValidUTF8(s[:40], "") + "…"
}
