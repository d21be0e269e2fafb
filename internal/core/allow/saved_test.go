package allow

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// plainSubjects are testSubjects without the tools that have their own
// rule, which needs CUE (ErrNeedsCUE).
var plainSubjects = func() map[string]Subject {
	m := maps.Clone(testSubjects)
	delete(m, "Browser")
	delete(m, "Fetch")
	m["WebFetch"] = Subject{Field: "url", Kind: Domain}
	return m
}()

func restoreEffective(t testing.TB, e *Effective) *Effective {
	t.Helper()
	s, err := e.Save()
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back SavedEffective
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	r, err := RestoreEffective(&back)
	if err != nil {
		t.Fatalf("RestoreEffective: %v", err)
	}
	return r
}

// sameDecisions compares every answer an effective list gives about a call.
func sameDecisions(t testing.TB, what string, e, r *Effective, tool string, in map[string]any, workdir string) {
	t.Helper()
	if d1, d2 := e.Decide(tool, in, workdir), r.Decide(tool, in, workdir); !reflect.DeepEqual(d1, d2) {
		t.Fatalf("%s: %s %v: compiled %+v, restored %+v", what, tool, in, d1, d2)
	}
	d1, a1 := e.Prefixes(tool)
	d2, a2 := r.Prefixes(tool)
	if !slices.Equal(d1, d2) || a1 != a2 || e.Listed(tool) != r.Listed(tool) ||
		!slices.Equal(e.Entries(tool), r.Entries(tool)) || !slices.Equal(e.Tools(), r.Tools()) || e.Unlimited() != r.Unlimited() {
		t.Fatalf("%s: %s: the restored list describes the tool differently", what, tool)
	}
}

var savedPatterns = []string{"git:*", "git log:*", "ls", "/a/**", "/a/b/*", "**/*.go", "/a/{b,c}/**", "[", "./src/**", "x:*", "domain:example.com", "domain:*.example.com", ""}

// FuzzP10RestoredEffectiveDecides: an effective list saved and restored
// decides, explains and bounds every call as the compiled one does (the
// hook's cache), for any two lists of any patterns and any subject.
func FuzzP10RestoredEffectiveDecides(f *testing.F) {
	for i, p := range savedPatterns {
		f.Add(p, savedPatterns[(i+3)%len(savedPatterns)], "git log -1", "/a/b/c.go")
	}
	f.Fuzz(func(t *testing.T, p1, p2, cmd, path string) {
		entries := func(p, q string) []string {
			return []string{"Bash(" + p + ")", "Read(" + p + ")", "Write", "Write(" + q + ")", "Grep", "WebFetch(" + p + ")", "Echo"}
		}
		l1, _ := Compile(testCtx, entries(p1, p2), plainSubjects)
		l2, _ := Compile(testCtx, append(entries(p2, p1), "Bash"), plainSubjects)
		for _, ls := range [][]*List{{}, {l1}, {l2}, {l1, l2}, {l2, l1, l2}} {
			e, err := Chain(ls...)
			if err != nil {
				return
			}
			if _, err := e.Save(); err != nil {
				continue // some constraint has no matcher, or an entry is not UTF-8: the cache does not keep it
			}
			r := restoreEffective(t, e)
			for _, tool := range []string{"Bash", "Read", "Write", "Grep", "WebFetch", "Echo", "Nope"} {
				for _, v := range []any{cmd, path, "https://" + cmd + "/x", nil, 3} {
					for _, field := range []string{"command", "file_path", "path", "url"} {
						sameDecisions(t, strings.Join([]string{p1, p2}, " / "), e, r, tool, map[string]any{field: v}, "/a")
					}
				}
			}
		}
	})
}

// TestP10SaveEffectiveNeedsCUE: a list whose tool has its own rule is not saved.
func TestP10SaveEffectiveNeedsCUE(t *testing.T) {
	e := chain(t, []string{"Browser(click:)", "Read"})
	if _, err := e.Save(); !errors.Is(err, ErrNeedsCUE) {
		t.Fatalf("Save = %v, want ErrNeedsCUE", err)
	}
}

// TestP10RestoreEffectiveBadInput: what is not a saved list is an error.
func TestP10RestoreEffectiveBadInput(t *testing.T) {
	for _, tc := range []struct{ note, data, want string }{
		{"no list at all", `{}`, "has no list"},
		{"an unknown kind of subject", `{"Subjects":{"Read":{"Kind":"glob"}},"Lists":[{"Allow":["Read(/a/**)"]}]}`, "unknown kind"},
		{"lists with no tool in common", `{"Subjects":{"Read":{"Field":"file_path","Kind":"path"},"Write":{}},"Lists":[{"Allow":["Read"]},{"Allow":["Write"]}]}`, "no tool in common"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			var s SavedEffective
			if err := json.Unmarshal([]byte(tc.data), &s); err != nil {
				t.Fatal(err)
			}
			if e, err := RestoreEffective(&s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RestoreEffective = %v, %v; want an error saying %q", e, err, tc.want)
			}
		})
	}
}
