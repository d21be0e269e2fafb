package cchook

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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

// TestR6CdPrefixHoldsToTheJudgedDirectory: the shell text the hook hands
// Claude Code moves the shell into the judged directory and runs what
// follows there; when a link has been swapped in for it since, it runs
// nothing and leaves the shell where it was.
func TestR6CdPrefixHoldsToTheJudgedDirectory(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	dir, outside := filepath.Join(root, "proj", "sub"), filepath.Join(root, "outside")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(outside, 0o755)
	run := func() (string, error) {
		cmd := exec.Command("sh", "-c", cdPrefix(dir, root)+" && touch ran; pwd -P")
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run(); err != nil || out != dir {
		t.Fatalf("into the judged directory: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("what follows did not run there: %v", err)
	}
	os.RemoveAll(dir)
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(); out != root {
		t.Errorf("through a swapped-in link the shell ends in %q, want %q", out, root)
	}
	if _, err := os.Stat(filepath.Join(outside, "ran")); err == nil {
		t.Error("what follows ran where the swapped-in link leads")
	}
}
