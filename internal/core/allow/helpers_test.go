package allow

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"cuelang.org/go/cue/cuecontext"
)

var testCtx = cuecontext.New()

// testSubjects is the built-in tools as the schema declares them, plus a
// tool without subject and one with its own rule.
var testSubjects = map[string]Subject{
	"Read":    {Field: "file_path", Kind: Path},
	"Write":   {Field: "file_path", Kind: Path},
	"Edit":    {Field: "file_path", Kind: Path},
	"Grep":    {Field: "path", Kind: Path},
	"Glob":    {Field: "path", Kind: Path},
	"Bash":    {Field: "command", Kind: Command},
	"Echo":    {},
	"Browser": {Rule: actionURL{}},
	"Fetch":   {Field: "path", Kind: Path, Rule: actionURL{}},
}

// compile compiles a list and fails the test on entry errors.
func compile(t testing.TB, entries ...string) *List {
	t.Helper()
	l, errs := Compile(testCtx, entries, testSubjects)
	if len(errs) > 0 {
		t.Fatalf("Compile(%q): %v", entries, errs)
	}
	return l
}

// chain compiles each list (outermost first) and unifies them.
func chain(t testing.TB, lists ...[]string) *Effective {
	t.Helper()
	var ls []*List
	for _, es := range lists {
		ls = append(ls, compile(t, es...))
	}
	e, err := Chain(ls...)
	if err != nil {
		t.Fatalf("Chain: %v", err)
	}
	return e
}

// actionURL is a browser-like rule: pattern "action:url-prefix".
type actionURL struct{}

func (actionURL) Allow(pattern string, in map[string]any, _ string) (bool, error) {
	action, prefix, ok := strings.Cut(pattern, ":")
	if !ok {
		return false, fmt.Errorf("the pattern %q is not action:url", pattern)
	}
	if action == "panic" {
		panic("rule exploded")
	}
	a, _ := in["action"].(string)
	u, _ := in["url"].(string)
	return a == action && strings.HasPrefix(u, prefix), nil
}

// listsOf compiles each list (outermost first), whatever their errors.
func listsOf(subjects map[string]Subject, lists ...[]string) []*List {
	ls := make([]*List, len(lists))
	for i, es := range lists {
		ls[i], _ = Compile(testCtx, es, subjects)
	}
	return ls
}

// declsOf compiles each declaration (outermost first), whatever their errors.
func declsOf(subjects map[string]Subject, decls ...Decl) []*List {
	ls := make([]*List, len(decls))
	for i, d := range decls {
		ls[i], _ = CompileDecl(testCtx, d, subjects)
	}
	return ls
}

// plainSubjects are testSubjects without the tools that have their own
// rule: every decision comes from a subject.
var plainSubjects = func() map[string]Subject {
	m := maps.Clone(testSubjects)
	delete(m, "Browser")
	delete(m, "Fetch")
	m["WebFetch"] = Subject{Field: "url", Kind: Domain}
	return m
}()
