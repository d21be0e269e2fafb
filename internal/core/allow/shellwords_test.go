package allow

import "testing"

// TestP14ShellWords: a command's words as the shell passes them, and
// whether a command pattern may admit them.
func TestP14ShellWords(t *testing.T) {
	for _, tc := range []struct {
		note, command, pattern string
		may                    bool
	}{
		{"single quotes are removed", "git 'push' x", "git push:*", true},
		{"double quotes keep their backslash escapes", `git "pu\sh"`, `git pu\sh:*`, true},
		{"a backslash quotes the next byte", `git p\ush`, "git push:*", true},
		{"quotes glue words", `gi"t" ''push`, "git push", true},
		{"a quoted space makes one word", "git 'push x'", "git push:*", false},
		{"a glob may be any words", "git pus?", "git push:*", true},
		{"a brace may be no word", "git reset --hard {,}", "git reset --hard", true},
		{"an open quote cannot be told", "git 'push", "git push:*", true},
		{"a trailing backslash cannot be told", `git push\`, "git push", true},
		{"another word first", "git 'status'", "git push:*", false},
		{"too few words", "'git'", "git push:*", false},
		{"an exact pattern and one word more", "git reset --hard 'HEAD'", "git reset --hard", false},
		{"a wild word after the pattern's words differ", "ls *.go", "git push:*", false},
	} {
		t.Run(tc.note, func(t *testing.T) {
			words := shellWords(tc.command)
			if words == nil {
				t.Fatalf("shellWords(%q) = nil, want its words", tc.command)
			}
			if got := mayRun(words, cmdPatternOf(tc.pattern)); got != tc.may {
				t.Errorf("mayRun(%q, %q) = %v, want %v (words %+v)", tc.command, tc.pattern, got, tc.may, words)
			}
		})
	}
	if w := shellWords("git push origin"); w != nil {
		t.Errorf("shellWords of a command without quotes or expansions = %+v, want nil: its fields are its words", w)
	}
}
