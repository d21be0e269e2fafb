package cchook

import "testing"

// TestR6LeadingCdIsReadAsTheShellReadsIt: a leading cd is split off only
// when its directory is one plain or single-quoted word and it stands
// alone or before &&; every other command (an expansion, options, ; or ||,
// a cd with nothing after &&) is left whole, to be decided as written.
func TestR6LeadingCdIsReadAsTheShellReadsIt(t *testing.T) {
	for _, c := range []struct{ cmd, dir, rest string }{
		{"cd sub", "sub", ""},
		{"  cd\tsub  ", "sub", ""},
		{"cd sub && pwd > marker", "sub", "pwd > marker"},
		{"cd 'a b' && ls", "a b", "ls"},
		{"cd ~/x && ls", "~/x", "ls"},
		{"cd /srv&&ls", "", ""}, // & inside the word
		{"cd", "", ""},
		{"cd -", "", ""},
		{"cd -P sub", "", ""},
		{"cd $HOME", "", ""},
		{"cd `pwd`", "", ""},
		{"cd a b", "", ""},
		{"cd a; rm x", "", ""},
		{"cd a || rm x", "", ""},
		{"cd a && ", "", ""},
		{"cd 'a", "", ""},
		{"cdx a", "", ""},
		{"ls && cd a", "", ""},
	} {
		dir, rest, ok := leadingCd(c.cmd)
		if ok != (c.dir != "") || dir != c.dir || rest != c.rest {
			t.Errorf("leadingCd(%q) = %q, %q, %v; want %q, %q", c.cmd, dir, rest, ok, c.dir, c.rest)
		}
	}
}
