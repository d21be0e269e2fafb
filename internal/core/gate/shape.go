package gate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// kinds is a set of JSON kinds a node accepts. Integers and fractional
// numbers are apart because CUE's int and float are (rule S5: 3.0 is an int).
type kinds uint8

const (
	kNull kinds = 1 << iota
	kBool
	kInt
	kFrac
	kString
	kObject
	kArray
	kAll = kNull | kBool | kInt | kFrac | kString | kObject | kArray
)

// node is the shape of one schema value, derived once from CUE: what the
// gate checks itself. What it cannot model it marks with cue, and a value
// that passes the shape then goes through CUE's Unify+Validate.
type node struct {
	Kinds kinds `json:",omitzero"`
	// Enum, when not nil, lists the only scalar values allowed.
	Enum []scalar `json:",omitzero"`
	// Object shape.
	Fields map[string]*field `json:",omitzero"`
	names  []string          // declared names, sorted, for suggestions
	Closed bool              `json:",omitzero"`
	// Extra is the schema of undeclared names in an open object ([string]: T); nil is any.
	Extra *node `json:",omitzero"`
	// Patterned: names may be allowed or constrained by regular expressions,
	// or the object is one of a disjunction; the shape leaves undeclared
	// names to CUE.
	Patterned bool `json:",omitzero"`
	// Allow, for a closed patterned object, are its patterns when every one
	// is a plain regular expression: a name none admits is unknown, and the
	// shape says so before CUE meets the name.
	Allow []allowRule `json:",omitzero"`
	// Elem is the schema of every array element; nil is any.
	Elem *node `json:",omitzero"`
	// CUE: the schema says more here, or below, than the shape models (a
	// bound that refers to another field, string bounds, patterns,
	// validators, struct disjunctions); it is set on every ancestor too, so
	// the root's flag says whether an input needs CUE at all.
	CUE bool `json:",omitzero"`
	// Text is the schema in CUE syntax, for sentences.
	Text string `json:",omitzero"`
	// Checks are the author's bounds and regular expressions on a scalar,
	// checked in Go; when some constraint is not one of these, cue is set.
	Checks []check `json:",omitzero"`

	// What the JSON Schema export needs beyond the shape (export.go),
	// read at compile time so that no CUE is kept for it. A plan does not
	// encode them: a saved plan keeps the export itself.
	def      *any     // the schema's default, as JSON
	arms     []arm    // the disjunction's arms, for a node that is one and no enum
	required []string // the required names in the order of declaration
	// noExport marks what the node cannot export as CUE's exporter does:
	// the gate's export is then made from CUE at compile time.
	noExport bool
}

// isAny reports whether n admits every JSON value, and exports as {}.
func (n *node) isAny() bool {
	return n.Kinds == kAll && !n.CUE && !n.Closed && n.Enum == nil && n.Checks == nil &&
		n.Fields == nil && n.Extra == nil && n.Elem == nil && n.def == nil && n.arms == nil && !n.noExport
}

type field struct {
	Node     *node  `json:",omitzero"`
	Required bool   `json:",omitzero"`
	doc      string // its doc comments, the export's description
}

// maxCompileDepth stops the walk of recursive definitions (#T: {sub?: #T});
// deeper levels are left to CUE.
const maxCompileDepth = 24

type compiler struct {
	basics  map[kinds]cue.Value
	ctx     *cue.Context
	probe   cue.Value
	deepAnd bool // constraints met a conjunction deeper than bounds reads
}

func (c *compiler) compile(v cue.Value, depth int) (*node, error) {
	if err := v.Err(); err != nil {
		if depth == 0 {
			return nil, err
		}
		// A recursive optional field (y?: #Sub) reads as a structural
		// cycle from here, a bound on an optional field (>=lo) as
		// incomplete, a validator as failing on no fields: CUE decides
		// when a value arrives.
		t := text(v)
		if strings.HasPrefix(t, "_|_") {
			t = "its schema"
		}
		return &node{Kinds: kAll, CUE: true, Patterned: true, Text: t}, nil
	}
	n := &node{Text: text(v)}
	if depth > maxCompileDepth {
		n.Kinds, n.CUE, n.Patterned = kAll, true, true
		return n, nil
	}
	n.def = defaultOf(v)
	k := v.IncompleteKind()
	n.Kinds = kindsOf(k)
	op, args := v.Expr()
	switch {
	case k&^(cue.StructKind|cue.ListKind) == k && k != cue.BottomKind:
		// Scalars only.
		if v.IsConcrete() {
			s, ok := scalarOf(v)
			if !ok {
				n.CUE = true
				return n, nil
			}
			n.Enum = []scalar{s}
			return n, nil
		}
		// A disjunction of values is a set, and so is a narrowed one
		// ("a" | "b" & ("a" | "b" | "c")).
		if vals, ok := enumValues(v, 0); ok {
			enum := make([]scalar, 0, len(vals))
			for _, a := range vals {
				s, ok := scalarOf(a)
				if !ok {
					enum = nil
					break
				}
				enum = append(enum, s)
			}
			if enum != nil {
				n.Enum = enum
				return n, nil
			}
			n.noExport = true // the exporter lists the values
		}
		if n.Kinds == 0 {
			n.noExport = op != cue.NoOp
			return n, nil // bytes: no JSON value is one
		}
		switch {
		case !c.isBasic(v, n.Kinds):
			n.Checks, n.CUE, n.noExport = c.constraints(v)
		case op == cue.OrOp:
			n.arms, n.noExport = armsOf(args)
		case op != cue.NoOp:
			// string & string: the exporter looks for bounds in it.
			n.noExport = len(boundsOf(v)) > 0
		}
		return n, nil
	case k == cue.StructKind:
		if op == cue.OrOp {
			// A disjunction of structs: CUE decides, names and all.
			n.CUE, n.Patterned = true, true
			return n, nil
		}
		err := c.object(v, n, depth)
		if op != cue.NoOp && !plainStruct(v, 0) {
			// struct.MinFields(1) & {...}, #In & {a?: =~"x"}: CUE decides,
			// and sees every name the struct does not refuse.
			n.CUE = true
			n.Patterned = n.Patterned || !n.Closed
		}
		return n, err
	case k == cue.ListKind:
		if op != cue.NoOp {
			// [...int] | [...string], a validator: CUE decides, and sees
			// the elements whole.
			n.CUE = true
			return n, nil
		}
		return n, c.list(v, n, depth)
	case k == cue.TopKind && op == cue.NoOp && c.isBasic(v, kAll):
		// Only _ itself: a disjunction such as {a?: int} | _ admits
		// everything, yet CUE finds {} ambiguous between its arms.
		return n, nil
	default:
		// A mix of kinds: string | {a?: int}, or what JSON Schema without a
		// type reads as (null | bool | number | string | [...] | {...}).
		c.mixed(v, n, op, args, depth)
		return n, nil
	}
}

// mixed reads a disjunction of basic scalar kinds with at most one struct
// and one list; anything else is left to CUE, names and all.
func (c *compiler) mixed(v cue.Value, n *node, op cue.Op, args []cue.Value, depth int) {
	opaque := func() {
		n.CUE, n.Patterned, n.Fields, n.names, n.Elem, n.Extra, n.arms = true, true, nil, nil, nil, nil, nil
	}
	if op != cue.OrOp {
		opaque()
		return
	}
	var obj, list *cue.Value
	for _, a := range args {
		switch ak := a.IncompleteKind(); {
		case ak == cue.StructKind && obj == nil:
			obj = &a
			n.arms = append(n.arms, arm{Of: armObject})
		case ak == cue.ListKind && list == nil:
			list = &a
			n.arms = append(n.arms, arm{Of: armList})
		case ak == cue.NullKind:
			n.arms = append(n.arms, scalarArm(a))
		case ak&^(cue.StructKind|cue.ListKind) == ak && !a.IsConcrete() && c.isBasic(a, kindsOf(ak)):
			n.arms = append(n.arms, scalarArm(a))
		default:
			opaque()
			return
		}
	}
	n.noExport = slices.ContainsFunc(n.arms, func(a arm) bool { return a.Of == armNone })
	if obj != nil {
		if op, _ := obj.Expr(); op != cue.NoOp {
			opaque()
			return
		}
		if err := c.object(*obj, n, depth); err != nil {
			opaque()
			return
		}
	}
	if list != nil {
		if op, _ := list.Expr(); op != cue.NoOp {
			opaque()
			return
		}
		if err := c.list(*list, n, depth); err != nil {
			opaque()
		}
	}
}

func (c *compiler) object(v cue.Value, n *node, depth int) error {
	n.Closed = c.closed(v)
	n.Fields = map[string]*field{}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		n.CUE, n.Patterned = true, true
		return nil
	}
	for it.Next() {
		sel := it.Selector()
		if !sel.IsString() {
			continue
		}
		name := sel.Unquoted()
		fn, err := c.compile(it.Value(), depth+1)
		if err != nil {
			return fmt.Errorf("field %s: %w", name, err)
		}
		f := &field{Node: fn, doc: docOf(it.Value())}
		switch sel.ConstraintType() {
		case cue.RequiredConstraint:
			f.Required = true
		case cue.OptionalConstraint:
		default:
			// A regular field: present in every instance; absent input is
			// fine only when the schema supplies a value.
			f.Required = !suppliesValue(it.Value())
		}
		if f.Required {
			n.required = append(n.required, name)
		}
		n.Fields[name] = f
		n.names = append(n.names, name)
		if fn.CUE {
			n.CUE = true
		}
	}
	slices.Sort(n.names)
	if extra := v.LookupPath(cue.MakePath(cue.AnyString)); extra.Exists() && !n.Closed {
		en, err := c.compile(extra, depth+1)
		if err != nil {
			return err
		}
		if !en.isAny() {
			n.Extra = en
		}
		if en.CUE {
			n.CUE = true
		}
	}
	if pats := patterns(v); len(pats) > 0 {
		t, ok := c.exclusion(pats, n.names)
		if !ok || n.Closed || n.Extra != nil {
			n.Patterned, n.CUE = true, true
			n.Allow = allowRules(pats)
			return nil
		}
		en, err := c.compile(t, depth+1)
		if err != nil {
			return err
		}
		n.Extra = en
		if en.CUE {
			n.CUE = true
		}
	}
	return nil
}

func (c *compiler) list(v cue.Value, n *node, depth int) error {
	// A fixed or prefixed list ([int, string]) or the empty list is left to CUE.
	e := v.LookupPath(cue.MakePath(cue.AnyIndex))
	if v.LookupPath(cue.MakePath(cue.Index(0))).Exists() || !e.Exists() {
		n.CUE = true
		return nil
	}
	en, err := c.compile(e, depth+1)
	if err != nil {
		return err
	}
	if !en.isAny() {
		n.Elem = en
	}
	if en.CUE {
		n.CUE = true
	}
	return nil
}

// isBasic reports whether v is exactly the basic type of its kinds, with
// no constraint of its author (>=1, =~"x"): the shape then says all.
func (c *compiler) isBasic(v cue.Value, ks kinds) bool {
	b, ok := c.basics[ks]
	if !ok {
		b = c.ctx.CompileString(basicSource(ks))
		c.basics[ks] = b
	}
	if b.Err() != nil {
		return false
	}
	// v's values are all of kinds ks, so v is exactly the basic type when
	// it admits all of it. (b.Subsume(v) would say no for any optional or
	// required field: the field's flag counts.)
	if v.Subsume(b) == nil {
		return true
	}
	// A pattern constraint's value ([string]: _) does not subsume; its
	// spelling is then the only witness.
	op, _ := v.Expr()
	return op == cue.NoOp && !v.IsConcrete() && fmt.Sprint(v) == basicSource(ks)
}

func basicSource(ks kinds) string {
	if ks == kAll {
		return "_"
	}
	var alts []string
	add := func(k kinds, s string) {
		if ks&k != 0 {
			alts = append(alts, s)
		}
	}
	if ks&(kInt|kFrac) == kInt|kFrac {
		alts = append(alts, "number")
	} else {
		add(kInt, "int")
		add(kFrac, "float")
	}
	add(kNull, "null")
	add(kBool, "bool")
	add(kString, "string")
	add(kObject, "{...}")
	add(kArray, "[...]")
	return strings.Join(alts, " | ")
}

func kindsOf(k cue.Kind) kinds {
	var ks kinds
	if k&cue.NullKind != 0 {
		ks |= kNull
	}
	if k&cue.BoolKind != 0 {
		ks |= kBool
	}
	if k&cue.IntKind != 0 {
		ks |= kInt
	}
	if k&cue.FloatKind != 0 {
		ks |= kFrac
	}
	if k&cue.StringKind != 0 {
		ks |= kString
	}
	if k&cue.StructKind != 0 {
		ks |= kObject
	}
	if k&cue.ListKind != 0 {
		ks |= kArray
	}
	return ks
}

// suppliesValue reports whether a regular field's schema gives a value when
// the input has none: a default, a concrete value, or a struct whose own
// fields are all satisfied without input.
func suppliesValue(v cue.Value) bool {
	if _, ok := v.Default(); ok {
		return true
	}
	if v.IsConcrete() && v.Validate(cue.Concrete(true)) == nil {
		return true
	}
	return false
}

// closed reports whether v's struct refuses undeclared names. Allows is
// not reliable for a definition met through an open struct ({...} &
// #ReadInput says it allows any name, yet CUE refuses one), so ask CUE what
// it does with one reserved name; only that name is ever interned.
func (c *compiler) closed(v cue.Value) bool {
	if !c.probe.Exists() {
		c.probe = c.ctx.CompileString(`{"gate·probe": _}`)
	}
	return v.Unify(c.probe).Err() != nil
}

// patterns returns v's pattern constraints other than [string]: a closed
// struct with [=~"^x-"]: _ allows names the shape cannot list. Nested
// structs are their own nodes; definitions that the syntax spells as
// fields (_#def) are not.
func patterns(v cue.Value) []*ast.Field {
	var found []*ast.Field
	ast.Walk(v.Syntax(), func(n ast.Node) bool {
		if f, ok := n.(*ast.Field); ok {
			switch l := f.Label.(type) {
			case *ast.ListLit:
				if len(l.Elts) == 1 {
					if id, ok := l.Elts[0].(*ast.Ident); ok && id.Name == "string" {
						return false
					}
				}
				found = append(found, f)
			case *ast.Ident:
				return strings.HasPrefix(l.Name, "#") || strings.HasPrefix(l.Name, "_#")
			}
			return false
		}
		return true
	}, nil)
	return found
}

// exclusion recognizes the one pattern JSON Schema's additionalProperties
// becomes, [!~"^(a|b)$"]: T with exactly the declared names, and returns T:
// the schema of undeclared names, which the shape checks itself, so that
// such names never reach CUE.
func (c *compiler) exclusion(pats []*ast.Field, declared []string) (cue.Value, bool) {
	if len(pats) != 1 || len(declared) == 0 {
		return cue.Value{}, false
	}
	l := pats[0].Label.(*ast.ListLit)
	if len(l.Elts) != 1 {
		return cue.Value{}, false
	}
	u, ok := l.Elts[0].(*ast.UnaryExpr)
	if !ok || u.Op != token.NMAT {
		return cue.Value{}, false
	}
	lit, ok := u.X.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return cue.Value{}, false
	}
	re, err := literal.Unquote(lit.Value)
	if err != nil || !strings.HasPrefix(re, "^(") || !strings.HasSuffix(re, ")$") {
		return cue.Value{}, false
	}
	alts := splitAlternatives(re[2 : len(re)-2])
	want := make([]string, len(declared))
	for i, d := range declared {
		want[i] = regexp.QuoteMeta(d)
	}
	slices.Sort(alts)
	slices.Sort(want)
	if !slices.Equal(alts, want) {
		return cue.Value{}, false
	}
	t := c.ctx.BuildExpr(pats[0].Value)
	if t.Err() != nil {
		return cue.Value{}, false // it refers to something: CUE decides
	}
	return t, true
}

// splitAlternatives splits a regular expression at its top-level |, minding
// escapes.
func splitAlternatives(re string) []string {
	var alts []string
	start := 0
	for i := 0; i < len(re); i++ {
		switch re[i] {
		case '\\':
			i++
		case '|':
			alts = append(alts, re[start:i])
			start = i + 1
		}
	}
	return append(alts, re[start:])
}

// text renders a schema value for a sentence in the gateway's own words,
// not in CUE's printer output, which changes between releases.
func text(v cue.Value) string {
	return clipText(render(v, 0))
}

func render(v cue.Value, depth int) string {
	if depth > 8 {
		return "..."
	}
	op, args := v.Expr()
	switch op {
	case cue.AndOp:
		var parts []string
		for _, a := range args {
			s := render(a, depth+1)
			if !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
		if len(parts) > 1 {
			parts = slices.DeleteFunc(parts, isKindName)
		}
		return strings.Join(parts, " & ")
	case cue.OrOp:
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = render(a, depth+1)
		}
		return strings.Join(parts, " | ")
	case cue.LessThanOp, cue.LessThanEqualOp, cue.GreaterThanOp, cue.GreaterThanEqualOp,
		cue.NotEqualOp, cue.RegexMatchOp, cue.NotRegexMatchOp:
		if len(args) == 1 {
			if s, ok := scalarOf(args[0]); ok {
				return op.String() + s.String()
			}
		}
	case cue.NoOp:
		if s, ok := scalarOf(v); ok && v.IsConcrete() {
			return s.String()
		}
		if isKindName(fmt.Sprint(v)) && kindName[v.IncompleteKind()] != "" {
			return kindName[v.IncompleteKind()]
		}
	}
	return strings.Join(strings.Fields(fmt.Sprint(v)), " ")
}

var kindName = map[cue.Kind]string{
	cue.IntKind: "int", cue.FloatKind: "float", cue.NumberKind: "number", cue.StringKind: "string",
	cue.BoolKind: "bool", cue.NullKind: "null", cue.TopKind: "_", cue.BytesKind: "bytes",
}

func isKindName(s string) bool {
	switch s {
	case "int", "float", "number", "string", "bool", "null", "_", "bytes":
		return true
	}
	return false
}

func clipText(s string) string {
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:117], "") + "..."
	}
	return s
}

// plainStruct reports whether v is a conjunction of struct literals and
// references to them, with no validator (struct.MinFields) or disjunction:
// the evaluated fields and closedness then say all there is.
func plainStruct(v cue.Value, depth int) bool { return plainVia(v, depth, follow) }

// plainVia is plainStruct with the references followed by deref, which
// returns false when a reference has no root.
func plainVia(v cue.Value, depth int, deref func(cue.Value) (cue.Value, bool)) bool {
	if depth > 16 {
		return false
	}
	op, args := v.Expr()
	switch op {
	case cue.NoOp:
		return v.IncompleteKind() == cue.StructKind
	case cue.AndOp:
		for _, a := range args {
			if !plainVia(a, depth+1, deref) {
				return false
			}
		}
		return true
	case cue.CallOp:
		// close({...}), as JSON Schema's additionalProperties: false reads;
		// closedness itself is the probe's to find.
		return len(args) == 2 && fmt.Sprint(args[0]) == "close" && plainVia(args[1], depth+1, deref)
	case cue.SelectorOp:
		d, ok := deref(v)
		return ok && plainVia(d, depth+1, deref)
	}
	return false
}

// follow returns the value a reference names. A bare name of a field in
// scope (#In) always has a root, and the field it names is the value
// Dereference resolves without finalizing the whole root, which
// ReferencePath does on every call: milliseconds a tool when the root is a
// package the policy imports (issue 32). A selection (pkg.#In, #A.b) may
// have no root, and goes through ReferencePath.
func follow(v cue.Value) (cue.Value, bool) {
	if fieldReference(v) {
		return cue.Dereference(v), true
	}
	return byReferencePath(v)
}

func byReferencePath(v cue.Value) (cue.Value, bool) {
	root, path := v.ReferencePath()
	if !root.Exists() {
		return cue.Value{}, false
	}
	return root.LookupPath(path), true
}

// fieldReference reports whether a reference (cue.SelectorOp) is spelt as
// an identifier, which CUE compiles to a reference to a field in scope,
// not a selection.
func fieldReference(v cue.Value) bool {
	switch s := v.Source().(type) {
	case *ast.Ident:
		return true
	case *ast.Field:
		_, ok := s.Value.(*ast.Ident)
		return ok
	}
	return false
}

// allowRule is one pattern constraint [=~"re"]: T or [!~"re"]: T.
type allowRule struct {
	Re   *regexp.Regexp `json:",omitzero"`
	Neg  bool           `json:",omitzero"`
	Text string         `json:",omitzero"` // T, for sentences
}

func (r allowRule) admits(name string) bool { return r.Re.MatchString(name) != r.Neg }

// allowRules reads the patterns as allow rules, or returns nil when one of
// them is not a plain regular expression.
func allowRules(pats []*ast.Field) []allowRule {
	var rules []allowRule
	for _, f := range pats {
		l := f.Label.(*ast.ListLit)
		if len(l.Elts) != 1 {
			return nil
		}
		u, ok := l.Elts[0].(*ast.UnaryExpr)
		if !ok || (u.Op != token.MAT && u.Op != token.NMAT) {
			return nil
		}
		lit, ok := u.X.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil
		}
		src, err := literal.Unquote(lit.Value)
		if err != nil {
			return nil
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil
		}
		text := "its schema"
		if b, err := format.Node(f.Value); err == nil {
			text = clipText(strings.Join(strings.Fields(string(b)), " "))
		}
		rules = append(rules, allowRule{Re: re, Neg: u.Op == token.NMAT, Text: text})
	}
	return rules
}

// admitted reports whether a pattern of n admits name, and its schema text.
func (n *node) admitted(name string) (string, bool) {
	for _, r := range n.Allow {
		if r.admits(name) {
			return r.Text, true
		}
	}
	return "", false
}
