package builtin

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"aimon.dev/gw/tools"
)

// TestR6SearchesPruneWhatNoAllowEntryReaches: under a narrow allow
// (Read(/srv/a/**) style) Grep and Glob do not read a directory outside
// it: no file below it ever reaches the scope's Allows (the tripwire), and
// the note counts the directory. Without Reaches nothing is pruned.
func TestR6SearchesPruneWhatNoAllowEntryReaches(t *testing.T) {
	env := session(t)
	w := env.Workdir
	write(t, w, "a/in.txt", "needle a\n")
	write(t, w, "a/deep/in.txt", "needle deep\n")
	write(t, w, "b/out.txt", "needle b\n")
	write(t, w, "b/c/out.txt", "needle c\n")
	write(t, w, "top.txt", "needle top\n")
	a := filepath.Join(w, "a")
	inA := func(dir string) bool {
		return dir == a || strings.HasPrefix(dir, a+"/") || strings.HasPrefix(a, dir+"/")
	}
	for _, tt := range []struct {
		note    string
		reaches func(string) bool
		says    []string
		visitsB bool
	}{
		{"a narrow allow prunes the directory outside it", inA, []string{"a/in.txt", "a/deep/in.txt", "1 file and 1 directory below"}, false},
		{"bad input: a reach that knows no bound prunes nothing", func(string) bool { return true }, []string{"a/in.txt", "3 files below"}, true},
		{"no reach known prunes nothing", nil, []string{"a/in.txt", "3 files below"}, true},
	} {
		for _, c := range []struct{ tool, in string }{
			{"Grep", `{"pattern":"needle","output_mode":"content"}`},
			{"Glob", `{"pattern":"**"}`},
		} {
			t.Run(c.tool+"/"+tt.note, func(t *testing.T) {
				var mu sync.Mutex
				var asked []string
				env.Scope = &tools.Scope{Anchor: w, Reaches: tt.reaches, Allows: func(p string) bool {
					mu.Lock()
					asked = append(asked, p)
					mu.Unlock()
					return strings.HasPrefix(p, a+"/")
				}}
				r := call(t, env, c.tool, c.in)
				wantResult(t, r, false, tt.says...)
				if strings.Contains(r.Text, "needle b") || strings.Contains(r.Text, "b/out.txt") || strings.Contains(r.Text, "top.txt") {
					t.Errorf("%s showed a file the scope withholds:\n%s", c.tool, r.Text)
				}
				visited := false
				for _, p := range asked {
					visited = visited || strings.HasPrefix(p, filepath.Join(w, "b")+"/")
				}
				if visited != tt.visitsB {
					t.Errorf("files below b reached Allows: %v, want %v (asked %v)", visited, tt.visitsB, asked)
				}
			})
		}
	}
}
