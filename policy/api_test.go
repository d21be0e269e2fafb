package policy_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFloorsPublicAPINamesNoInternalType: what a program outside the
// module sees of the public packages (exported functions, methods, types,
// their exported fields and methods, variables and constants) names no
// type of an internal package, so that the internal packages stay free to
// change (issue 47 item 1). An unexported field may hold one.
func TestFloorsPublicAPINamesNoInternalType(t *testing.T) {
	for _, dir := range []string{".", "../gateway"} {
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			internal := map[string]string{} // import name → path
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if !strings.Contains(path, "/internal/") {
					continue
				}
				n := filepath.Base(path)
				if im.Name != nil {
					n = im.Name.Name
				}
				internal[n] = path
			}
			check := func(where string, n ast.Node) {
				if n == nil {
					return
				}
				ast.Inspect(n, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.Field:
						// An unexported field, or a parameter's name: only
						// its type is seen, and an unexported field's not.
						if len(n.Names) > 0 && !n.Names[0].IsExported() && isStructField(n) {
							return false
						}
					case *ast.SelectorExpr:
						if x, ok := n.X.(*ast.Ident); ok && internal[x.Name] != "" {
							t.Errorf("%s: %s names %s.%s of %s", fset.Position(n.Pos()), where, x.Name, n.Sel.Name, internal[x.Name])
						}
					}
					return true
				})
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv) {
						continue
					}
					check(d.Name.Name, d.Type) // a receiver is an exported type of the package
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								markFields(s.Type)
								check(s.Name.Name, s.Type)
							}
						case *ast.ValueSpec:
							// A value's declared type; an internal constant
							// of a type of the language is no internal type.
							for _, n := range s.Names {
								if n.IsExported() {
									check(n.Name, s.Type)
								}
							}
						}
					}
				}
			}
		}
	}
}

// structFields are the fields of the exported types' structs, as
// markFields found them: a parameter is a Field too, and is always seen.
var structFields = map[*ast.Field]bool{}

func markFields(e ast.Expr) {
	ast.Inspect(e, func(n ast.Node) bool {
		if st, ok := n.(*ast.StructType); ok {
			for _, f := range st.Fields.List {
				structFields[f] = true
			}
		}
		return true
	})
}

func isStructField(f *ast.Field) bool { return structFields[f] }

// exportedRecv reports whether a method's receiver is an exported type.
func exportedRecv(recv *ast.FieldList) bool {
	e := recv.List[0].Type
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	id, ok := e.(*ast.Ident)
	return ok && id.IsExported()
}
