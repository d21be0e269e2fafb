package allow

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
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
		{"an escaped star is a star: it prunes beside it", [][]string{{`Read(/srv/\*/**)`}}, "/etc", false},
		{"an escaped star is a star: its directory reaches", [][]string{{`Read(/srv/\*/**)`}}, "/srv/*/x", true},
		{"an escaped star matches no other name", [][]string{{`Read(/srv/\*/**)`}}, "/srv/a", false},
		{"an escaped class is its text", [][]string{{`Read(/w\[1\]/src/**)`}}, "/w[1]/src", true},
		{"an escaped class is not a class", [][]string{{`Read(/w\[1\]/src/**)`}}, "/w1", false},
		{"an escaped letter is the letter", [][]string{{`Read(/s\rv/a/*)`}}, "/srv/b", false},
		{"an escaped slash steps to the next name", [][]string{{`Read(/srv\/a/**)`}}, "/srv/a/x", true},
		{"an escaped slash: beside it", [][]string{{`Read(/srv\/a/**)`}}, "/srv/b", false},
		{"a working-directory pattern as the policy resolves it", [][]string{{"Read(/w/src/**)"}}, "/w/doc", false},
		{"a class with an escaped bracket", [][]string{{`Read(/s/[\]a]/**)`}}, "/s/]", true},
		{"a class with an escaped bracket: another name", [][]string{{`Read(/s/[\]a]/**)`}}, "/s/b", false},
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
	patterns := []string{"/s/**", "/s/*", "/s/*/c/**", "/s/{a,b}/*.go", "/s/a?/**", "/s/[ab]*/x", "/s/a/**/z", "/**/x", "/s/.h*/**", "/s/a/f.go",
		// Escaped, as a policy writes a name with glob characters, and
		// "./" ones as the policy resolves them against a working directory
		// whose name has some (/w[1]).
		`/s/\*/**`, `/s/\[ab\]/*`, `/s/a\/b/*`, `/s/\{a,b\}/**`, `/s/[\]a]/x`, `/w\[1\]/src/**`, `/w\[1\]/*.go`, `/s/\a\?/**`}
	paths := []string{"/s/a", "/s/a/f.go", "/s/b/x", "/s/ab/x", "/s/a/c/d", "/s/x/c/y/z", "/s/a/b/z", "/s/.hid/y", "/s/b/y.go", "/t/x", "/s/a1/q/r",
		"/s/*/x", "/s/[ab]/f", "/s/{a,b}/q/r", "/s/]/x", "/w[1]/src/a.go", "/w[1]/m.go", "/w1/src/a.go", "/s/a?/z"}
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
	if allowed < 25 {
		t.Errorf("only %d allowed pairs: the table no longer tests much", allowed)
	}
}

// FuzzR6MayAllowBelowNeverPrunesAnAllowedPath: whatever the pattern
// (escapes, classes, braces, malformed), no directory above a path it
// allows is pruned, and nothing panics.
func FuzzR6MayAllowBelowNeverPrunesAnAllowedPath(f *testing.F) {
	for _, s := range [][2]string{
		{"/s/**", "/s/a/b"}, {`/s/\*/**`, "/s/*/x"}, {`/w\[1\]/src/**`, "/w[1]/src/a"}, {`/s/a\/b/*`, "/s/a/b/c"},
		{"/s/[!a/]/x", "/s/b/x"}, {"/s/{a,b}/**/z", "/s/b/q/z"}, {`/s/[\]a]/x`, "/s/]/x"}, {"/s/[a", "/s/[a"}, {`/s/a\`, "/s/a"},
		{"/s/{a,b", "/s/a"}, {"/s/a*/*", "/s/ab/c"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, file string) {
		if !utf8.ValidString(file) || !strings.HasPrefix(file, "/") || strings.ContainsAny(pattern, "()") {
			return
		}
		file = path.Clean(file)
		if file == "/" {
			return // nothing is above it
		}
		l, _ := Compile(testCtx, []string{"Read(" + pattern + ")"}, testSubjects)
		e, err := Chain(l)
		if err != nil {
			return
		}
		if !e.Decide("Read", map[string]any{"file_path": file}, "/").Allowed {
			return
		}
		for d := path.Dir(file); ; d = path.Dir(d) {
			if !e.MayAllowBelow("Read", d) {
				t.Fatalf("pattern %q allows %s but MayAllowBelow(%s) is false", pattern, file, d)
			}
			if d == "/" {
				break
			}
		}
	})
}

// TestR6PatternMayMatchBelowBadInput: a malformed pattern (an unterminated
// brace or class, a trailing backslash) prunes nothing and does not panic.
func TestR6PatternMayMatchBelowBadInput(t *testing.T) {
	for _, tc := range []struct{ note, pattern, dir string }{
		{"an unterminated class", "/s/[ab/x", "/s/q"},
		{"an unterminated class at the end", "/s/[ab", "/s"},
		{"a trailing backslash", `/s/a\`, "/s/q"},
		{"a trailing backslash in the directory's place", `/s\`, "/t"},
		{"a class with a slash", "/s/[!a/]/x", "/s/b"},
		{"an empty class", "/s/[]/x", "/s/b"},
		{"a lone bracket", "/s/]/[", "/s/]"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if !patternMayMatchBelow(tc.pattern, segments(tc.dir)) {
				t.Errorf("patternMayMatchBelow(%q, %q) pruned", tc.pattern, tc.dir)
			}
		})
	}
	for _, p := range []string{"/s/{a,b", "/s/[ab", `/s/a\`, "/s/{a,[b}/x"} {
		l, _ := Compile(testCtx, []string{"Read(" + p + ")", "Read(/s/ok/**)"}, testSubjects)
		e, err := Chain(l)
		if err != nil {
			t.Fatalf("Chain with %q: %v", p, err)
		}
		if !e.MayAllowBelow("Read", "/s/ok") || e.MayAllowBelow("Read", "/t") {
			t.Errorf("with the malformed %q beside Read(/s/ok/**), MayAllowBelow is not that entry's", p)
		}
	}
}

// TestR6GlobMayMatchBelow: a walk looks ahead into a directory only where
// the glob may match below it; what it cannot read counts as matching.
func TestR6GlobMayMatchBelow(t *testing.T) {
	for _, tc := range []struct {
		note, pattern, dir string
		want               bool
	}{
		{"the root", "http/*.go", ".", true},
		{"the literal directory", "http/*.go", "http", true},
		{"below the last segment", "http/*.go", "http/sub", false},
		{"beside it", "http/*.go", "mail", false},
		{"anywhere", "**/*_test.go", "a/b/c", true},
		{"braces", "{a,b}/*/x", "b/q", true},
		{"braces, neither", "{a,b}/*/x", "c", false},
		{"an escape", `\*/x`, "*", true},
		{"an escape is no star", `\*/x`, "a", false},
		{"bad input: an unterminated brace", "{a,b/x", "c", true},
		{"bad input: an unterminated class", "[ab/x", "c", true},
		{"bad input: a trailing backslash", `a\`, "a", true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if got := GlobMayMatchBelow(tc.pattern, tc.dir); got != tc.want {
				t.Errorf("GlobMayMatchBelow(%q, %q) = %v, want %v", tc.pattern, tc.dir, got, tc.want)
			}
		})
	}
}

// TestP14TreeWithheld: a search the gateway does not run reaches every
// path below its directory, so the entries that withhold one of them are
// named: a deny or ask pattern that may match below it, and a narrowing
// level with no entry that admits the whole tree.
func TestP14TreeWithheld(t *testing.T) {
	for _, tc := range []struct {
		note  string
		decls []Decl
		dir   string
		want  []string
	}{
		{"name only: nothing withheld", []Decl{{Allow: []string{"Grep"}}}, "/srv", nil},
		{"no list at all", []Decl{{AllowNone: true}}, "/srv", nil},
		{"a deny entry below", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/secret/**)"}}}, "/srv", []string{"Grep(/srv/secret/**)"}},
		{"an ask entry below", []Decl{{Allow: []string{"Grep"}, Ask: []string{"Grep(/srv/a/b.txt)"}}}, "/srv", []string{"Grep(/srv/a/b.txt)"}},
		{"a deny entry beside", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/secret/**)"}}}, "/srv/src", nil},
		{"a deny entry above reaches below: the lattice decides dir itself", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/**)"}}}, "/srv/src", []string{"Grep(/srv/**)"}},
		{"a deny entry of another tool", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Read(/srv/secret/**)"}}}, "/srv", nil},
		{"a relative deny pattern may match anywhere", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(**/.env)"}}}, "/srv", []string{"Grep(**/.env)"}},
		{"braces: one alternative below", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/{etc,srv/k}/**)"}}}, "/srv", []string{"Grep(/{etc,srv/k}/**)"}},
		{"braces: none below", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/{etc,var}/**)"}}}, "/srv", nil},
		{"an allow tree holds dir", []Decl{{Allow: []string{"Grep(/srv/**)"}}}, "/srv/src", nil},
		{"an allow tree is dir", []Decl{{Allow: []string{"Grep(/srv/**)"}}}, "/srv", nil},
		{"an allow tree with a glob above dir", []Decl{{Allow: []string{"Grep(/home/*/src/**)"}}}, "/home/bob/src/x", nil},
		{"an allow entry one level deep", []Decl{{Allow: []string{"Grep(/srv/*)"}}}, "/srv", []string{"Grep(/srv/*)"}},
		{"an allow tree below dir", []Decl{{Allow: []string{"Grep(/srv/src/**)"}}}, "/srv", []string{"Grep(/srv/src/**)"}},
		{"a relative allow tree", []Decl{{Allow: []string{"Grep(**/src/**)"}}}, "/x/src/y", nil},
		{"every pattern", []Decl{{Allow: []string{"Grep(/**)"}}}, "/", nil},
		{"a narrower level along the chain", []Decl{{Allow: []string{"Grep"}}, {Allow: []string{"Grep(/srv/docs/**)"}}}, "/srv", []string{"Grep(/srv/docs/**)"}},
		{"a deny entry of the caller", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/k/**)"}}, {Allow: []string{"Grep(/srv/**)"}}}, "/srv", []string{"Grep(/srv/k/**)"}},
		{"bad input: the root", []Decl{{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/k)"}}}, "/", []string{"Grep(/srv/k)"}},
		{"bad input: a tool without a path subject", []Decl{{Allow: []string{"Bash"}, Deny: []string{"Bash(rm:*)"}}}, "/srv", nil},
	} {
		t.Run(tc.note, func(t *testing.T) {
			tool := "Grep"
			if strings.HasPrefix(tc.note, "bad input: a tool without") {
				tool = "Bash"
			}
			got, _, _ := chainDecl(t, tc.decls...).TreeWithheld(tool, tc.dir)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("TreeWithheld(%s, %s) = %q, want %q", tool, tc.dir, got, tc.want)
			}
		})
	}
}

// TestP14TreeWithheldSaysWhichRule: a deny entry denies, an ask entry
// alone asks, a narrower allow list is rule P4.
func TestP14TreeWithheldSaysWhichRule(t *testing.T) {
	for _, tc := range []struct {
		note string
		decl Decl
		want string
	}{
		{"a deny entry", Decl{Allow: []string{"Grep"}, Deny: []string{"Grep(/srv/k/**)"}}, "P14 deny"},
		{"an ask entry alone", Decl{Allow: []string{"Grep"}, Ask: []string{"Grep(/srv/k/**)"}}, "P14 ask"},
		{"an ask entry and a narrower list", Decl{Allow: []string{"Grep(/srv/a/**)"}, Ask: []string{"Grep(/srv/k/**)"}}, "P14 deny"},
		{"a narrower list", Decl{Allow: []string{"Grep(/srv/a/**)"}}, "P4 deny"},
		{"bad input: nothing withheld", Decl{Allow: []string{"Grep"}}, " deny"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, id, ask := chainDecl(t, tc.decl).TreeWithheld("Grep", "/srv")
			got := string(id) + map[bool]string{true: " ask", false: " deny"}[ask]
			if got != tc.want {
				t.Errorf("%s, want %s", got, tc.want)
			}
		})
	}
}
