package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"cuelang.org/go/cue"
)

// A tool's input is exported as JSON Schema (rule S1) when a list first
// needs it, not at load (issue 32: an eighth of a load of 1,000 distinct
// tools, and nothing of check, vet, test or the hook reads it). Holding
// its CUE value until then would hold the whole evaluated policy, so the
// export is made from the compiled shape, which carries what the exporter
// reads beyond its own needs (defaults, doc comments, the order of
// required names and of a disjunction's arms, bounds as written). Its
// output is byte for byte ExportJSONSchema's (TestS1ExportFromShape). A
// gate that needs CUE to decide keeps its schema anyway and exports from
// it; a shape that cannot carry its export (noExport) is exported from
// CUE at compile time.

// exported is a gate's JSON Schema, built once.
type exported struct {
	once sync.Once
	done atomic.Bool
	data json.RawMessage
	err  error
}

// exportsBuilt counts the JSON Schemas the gates of this process built.
var exportsBuilt atomic.Int64

// ExportsBuilt is how many input schemas the process has exported as JSON
// Schema, for the tests that hold a load, check and vet to none.
func ExportsBuilt() int64 { return exportsBuilt.Load() }

// errDecoded is the export of a gate read from a plan, which keeps the
// JSON Schema beside the gate (policy.Tool).
var errDecoded = errors.New("a gate read from a saved plan has no JSON Schema of its own; the plan keeps it beside the gate")

// JSONSchema returns the input schema as one self-contained draft 2020-12
// JSON Schema (rule S1), as ExportJSONSchema writes it, built on the first
// call; tools that share a gate share it.
func (g *Gate) JSONSchema() (json.RawMessage, error) {
	g.js.once.Do(func() {
		exportsBuilt.Add(1)
		defer g.js.done.Store(true)
		if g.schema.Exists() {
			g.js.data, g.js.err = ExportJSONSchema(g.schema)
			return
		}
		s := g.root.export(0)
		s["$schema"] = schemaDraft
		g.js.data, g.js.err = json.Marshal(s)
	})
	return g.js.data, g.js.err
}

// Exported reports whether the gate's JSON Schema has been built.
func (g *Gate) Exported() bool { return g.js.done.Load() }

const schemaDraft = "https://json-schema.org/draft/2020-12/schema"

// export is n's JSON Schema as exporter.schema writes it for the value n
// was compiled from; depth counts as the exporter's does.
func (n *node) export(depth int) map[string]any {
	s := map[string]any{}
	if n.def != nil {
		s["default"] = *n.def
	}
	switch {
	case n.Enum != nil:
		vals := make([]any, len(n.Enum))
		for i, e := range n.Enum {
			vals[i], _ = e.json()
		}
		if len(vals) == 1 {
			s["const"] = vals[0]
		} else {
			s["enum"] = vals
		}
		return s
	case n.arms != nil:
		n.exportArms(s, depth)
		return s
	}
	if t := jsonTypes(n.Kinds); t != nil {
		s["type"] = t
	}
	pattern := false
	for _, c := range n.Checks {
		switch {
		case c.Op == cue.RegexMatchOp && !pattern:
			s["pattern"], pattern = c.Re.String(), true
		case c.js != "":
			s[boundKeyword[c.Op]] = c.js
		}
	}
	switch n.Kinds {
	case kObject:
		n.exportObject(s, depth)
	case kArray:
		if n.Elem != nil {
			if es := n.Elem.export(depth + 1); len(es) > 0 {
				s["items"] = es
			}
		}
	}
	return s
}

var boundKeyword = map[cue.Op]string{
	cue.GreaterThanEqualOp: "minimum", cue.GreaterThanOp: "exclusiveMinimum",
	cue.LessThanEqualOp: "maximum", cue.LessThanOp: "exclusiveMaximum",
}

func (n *node) exportObject(s map[string]any, depth int) {
	props := map[string]any{}
	for name, f := range n.Fields {
		ps := f.Node.export(depth + 1)
		if f.doc != "" {
			ps["description"] = boundedDoc(f.doc, ps)
		}
		props[name] = ps
	}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(n.required) > 0 {
		s["required"] = n.required
	}
	if n.Closed {
		s["additionalProperties"] = false
	} else if n.Extra != nil {
		if es := n.Extra.export(depth + 1); len(es) > 0 {
			s["additionalProperties"] = es
		}
	}
}

// An arm is one arm of a disjunction the shape reads as one node (string |
// null, string | {a?: int}), as the exporter shows it.
type arm struct {
	Of    armKind
	Value any   // armConst: the value, as JSON
	Kinds kinds // armType: the kind name's kinds
}

type armKind uint8

const (
	armNone   armKind = iota // not one the shape can export
	armConst                 // a concrete scalar
	armType                  // a kind name: string, int, _
	armObject                // the node's object
	armList                  // the node's array
)

// scalarArm reads a scalar arm of a disjunction.
func scalarArm(a cue.Value) arm {
	if a.IsConcrete() {
		if v, ok := jsonScalar(a); ok {
			return arm{Of: armConst, Value: v}
		}
		return arm{}
	}
	if isKindName(fmt.Sprint(a)) {
		return arm{Of: armType, Kinds: kindsOf(a.IncompleteKind())}
	}
	return arm{}
}

// armsOf reads the arms of a disjunction of scalars, and reports whether
// one is not an arm the shape can export.
func armsOf(args []cue.Value) ([]arm, bool) {
	arms := make([]arm, len(args))
	for i, a := range args {
		if arms[i] = scalarArm(a); arms[i].Of == armNone {
			return nil, true
		}
	}
	return arms, false
}

// exportArms writes a disjunction as the exporter does: an enum of
// concrete arms, a list of types, or anyOf.
func (n *node) exportArms(s map[string]any, depth int) {
	enum, types := []any{}, []string{}
	for _, a := range n.arms {
		if enum != nil && a.Of == armConst {
			enum = append(enum, a.Value)
		} else {
			enum = nil
		}
		t, _ := jsonTypes(a.Kinds).(string)
		switch {
		case types == nil:
		case a.Of == armConst && a.Value == nil:
			types = append(types, "null")
		case a.Of == armType && t != "":
			types = append(types, t)
		default:
			types = nil
		}
	}
	switch {
	case enum != nil:
		s["enum"] = enum
		return
	case types != nil:
		s["type"] = types
		return
	}
	alts := make([]any, len(n.arms))
	for i, a := range n.arms {
		as := map[string]any{}
		switch a.Of {
		case armConst:
			as["const"] = a.Value
		case armType:
			if t := jsonTypes(a.Kinds); t != nil {
				as["type"] = t
			}
		case armObject:
			as["type"] = "object"
			n.exportObject(as, depth+1)
		case armList:
			as["type"] = "array"
			if n.Elem != nil {
				if es := n.Elem.export(depth + 2); len(es) > 0 {
					as["items"] = es
				}
			}
		}
		alts[i] = as
	}
	s["anyOf"] = alts
}

// exportable reports whether n's export is the exporter's: no node below
// is marked, every enum value has a JSON spelling, and none is deeper than
// the exporter walks.
func (n *node) exportable(depth int) bool {
	if n.noExport || n.CUE || depth > maxCompileDepth {
		return false
	}
	if n.Enum != nil {
		for _, e := range n.Enum {
			if _, ok := e.json(); !ok {
				return false
			}
		}
		return true
	}
	below := depth + 1
	switch {
	case n.arms != nil:
		below = depth + 2
	case n.Kinds != kObject && n.Kinds != kArray:
		return true
	}
	for _, f := range n.Fields {
		if !f.Node.exportable(below) {
			return false
		}
	}
	return (n.Extra == nil || n.Extra.exportable(below)) && (n.Elem == nil || n.Elem.exportable(below))
}

// json is s as the exporter spells it (jsonScalar), false when CUE would
// not give it a float64 (a float beyond its range).
func (s scalar) json() (any, bool) {
	switch s.K {
	case kNull:
		return nil, true
	case kBool:
		return s.B, true
	case kString:
		return s.S, true
	}
	n, ok := parseNumber(s.S)
	if !ok {
		return nil, false
	}
	if s.K == kInt {
		l, _ := n.literal()
		return json.Number(l), true
	}
	f, err := strconv.ParseFloat(s.S, 64)
	if a := math.Abs(f); err != nil || a == 0 && n.Digits != "" || a >= math.MaxFloat64 || a <= math.SmallestNonzeroFloat64 && a != 0 {
		return nil, false // at or beyond the range: CUE's checks are its own
	}
	return json.Number(fmt.Sprint(f)), true
}

// defaultOf is v's default as the exporter writes it, or nil.
func defaultOf(v cue.Value) *any {
	d, ok := v.Default()
	if !ok || !d.IsConcrete() {
		return nil
	}
	sc, ok := jsonScalar(d)
	if !ok {
		return nil
	}
	return &sc
}

// boundsOf is what the exporter writes for v's bounds.
func boundsOf(v cue.Value) map[string]any {
	s := map[string]any{}
	bounds(s, v, 0)
	return s
}
