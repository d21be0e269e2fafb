package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

// TestRuleIDsAreKnown reads every non-test Go file of the module for the
// codes it can emit as a rule.ID (a diagnostic's code, a decision's rule, a
// test's expected rule): string constants given to a parameter or a field
// of that type, converted to it, or compared with one. Each must be a rule
// of docs/RULES.md or a problem code of package rule, so vet's JSON, the
// decision log and the tests name only ids a reader can look up.
func TestRuleIDsAreKnown(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{} // directory → its files
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ruleDir := filepath.Join(root, "internal", "core", "rule")
	exported := idParams(pkgs[ruleDir], true) // rule.Refused and the like
	checked := 0
	for dir, files := range pkgs {
		local := idParams(files, dir == ruleDir)
		for _, f := range files {
			for _, lit := range idLiterals(f, local, exported) {
				checked++
				id, _ := strconv.Unquote(lit.Value)
				if !rule.ID(id).Valid() {
					t.Errorf("%s: %s is emitted as a rule id but is neither a rule of docs/RULES.md nor a problem code of internal/core/rule; use a rule constant (rule.P7) or add the code there", fset.Position(lit.Pos()), lit.Value)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("found only %d rule ids in the code; the walk no longer finds the places that emit them", checked)
	}
}

// isID reports whether a type expression is rule.ID (ID inside package rule).
func isID(e ast.Expr, inRule bool) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return inRule && e.Name == "ID"
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		return ok && x.Name == "rule" && e.Sel.Name == "ID"
	}
	return false
}

// idParams maps the functions of one package (declared, or function
// literals given a name) to the indices of their rule.ID parameters: a
// method by ".name", a function by its name.
func idParams(files []*ast.File, inRule bool) map[string][]int {
	out := map[string][]int{}
	add := func(name string, ft *ast.FuncType) {
		i := 0
		for _, field := range ft.Params.List {
			n := max(len(field.Names), 1)
			if isID(field.Type, inRule) {
				for k := range n {
					out[name] = append(out[name], i+k)
				}
			}
			i += n
		}
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil {
					add("."+n.Name.Name, n.Type)
				} else {
					add(n.Name.Name, n.Type)
				}
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if fl, ok := rhs.(*ast.FuncLit); ok && i < len(n.Lhs) {
						if id, ok := n.Lhs[i].(*ast.Ident); ok {
							add(id.Name, fl.Type)
						}
					}
				}
			}
			return true
		})
	}
	return out
}

// idLiterals are the string literals of f that become a rule.ID: the Code
// or Rule field of a composite literal, an argument in a rule.ID parameter
// (local: of the file's package; exported: of package rule), a conversion
// rule.ID("…"), and a comparison with a .Code or .Rule.
func idLiterals(f *ast.File, local, exported map[string][]int) []*ast.BasicLit {
	var out []*ast.BasicLit
	str := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `""` { // "" is no rule
			out = append(out, lit)
		}
	}
	field := func(e ast.Expr) bool {
		var name string
		switch e := e.(type) {
		case *ast.Ident:
			name = e.Name
		case *ast.SelectorExpr:
			name = e.Sel.Name
		}
		return name == "Code" || name == "Rule"
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.KeyValueExpr:
			if field(n.Key) {
				str(n.Value)
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				if field(n.X) {
					str(n.Y)
				}
				if field(n.Y) {
					str(n.X)
				}
			}
		case *ast.CallExpr:
			var idx []int
			switch fun := n.Fun.(type) {
			case *ast.Ident:
				idx = local[fun.Name]
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok && x.Name == "rule" {
					idx = exported[fun.Sel.Name]
					if fun.Sel.Name == "ID" {
						idx = []int{0}
					}
				} else {
					idx = local["."+fun.Sel.Name]
				}
			}
			for _, i := range idx {
				if i < len(n.Args) {
					str(n.Args[i])
				}
			}
		}
		return true
	})
	return out
}

// TestRuleIDLiterals pins what the walk above reads as a rule id, so that a
// change to it cannot quietly stop finding the codes.
func TestRuleIDLiterals(t *testing.T) {
	for _, tc := range []struct {
		note, src string
		want      []string
	}{
		{"a diagnostic's code", `x := Diagnostic{Code: "P99", Message: "m"}`, []string{`"P99"`}},
		{"a decision's rule", `d := rule.Decision{Rule: "K9"}`, []string{`"K9"`}},
		{"a method's rule.ID parameter", `c.fail(v, "X1", "format %s", "arg")`, []string{`"X1"`}},
		{"a function literal's rule.ID parameter", `fail("X2", "format")`, []string{`"X2"`}},
		{"package rule's function", `rule.Refused("X3", "reason")`, []string{`"X3"`}},
		{"a conversion", `id := rule.ID("X4")`, []string{`"X4"`}},
		{"a comparison", `ok := d.Code == "X5"`, []string{`"X5"`}},
		{"no rule: the empty string", `ok := t.Rule != ""`, nil},
		{"other strings are not ids", `c.fail(v, rule.P7, "tool %s", "Code")`, nil},
	} {
		src := "package p\nfunc (c *compiler) fail(v int, code rule.ID, format string, args ...any) {}\nfunc f() {\n\tfail := func(code rule.ID, format string) {}\n\t" + tc.src + "\n}\n"
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.note, err)
		}
		var got []string
		for _, lit := range idLiterals(f, idParams([]*ast.File{f}, false), map[string][]int{"Refused": {0}}) {
			got = append(got, lit.Value)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: found %v, want %v", tc.note, got, tc.want)
		}
	}
}
