package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cuejson "cuelang.org/go/encoding/json"
	"cuelang.org/go/encoding/jsonschema"

	"aimon.dev/gw/tools"
)

// ExportJSONSchema renders a tool's input schema as one self-contained JSON
// Schema (draft 2020-12) for the list_tools reply and MCP clients (rule S1):
// a closed struct has additionalProperties: false at every level (S2), doc
// comments are descriptions, and bounds and regular expressions an author
// wrote are shown as minimum, maximum and pattern.
//
// cuelang.org/go/encoding/jsonschema.Generate is not used: for a
// definition met through an open struct (#Tool's input: {...} & #ReadInput,
// which is how a policy holds a built-in's input) it answers with
// additionalProperties: true beside a $ref, which a client that does not
// follow $ref reads as open.
func ExportJSONSchema(schema cue.Value) ([]byte, error) {
	if err := schema.Err(); err != nil {
		return nil, fmt.Errorf("cannot export the input schema as JSON Schema: %w", err)
	}
	if schema.IncompleteKind()&cue.StructKind == 0 {
		return nil, fmt.Errorf("cannot export the input schema as JSON Schema: it must describe an object, got %v", schema.IncompleteKind())
	}
	x := exporter{probe: schema.Context().CompileString(`{"gate·probe": _}`)}
	s := x.schema(schema, 0)
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	return json.Marshal(s)
}

type exporter struct {
	probe cue.Value
}

func (x *exporter) schema(v cue.Value, depth int) map[string]any {
	s := map[string]any{}
	if v.Err() != nil || depth > maxCompileDepth {
		// A recursive definition's deeper levels: any value.
		return s
	}
	if d, ok := v.Default(); ok && d.IsConcrete() {
		if sc, ok := jsonScalar(d); ok {
			s["default"] = sc
		}
	}
	op, args := v.Expr()
	k := v.IncompleteKind()
	if v.IsConcrete() && k&^(cue.StructKind|cue.ListKind) == k {
		if sc, ok := jsonScalar(v); ok {
			s["const"] = sc
			return s
		}
	}
	// A finite set of values, however it is spelt (a policy's narrowing
	// meets the built-in's enum as "a" | "b" & ("a" | "b" | "c")): its
	// members, each checked against the whole constraint (rule S1).
	if enum, ok := enumOf(v, 0); ok && k&^(cue.StructKind|cue.ListKind) == k {
		if len(enum) == 1 {
			s["const"] = enum[0]
		} else {
			s["enum"] = enum
		}
		return s
	}
	if op == cue.OrOp {
		var enum []any
		for _, a := range args {
			sc, ok := jsonScalar(a)
			if !ok || !a.IsConcrete() {
				enum = nil
				break
			}
			enum = append(enum, sc)
		}
		if enum != nil {
			s["enum"] = enum
			return s
		}
		if ts := plainTypes(args); ts != nil {
			s["type"] = ts
			return s
		}
		var alts []any
		for _, a := range args {
			alts = append(alts, x.schema(a, depth+1))
		}
		s["anyOf"] = alts
		return s
	}
	if t := jsonTypes(kindsOf(k)); t != nil {
		s["type"] = t
	}
	bounds(s, v, 0)
	if k == cue.StructKind {
		x.object(s, v, depth)
	}
	if k == cue.ListKind {
		if e := v.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() && !v.LookupPath(cue.MakePath(cue.Index(0))).Exists() {
			if es := x.schema(e, depth+1); len(es) > 0 {
				s["items"] = es
			}
		}
	}
	return s
}

func (x *exporter) object(s map[string]any, v cue.Value, depth int) {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	props := map[string]any{}
	var required []string
	for it.Next() {
		sel := it.Selector()
		if !sel.IsString() {
			continue
		}
		name := sel.Unquoted()
		fv := it.Value()
		ps := x.schema(fv, depth+1)
		if doc := docOf(fv); doc != "" {
			ps["description"] = boundedDoc(doc, ps)
		}
		props[name] = ps
		switch sel.ConstraintType() {
		case cue.RequiredConstraint:
			required = append(required, name)
		case cue.OptionalConstraint:
		default:
			if !suppliesValue(fv) {
				required = append(required, name)
			}
		}
	}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(required) > 0 {
		s["required"] = required
	}
	closed := v.Unify(x.probe).Err() != nil
	if closed {
		s["additionalProperties"] = false
	} else if extra := v.LookupPath(cue.MakePath(cue.AnyString)); extra.Exists() {
		if es := x.schema(extra, depth+1); len(es) > 0 {
			s["additionalProperties"] = es
		}
	}
	pats := patterns(v)
	if len(pats) == 0 {
		return
	}
	names := slices.Sorted(maps.Keys(props))
	c := compiler{ctx: v.Context()}
	if t, ok := c.exclusion(pats, names); ok && !closed {
		// JSON Schema's own additionalProperties, read back.
		if es := x.schema(t, depth+1); len(es) > 0 {
			s["additionalProperties"] = es
		}
		return
	}
	pp := map[string]any{}
	for _, r := range allowRules(pats) {
		if r.Neg {
			return // !~ has no JSON Schema form; leave the names open
		}
		t := v.Context().CompileString(r.Text)
		ts := map[string]any{}
		if t.Err() == nil {
			ts = x.schema(t, depth+1)
		}
		pp[r.Re.String()] = ts
	}
	if len(pp) > 0 {
		s["patternProperties"] = pp
	}
}

// plainTypes reads a disjunction of plain kinds (string | null) as a list of
// JSON Schema types, or returns nil.
func plainTypes(args []cue.Value) []string {
	var ts []string
	for _, a := range args {
		switch {
		case a.IsConcrete() && a.Kind() == cue.NullKind:
			ts = append(ts, "null")
		case !a.IsConcrete() && isKindName(fmt.Sprint(a)):
			t, ok := jsonTypes(kindsOf(a.IncompleteKind())).(string)
			if !ok {
				return nil
			}
			ts = append(ts, t)
		default:
			return nil
		}
	}
	return ts
}

// maxBoundsDepth is how deep in nested conjunctions bounds looks.
const maxBoundsDepth = 8

// bounds adds the JSON Schema form of the CUE bounds and regular
// expressions in v's conjunction.
func bounds(s map[string]any, v cue.Value, depth int) {
	op, args := v.Expr()
	if op == cue.AndOp && depth < maxBoundsDepth {
		for _, a := range args {
			bounds(s, a, depth+1)
		}
		return
	}
	if op == cue.CallOp && len(args) == 2 {
		// strings.MinRunes(n), strings.MaxRunes(n), list.MinItems(n), list.MaxItems(n).
		key := map[string]string{
			"strings.MinRunes": "minLength", "strings.MaxRunes": "maxLength",
			"list.MinItems": "minItems", "list.MaxItems": "maxItems",
		}[fmt.Sprint(args[0])]
		if n, err := args[1].Int64(); key != "" && err == nil {
			s[key] = n
		}
		return
	}
	if len(args) != 1 {
		return
	}
	a := args[0]
	switch op {
	case cue.RegexMatchOp:
		if re, err := a.String(); err == nil {
			if _, dup := s["pattern"]; !dup {
				s["pattern"] = re
			}
		}
		return
	case cue.GreaterThanEqualOp, cue.GreaterThanOp, cue.LessThanEqualOp, cue.LessThanOp:
	default:
		return
	}
	n, ok := jsonScalar(a)
	if !ok {
		return
	}
	if _, isNum := n.(json.Number); !isNum {
		return
	}
	key := map[cue.Op]string{
		cue.GreaterThanEqualOp: "minimum", cue.GreaterThanOp: "exclusiveMinimum",
		cue.LessThanEqualOp: "maximum", cue.LessThanOp: "exclusiveMaximum",
	}[op]
	s[key] = n
}

// enumOf returns the values v admits when they are finitely many scalars:
// the concrete arms of its disjunctions, kept only where the whole of v
// admits them.
func enumOf(v cue.Value, depth int) ([]any, bool) {
	vals, ok := enumValues(v, depth)
	if !ok {
		return nil, false
	}
	var out []any
	for _, c := range vals {
		sc, ok := jsonScalar(c)
		if !ok {
			return nil, false
		}
		out = append(out, sc)
	}
	return out, true
}

// enumValues is enumOf's values as CUE values, each once.
func enumValues(v cue.Value, depth int) ([]cue.Value, bool) {
	cands, ok := candidates(v, depth)
	if !ok || len(cands) == 0 {
		return nil, false
	}
	var out []cue.Value
	for _, c := range cands {
		if v.Unify(c).Validate(cue.Concrete(true)) != nil {
			continue
		}
		if !slices.ContainsFunc(out, func(o cue.Value) bool { return o.Equals(c) }) {
			out = append(out, c)
		}
	}
	return out, len(out) > 0
}

// candidates are the concrete scalars v may be: from a concrete value, the
// arms of a disjunction, or any finite operand of a conjunction.
func candidates(v cue.Value, depth int) ([]cue.Value, bool) {
	if depth > 8 {
		return nil, false
	}
	if v.IsConcrete() && v.Kind()&^(cue.StructKind|cue.ListKind) == v.Kind() {
		return []cue.Value{v}, true
	}
	op, args := v.Expr()
	switch op {
	case cue.OrOp:
		var out []cue.Value
		for _, a := range args {
			cs, ok := candidates(a, depth+1)
			if !ok {
				return nil, false
			}
			out = append(out, cs...)
		}
		return out, true
	case cue.AndOp:
		for _, a := range args {
			if cs, ok := candidates(a, depth+1); ok {
				return cs, true
			}
		}
	}
	return nil, false
}

// jsonScalar is a concrete CUE scalar as a JSON value.
func jsonScalar(v cue.Value) (any, bool) {
	switch v.Kind() {
	case cue.NullKind:
		return nil, true
	case cue.BoolKind:
		b, err := v.Bool()
		return b, err == nil
	case cue.StringKind:
		s, err := v.String()
		return s, err == nil
	case cue.IntKind:
		var i big.Int
		if _, err := v.Int(&i); err != nil {
			return nil, false
		}
		return json.Number(i.String()), true
	case cue.FloatKind, cue.NumberKind:
		f, err := v.Float64()
		if err != nil {
			return nil, false
		}
		return json.Number(fmt.Sprint(f)), true
	}
	return nil, false
}

func jsonTypes(ks kinds) any {
	if ks == kAll || ks == 0 {
		return nil
	}
	var ts []string
	add := func(k kinds, t string) {
		if ks&k != 0 {
			ts = append(ts, t)
		}
	}
	if ks&(kInt|kFrac) == kInt {
		ts = append(ts, "integer")
	} else {
		add(kInt|kFrac, "number")
	}
	add(kString, "string")
	add(kBool, "boolean")
	add(kObject, "object")
	add(kArray, "array")
	add(kNull, "null")
	if len(ts) == 1 {
		return ts[0]
	}
	return ts
}

// statedBound is a bound a description states in words.
var statedBound = regexp.MustCompile(`\b(at most|at least) (-?\d+)\b`)

// boundedDoc makes the bound a description states the one the schema
// enforces: a built-in says "at most 600000", a policy that narrows it to
// <=300000 exports "at most 300000", so that a model is not told a value
// the gate refuses. A bound the description does not state stays in the
// schema's keywords alone.
func boundedDoc(doc string, s map[string]any) string {
	return statedBound.ReplaceAllStringFunc(doc, func(m string) string {
		sub := statedBound.FindStringSubmatch(m)
		stated, err := strconv.ParseInt(sub[2], 10, 64)
		if err != nil {
			return m
		}
		key, tighter := "maximum", func(b int64) bool { return b < stated }
		if sub[1] == "at least" {
			key, tighter = "minimum", func(b int64) bool { return b > stated }
		}
		n, ok := s[key].(json.Number)
		if !ok {
			return m
		}
		if b, err := n.Int64(); err == nil && tighter(b) {
			return sub[1] + " " + n.String()
		}
		return m
	})
}

// docOf joins a field's doc comments into one description.
func docOf(v cue.Value) string {
	var parts []string
	for _, cg := range v.Doc() {
		if t := strings.TrimSpace(cg.Text()); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, " ")
}

// ImportJSONSchema reads the input schema an outside tool declares (a
// plugin, an MCP server) into CUE, taken as declared (rule S3): an object is
// closed only where it says additionalProperties: false. What the gate does
// not enforce is dropped before CUE sees it: range keywords such as minimum,
// pattern, format and default are the tool's business (S7); $ref, oneOf,
// anyOf, allOf, not, patternProperties and unknown type names are read as
// "any value" (S8), so that an unusual schema never refuses a call.
func ImportJSONSchema(ctx *cue.Context, data []byte) (cue.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return cue.Value{}, fmt.Errorf("the tool's input schema is not JSON: %w", err)
	}
	if d.More() {
		return cue.Value{}, fmt.Errorf("the tool's input schema has data after its end")
	}
	var top map[string]any
	switch raw.(type) {
	case map[string]any:
		top = simplify(raw, 0).(map[string]any)
	case bool:
		if raw == false {
			return cue.Value{}, fmt.Errorf("the tool's input schema is false: it admits no input")
		}
		top = map[string]any{} // any object
	default:
		return cue.Value{}, fmt.Errorf("the tool's input schema must be a JSON object, got %s", tools.Describe(raw))
	}
	// No type at the top is fine: only objects reach the gate.
	switch t := top["type"].(type) {
	case string:
		if t != "object" {
			return cue.Value{}, fmt.Errorf("the tool's input schema must describe an object, not %q", t)
		}
	case []any:
		if !slices.Contains(t, any("object")) {
			return cue.Value{}, fmt.Errorf("the tool's input schema must describe an object, not %v", t)
		}
	}
	b, err := json.Marshal(top)
	if err != nil {
		return cue.Value{}, fmt.Errorf("the tool's input schema cannot be read: %w", err)
	}
	expr, err := cuejson.Extract("input-schema.json", b)
	if err != nil {
		return cue.Value{}, fmt.Errorf("the tool's input schema cannot be read: %w", err)
	}
	f, err := jsonschema.Extract(ctx.BuildExpr(expr), &jsonschema.Config{DefaultVersion: jsonschema.VersionDraft2020_12})
	if err != nil {
		return cue.Value{}, fmt.Errorf("the tool's input schema cannot be read: %w", err)
	}
	v := ctx.BuildFile(f)
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("%w: %v", ErrNoInput, err)
	}
	if v.IncompleteKind()&cue.StructKind == 0 {
		// Its object form contradicts itself; other kinds are no input.
		return cue.Value{}, fmt.Errorf("%w: no object satisfies it", ErrNoInput)
	}
	return v, nil
}

// ErrNoInput is the error of an outside schema that contradicts itself, so
// that no input could satisfy it (a required property whose schema is false
// under a pattern that also applies): such a tool cannot be called at all.
var ErrNoInput = errors.New("the tool's input schema admits no input")

// readable are the keywords the gate enforces (S4) or keeps as text.
var readable = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "enum": true, "const": true, "description": true, "title": true,
	"patternProperties": true,
}

// readablePatterns reports whether every pattern of a patternProperties
// compiles as RE2, as CUE needs; JSON Schema's are ECMA-262, and one CUE
// cannot read makes the object open (S8).
func readablePatterns(pp any) bool {
	m, ok := pp.(map[string]any)
	if !ok {
		return false
	}
	for re := range m {
		if _, err := regexp.Compile(re); err != nil {
			return false
		}
	}
	return true
}

var jsonTypeNames = map[string]bool{
	"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true, "null": true,
}

// maxSchemaDepth bounds how deep an imported schema is read; deeper is any value.
const maxSchemaDepth = 32

// simplify keeps what the gate reads of a JSON Schema, recursively (S7, S8).
func simplify(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		if b, ok := s.(bool); ok {
			return b
		}
		return true
	}
	out := map[string]any{}
	for k, v := range m {
		if !readable[k] {
			continue
		}
		switch k {
		case "type":
			switch t := v.(type) {
			case string:
				if jsonTypeNames[t] {
					out[k] = t
				}
			case []any:
				var names []any
				good := len(t) > 0
				for _, e := range t {
					name, ok := e.(string)
					good = good && ok && jsonTypeNames[name]
					if !slices.Contains(names, e) {
						names = append(names, e)
					}
				}
				if good {
					out[k] = names
				}
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				continue
			}
			sp := map[string]any{}
			for name, ps := range props {
				sp[name] = simplify(ps, depth+1)
			}
			out[k] = sp
		case "required":
			if l, ok := v.([]any); ok {
				names := []any{}
				for _, e := range l {
					if s, ok := e.(string); ok && !slices.Contains(names, any(s)) {
						names = append(names, s)
					}
				}
				out[k] = names
			}
		case "additionalProperties":
			if pp, ok := m["patternProperties"]; ok && !readablePatterns(pp) {
				continue // names a pattern admits would be refused: open instead
			}
			out[k] = simplify(v, depth+1)
		case "patternProperties":
			if !readablePatterns(v) {
				continue
			}
			sp := map[string]any{}
			for re, ps := range v.(map[string]any) {
				sp[re] = simplify(ps, depth+1)
			}
			out[k] = sp
		case "items":
			if _, ok := v.([]any); ok {
				continue // the tuple form of older drafts
			}
			out[k] = simplify(v, depth+1)
		case "enum":
			if _, ok := v.([]any); ok {
				out[k] = v
			}
		default:
			out[k] = v
		}
	}
	return out
}
