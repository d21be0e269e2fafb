package gate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"aimon.dev/gw/tools"
)

// checkCUE runs an input that passed the shape through CUE's Unify+Validate
// and turns what CUE finds into the gateway's sentences: CUE's own messages
// are internal text that changes between releases.
func (g *Gate) checkCUE(in map[string]any) []tools.Violation {
	enc := encode(g.root, in)
	err := g.schema.Unify(g.schema.Context().Encode(enc)).Validate(cue.Concrete(true))
	if err == nil {
		return nil
	}
	// Errors are at paths from the root the schema was found in, if any.
	var prefix []string
	for _, s := range g.schema.Path().Selectors() {
		prefix = append(prefix, s.String())
	}
	var vs []tools.Violation
	seen := map[string]bool{}
	for _, e := range errors.Errors(err) {
		sels := e.Path()
		if len(sels) >= len(prefix) && slices.Equal(sels[:len(prefix)], prefix) {
			sels = sels[len(prefix):]
		}
		v := g.sentence(in, sels)
		if !seen[v.Path] {
			seen[v.Path] = true
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		vs = append(vs, tools.Unsatisfied("", g.root.Text, in))
	}
	// CUE explains a failed disjunction arm by arm; the parameter that
	// failed is the sentence, not each arm's reason.
	all := slices.Clone(vs)
	return slices.DeleteFunc(vs, func(v tools.Violation) bool {
		for _, o := range all {
			if o.Path != "" && o.Path != v.Path && (strings.HasPrefix(v.Path, o.Path+".") || strings.HasPrefix(v.Path, o.Path+"[")) {
				return true
			}
		}
		return false
	})
}

// sentence names the parameter at CUE error path sels, with the schema text
// of the nearest declared node.
func (g *Gate) sentence(in map[string]any, sels []string) tools.Violation {
	n, path, text := g.root, "", ""
	var cur any = in
	for _, s := range sels {
		if i, err := strconv.Atoi(s); err == nil {
			a, ok := cur.([]any)
			if !ok || i < 0 || i >= len(a) {
				break
			}
			path, cur, text = fmt.Sprintf("%s[%d]", path, i), a[i], ""
			if n != nil {
				n = n.Elem
			}
			continue
		}
		name := unquote(s)
		m, ok := cur.(map[string]any)
		if !ok {
			break
		}
		v, present := m[name]
		var next *node
		text = ""
		if n != nil {
			if f, ok := n.Fields[name]; ok {
				next = f.Node
			} else if t, ok := n.admitted(name); ok {
				text = t
			} else {
				next = n.Extra
			}
		}
		path, n = join(path, name), next
		if !present || v == nil {
			return tools.Missing(path)
		}
		cur = v
	}
	if text == "" {
		text = "its schema"
		if n != nil {
			text = n.Text
		}
	}
	return tools.Unsatisfied(path, text, cur)
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// encode makes the Go value CUE sees: nulls in objects dropped (a null is
// missing, rule S4), numbers as CUE literals (3.0 is an int, rule S5), and
// names the schema leaves open without constraint dropped, so that CUE
// meets no name the schema does not declare.
func encode(n *node, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for name, e := range x {
			if e == nil {
				continue
			}
			var en *node
			if n != nil {
				if f, ok := n.Fields[name]; ok {
					en = f.Node
				} else if n.Extra != nil && (n.Extra.CUE || n.Patterned) {
					en = n.Extra
				} else if !n.Closed && !n.Patterned {
					// Undeclared, and either free or fully checked by the
					// shape: CUE's verdict does not depend on it, and the
					// name is not interned.
					continue
				}
			}
			out[name] = encode(en, e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		var en *node
		if n != nil {
			en = n.Elem
		}
		for i, e := range x {
			out[i] = encode(en, e)
		}
		return out
	case nil, bool, string:
		return x
	}
	num, ok := numberOf(v)
	if !ok {
		return v
	}
	lit, integral := num.literal()
	kind := token.FLOAT
	if integral {
		kind = token.INT
	}
	return &ast.BasicLit{Kind: kind, Value: lit}
}
