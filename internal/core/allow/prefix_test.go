package allow

import (
	"strings"
	"testing"
)

// TestR6Prefixes: the directories a chain's path patterns allow anything
// under, from which a sandbox's writable set derives.
func TestR6Prefixes(t *testing.T) {
	tests := []struct {
		note  string
		lists [][]string
		want  string // joined dirs, or "all"
	}{
		{"one pattern", [][]string{{"Write(/srv/repo/**)"}}, "/srv/repo"},
		{"a glob segment stops the prefix", [][]string{{"Write(/srv/*/docs/**)"}}, "/srv"},
		{"a file pattern is itself", [][]string{{"Write(/srv/repo/main.go)"}}, "/srv/repo/main.go"},
		{"name only is everything", [][]string{{"Write"}}, "all"},
		{"name only beside a pattern is the pattern (P6)", [][]string{{"Write", "Write(/a/**)"}}, "/a"},
		{"a child narrows", [][]string{{"Write(/srv/repo/**)"}, {"Write(/srv/repo/docs/**)"}}, "/srv/repo/docs"},
		{"a child cannot widen", [][]string{{"Write(/srv/repo/docs/**)"}, {"Write(/srv/**)"}}, "/srv/repo/docs"},
		{"a name-only child keeps the caller's", [][]string{{"Write(/srv/repo/**)"}, {"Write"}}, "/srv/repo"},
		{"disjoint levels leave nothing", [][]string{{"Write(/a/**)", "Read"}, {"Write(/b/**)", "Read"}}, ""},
		{"several, the covered dropped", [][]string{{"Write(/a/**)", "Write(/a/b/**)", "Write(/c/*.txt)"}}, "/a,/c"},
		{"a root glob is the root", [][]string{{"Write(/**)"}}, "/"},
		{"no entry is nothing", [][]string{{"Read"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			dirs, all := chain(t, tc.lists...).Prefixes("Write")
			got := strings.Join(dirs, ",")
			if all {
				got = "all"
			}
			if got != tc.want {
				t.Errorf("Prefixes = %q, want %q", got, tc.want)
			}
		})
	}
	if _, all := (&Effective{}).Prefixes("Write"); !all {
		t.Error("an unlimited chain must leave Write unlimited (P11)")
	}
}

func FuzzLiteralDir(f *testing.F) {
	for _, s := range []string{"/a/b/**", "/**", "/a/*.go", "/a/b", "/a/{b,c}/d", "/a/[x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if !strings.HasPrefix(p, "/") {
			return
		}
		d := LiteralDir(p)
		// Everything the pattern can match lies below its literal directory.
		if !strings.HasPrefix(d, "/") || strings.ContainsAny(d, "*?[{\\") {
			t.Errorf("LiteralDir(%q) = %q", p, d)
		}
	})
}
