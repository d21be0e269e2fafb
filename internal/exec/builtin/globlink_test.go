package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

// TestP14GlobJudgesWhereAListedLinkLeads: a pattern that names a link to
// a directory (l/*) lists the directory it leads to. Its files are judged
// where they are, as Grep's opens are: a link an allowed command made
// beside a withheld directory (ln -s ../secret l) showed the names of the
// files in it, judged by the link's name only.
func TestP14GlobJudgesWhereAListedLinkLeads(t *testing.T) {
	env := session(t)
	w := env.Workdir
	write(t, w, "secret/key.txt", "k\n")
	write(t, w, "other/ok.txt", "o\n")
	write(t, w, "pub/in.txt", "p\n")
	for link, to := range map[string]string{"l": "../secret", "ok": "../other", "abs": filepath.Join(w, "secret"), "deep": "../pub/l"} {
		if err := os.Symlink(to, filepath.Join(w, "pub", link)); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(w, "secret")
	withholding := &tools.Scope{Anchor: w, Allows: func(p string) bool { return p != secret && !strings.HasPrefix(p, secret+"/") }}
	pub := filepath.Join(w, "pub")
	for _, tc := range []struct {
		note, pattern string
		scope         *tools.Scope
		shown, hidden []string
	}{
		{note: "a relative link into the withheld directory", pattern: "l/*", scope: withholding, hidden: []string{"key.txt"}},
		{note: "a link to a link into it", pattern: "deep/*", scope: withholding, hidden: []string{"key.txt"}},
		{note: "an absolute link into it", pattern: "abs/*", scope: withholding, hidden: []string{"key.txt"}},
		{note: "a link into an allowed directory still lists it", pattern: "ok/*", scope: withholding, shown: []string{pub + "/ok/ok.txt"}},
		{note: "files reached through no link", pattern: "*", scope: withholding, shown: []string{pub + "/in.txt"}},
		{note: "bad input: a scope that withholds nothing lists through the link", pattern: "l/*", scope: &tools.Scope{Anchor: w}, shown: []string{pub + "/l/key.txt"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			env.Scope = tc.scope
			r := call(t, env, "Glob", `{"pattern":"`+tc.pattern+`","path":"`+pub+`"}`)
			wantResult(t, r, false, tc.shown...)
			for _, h := range tc.hidden {
				if strings.Contains(r.Text, h) {
					t.Errorf("Glob %s showed %s, which the scope withholds where it is:\n%s", tc.pattern, h, r.Text)
				}
			}
		})
	}
}
