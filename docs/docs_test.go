package docs

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shared is the read-only spec that CI puts beside the clone.
const shared = "../../shared/spec"

// TestDocsMatchTheSharedSpec holds docs/*.md equal to the shared spec when
// it is there, and always checks that every rule id the code names is
// defined in RULES.md, so the ids the code cites resolve in the repository.
func TestDocsMatchTheSharedSpec(t *testing.T) {
	specs, err := filepath.Glob(filepath.Join(shared, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shared); errors.Is(err, fs.ErrNotExist) {
		t.Logf("%s is absent: only the rule ids are checked", shared)
	} else if len(specs) == 0 {
		t.Fatalf("%s holds no .md file; the shared spec is expected there", shared)
	}
	for _, spec := range specs {
		name := filepath.Base(spec)
		want, err := os.ReadFile(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/%s differs from the shared spec %s: refresh it with `cp ../shared/spec/*.md docs/` from the repository root and commit it", name, spec)
		}
	}

	rules, err := os.ReadFile("RULES.md")
	if err != nil {
		t.Fatalf("docs/RULES.md is missing (%v): copy it from ../shared/spec/RULES.md", err)
	}
	ids := ruleIDs(t)
	if len(ids) < 40 {
		t.Fatalf("found only %d rule ids in internal/core/rule/rule.go (%v); the parse below no longer finds them", len(ids), ids)
	}
	for _, id := range ids {
		if !bytes.Contains(rules, []byte("**"+id+"**")) {
			t.Errorf("rule %s is named in internal/core/rule/rule.go but docs/RULES.md does not define it as **%s**: refresh docs/ from ../shared/spec or drop the id", id, id)
		}
	}
}

// ruleIDs are the values of the rule.ID constants in internal/core/rule/rule.go.
func ruleIDs(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../internal/core/rule/rule.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if typ, ok := v.Type.(*ast.Ident); !ok || typ.Name != "ID" {
				continue
			}
			for _, e := range v.Values {
				lit, ok := e.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				id, err := strconv.Unquote(lit.Value)
				if err != nil || strings.TrimSpace(id) == "" {
					t.Fatalf("rule id constant %s is not a plain string", lit.Value)
				}
				ids = append(ids, id)
			}
		}
	}
	return ids
}
