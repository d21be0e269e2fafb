package allow

import (
	"path"
	"testing"
)

// TestR6MayAllowBelow: a directory is pruned for a search only when no
// allow entry of some narrowing level can match a path below it.
func TestR6MayAllowBelow(t *testing.T) {
	tests := []struct {
		note  string
		lists [][]string
		dir   string
		want  bool
	}{
		{"inside a tree", [][]string{{"Read(/srv/a/**)"}}, "/srv/a/x", true},
		{"above a tree", [][]string{{"Read(/srv/a/**)"}}, "/srv", true},
		{"beside a tree", [][]string{{"Read(/srv/a/**)"}}, "/srv/b", false},
		{"a name sharing a prefix", [][]string{{"Read(/srv/a/**)"}}, "/srv/ab", false},
		{"one segment: its directory reaches", [][]string{{"Read(/srv/a/*)"}}, "/srv/a", true},
		{"one segment: nothing deeper", [][]string{{"Read(/srv/a/*)"}}, "/srv/a/sub", false},
		{"a glob segment in between", [][]string{{"Read(/srv/*/src/**)"}}, "/srv/x/src/y", true},
		{"a glob segment that does not match", [][]string{{"Read(/srv/*/src/**)"}}, "/srv/x/doc", false},
		{"braces", [][]string{{"Read(/srv/{a,b}/**)"}}, "/srv/b/x", true},
		{"braces, neither", [][]string{{"Read(/srv/{a,b}/**)"}}, "/srv/c", false},
		{"a file pattern: its directory", [][]string{{"Read(/srv/a/f.go)"}}, "/srv/a", true},
		{"a file pattern: not the file", [][]string{{"Read(/srv/a/f.go)"}}, "/srv/a/f.go", false},
		{"a ** in a segment", [][]string{{"Read(/srv/a**/x)"}}, "/srv/b/c/d", true},
		{"every level must reach", [][]string{{"Read(/srv/**)"}, {"Read(/srv/a/**)"}}, "/srv/b", false},
		{"a name-only level does not narrow", [][]string{{"Read(/srv/a/**)"}, {"Read"}}, "/srv/a/x", true},
		{"name only", [][]string{{"Read"}}, "/etc", true},
		{"bad input: a pattern with no literal prefix prunes nothing", [][]string{{"Read(**/*.go)"}}, "/etc/x", true},
		{"bad input: an escape prunes nothing", [][]string{{`Read(/srv/\*/**)`}}, "/etc", true},
		{"the root", [][]string{{"Read(/srv/a/**)"}}, "/", true},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			if got := chain(t, tc.lists...).MayAllowBelow("Read", tc.dir); got != tc.want {
				t.Errorf("MayAllowBelow(%q) = %v, want %v", tc.dir, got, tc.want)
			}
		})
	}
	denied := chainDecl(t, Decl{Allow: []string{"Read(/srv/**)"}, Deny: []string{"Read(/srv/a/**)"}})
	if !denied.MayAllowBelow("Read", "/srv/a") {
		t.Error("a deny entry pruned what an allow entry reaches")
	}
	if !(&Effective{}).MayAllowBelow("Read", "/etc") {
		t.Error("an unlimited chain must prune nothing (P11)")
	}
}

// TestR6MayAllowBelowNeverPrunesAnAllowedPath: for every path a pattern
// allows, every directory above it may allow below (the differential
// against the decision itself).
func TestR6MayAllowBelowNeverPrunesAnAllowedPath(t *testing.T) {
	patterns := []string{"/s/**", "/s/*", "/s/*/c/**", "/s/{a,b}/*.go", "/s/a?/**", "/s/[ab]*/x", "/s/a/**/z", "/**/x", "/s/.h*/**", "/s/a/f.go"}
	paths := []string{"/s/a", "/s/a/f.go", "/s/b/x", "/s/ab/x", "/s/a/c/d", "/s/x/c/y/z", "/s/a/b/z", "/s/.hid/y", "/s/b/y.go", "/t/x", "/s/a1/q/r"}
	allowed := 0
	for _, p := range patterns {
		e := chain(t, []string{"Read(" + p + ")"})
		for _, f := range paths {
			if !e.Decide("Read", map[string]any{"file_path": f}, "/").Allowed {
				continue
			}
			allowed++
			for d := path.Dir(f); ; d = path.Dir(d) {
				if !e.MayAllowBelow("Read", d) {
					t.Errorf("pattern %s allows %s but MayAllowBelow(%s) is false", p, f, d)
				}
				if d == "/" {
					break
				}
			}
		}
	}
	if allowed < 15 {
		t.Errorf("only %d allowed pairs: the table no longer tests much", allowed)
	}
}
