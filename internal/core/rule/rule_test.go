package rule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
)

// TestIDValid: a rule id of docs/RULES.md and a problem code are valid, a
// rule only the former; anything else, such as a misspelt or unknown id,
// is neither.
func TestIDValid(t *testing.T) {
	for _, tc := range []struct {
		note        string
		id          ID
		valid, rule bool
	}{
		{"a permission rule", P6, true, true},
		{"the last running rule", R8, true, true},
		{"a problem code", CUE, true, false},
		{"the test problem code", Test, true, false},
		{"an id RULES.md does not have", "P99", false, false},
		{"lower case", "p6", false, false},
		{"a suffix", "P12b", false, false},
		{"empty", "", false, false},
	} {
		if got := tc.id.Valid(); got != tc.valid {
			t.Errorf("%s: %q.Valid() = %v, want %v", tc.note, tc.id, got, tc.valid)
		}
		if got := tc.id.IsRule(); got != tc.rule {
			t.Errorf("%s: %q.IsRule() = %v, want %v", tc.note, tc.id, got, tc.rule)
		}
	}
}

// TestIDConstantsAreListed: every ID constant of this package is in the
// list Valid reads, so a new rule cannot be used before it is known.
func TestIDConstantsAreListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "rule.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		v, ok := node.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if typ, ok := v.Type.(*ast.Ident); !ok || typ.Name != "ID" {
			return true
		}
		for _, e := range v.Values {
			s, err := strconv.Unquote(e.(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			n++
			if !ID(s).Valid() {
				t.Errorf("constant %s = %q is not listed in rules or problems of rule.go; add it there", v.Names[0].Name, s)
			}
		}
		return true
	})
	if n != len(rules)+len(problems) {
		t.Errorf("rule.go declares %d ID constants but lists %d; list each once", n, len(rules)+len(problems))
	}
}
