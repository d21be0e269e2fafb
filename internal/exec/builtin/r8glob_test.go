package builtin

import (
	"strings"
	"testing"
)

// TestR8GlobCountsBraceExpansions: the expansions of a pattern's braces
// are counted as doublestar walks them: alternatives add, groups in a
// row multiply, nested ones count inside theirs; escaped braces and
// braces in a class are literal; a count past the bound saturates
// rather than overflowing (probe P7).
func TestR8GlobCountsBraceExpansions(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    int
	}{
		{"**/*.go", 1},
		{"src/*.{ts,tsx}", 2},
		{"{a,b}/{c,d,e}", 6},
		{"{a,{b,c}}", 3},
		{"{a,b{c,d}}x", 3},
		{`\{a,b\}`, 1},
		{"[{]a,b[}]", 1},
		{"{,.}", 2},
		{strings.Repeat("{a,b}", 10), 1024},
		{strings.Repeat("{a,b,c}", 18), MaxGlobAlternatives + 1},
		{strings.Repeat("{a,b,c,d,e,f,g,h}", 12), MaxGlobAlternatives + 1},
		{strings.Repeat("{", 50) + strings.Repeat("a,b}", 50), 51},
		{"{" + strings.Repeat("{a,b}", 11) + ",x}", MaxGlobAlternatives + 1},
	} {
		if got := braceAlternatives(tc.pattern); got != tc.want {
			t.Errorf("%q: %d expansions, want %d", tc.pattern, got, tc.want)
		}
	}
}
