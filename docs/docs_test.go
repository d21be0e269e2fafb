package docs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"aimon.dev/gw/internal/core/rule"
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
	ids := rule.Rules()
	for _, id := range ids {
		if !bytes.Contains(rules, []byte("**"+id+"**")) {
			t.Errorf("rule %s is named in internal/core/rule/rule.go but docs/RULES.md does not define it as **%s**: refresh docs/ from ../shared/spec or drop the id", id, id)
		}
	}
	for _, m := range defined.FindAllSubmatch(rules, -1) {
		if id := rule.ID(m[1]); !id.IsRule() {
			t.Errorf("docs/RULES.md defines **%s** but internal/core/rule/rule.go does not list it: add the constant and list it in rules", id)
		}
	}
}

// defined matches a rule's definition in RULES.md, such as **P6**.
var defined = regexp.MustCompile(`\*\*([CSPKR][0-9]+)\*\*`)
