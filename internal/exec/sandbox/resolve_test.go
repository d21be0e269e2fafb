package sandbox

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestR8ResolverLeadsWhereEvalSymlinksDoes: one batch's resolver, which
// remembers the directories it went through, resolves every path where
// filepath.EvalSymlinks does, through links to directories and files,
// absolute and relative, a link among the directories it has already
// resolved, a dangling link, a loop, a file in a directory's place, a
// missing path and a .. after a link; and a batch made after a link is
// swapped follows it where it leads then.
func TestR8ResolverLeadsWhereEvalSymlinksDoes(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	for _, d := range []string{"real/sub", "other/sub"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"real/sub/f", "real/file", "other/sub/f"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{
		"abs":           filepath.Join(root, "real"),
		"rel":           "real/sub",
		"real/sub/up":   "../file",
		"real/sub/lf":   "f",
		"dangling":      "nowhere",
		"loop":          "loop2",
		"loop2":         "loop",
		"real/sub/back": filepath.Join(root, "abs", "sub"),
	} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{"real", "real/sub/f", "abs", "abs/sub/f", "abs/sub/lf", "rel/f", "rel/up", "real/sub/back/f",
		"abs/sub/back/back/lf", "dangling", "loop", "loop/x", "real/file/x", "real/missing", "missing/x", "abs/sub/../file", "rel/../other"}
	check := func(r resolver) {
		t.Helper()
		for _, p := range append(paths, paths...) { // the second time from what r remembers
			p = root + "/" + p // as written: a .. stays
			want, err := filepath.EvalSymlinks(p)
			if err != nil {
				want = ""
			}
			if got := r.resolve(p); got != want {
				t.Errorf("%s resolves to %q, want %q as EvalSymlinks", p, got, want)
			}
		}
	}
	check(resolver{})
	if err := os.Remove(filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "other"), filepath.Join(root, "abs")); err != nil {
		t.Fatal(err)
	}
	check(resolver{})
}

// TestR9ProtectingAgainAddsNothing: a resident gateway protects the same
// runtime files for every hook call: doing so again leaves the protected
// set and the directories to create as they were, each write there still
// refused with what the first call said it is.
func TestR9ProtectingAgainAddsNothing(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	// The set only grows, and Protected makes its directories: the later
	// tests' sandboxes would make this one again after the test is gone.
	t.Cleanup(func() {
		protected.mu.Lock()
		protected.dirs = slices.DeleteFunc(protected.dirs, func(d string) bool { return within(d, root) })
		protected.mu.Unlock()
	})
	settings := filepath.Join(root, ".claude", "settings.json")
	gates := []Named{{"Claude Code's settings", settings}, {"Claude Code's hooks", filepath.Join(root, ".claude", "hooks")}, {"another name", settings}}
	ProtectGates(gates)
	ProtectDir("the project's .claude", filepath.Join(root, ".claude"))
	protected.mu.RLock()
	paths, dirs := len(protected.paths), len(protected.dirs)
	protected.mu.RUnlock()
	for range 3 {
		ProtectGates(gates)
		ProtectDir("the project's .claude", filepath.Join(root, ".claude"))
	}
	protected.mu.RLock()
	if len(protected.paths) != paths || len(protected.dirs) != dirs {
		t.Errorf("protecting again grew the set from %d paths and %d directories to %d and %d", paths, dirs, len(protected.paths), len(protected.dirs))
	}
	protected.mu.RUnlock()
	if g := Guarding(settings); !g.Gate || g.What != "Claude Code's settings" || g.Refusal() == "" {
		t.Errorf("a write of the settings: %+v, want refused as Claude Code's settings (rule R9)", g)
	}
}

// TestR9GateDirsAreMadeWhereACommandCouldMakeThem: an absent gate
// directory is made, with its mode, where the sandbox's commands may write
// its nearest existing ancestor (parents and all), and not where they may
// not, nor inside a protected path (read-only in the sandbox anyway).
func TestR9GateDirsAreMadeWhereACommandCouldMakeThem(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	t.Cleanup(func() {
		protected.mu.Lock()
		maps.DeleteFunc(protected.gateMade, func(d string, _ gateMade) bool { return within(d, root) })
		protected.mu.Unlock()
	})
	for _, d := range []string{"w", "ro", "w/prot"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	Protect("a policy", filepath.Join(root, "w/prot"))
	made, deep, ro, inProt := root+"/w/.codex", root+"/w/a/b/.gemini", root+"/ro/.codex", root+"/w/prot/.claude"
	for _, d := range []string{made, deep, ro, inProt} {
		ProtectGateDir("a runtime's settings", d, 0o750)
	}
	if err := makeGateDirs(func(d string) bool { return within(d, root+"/w") }); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{made: true, deep: true, ro: false, inProt: false} {
		fi, err := os.Stat(d)
		if got := err == nil && fi.IsDir(); got != want || got && fi.Mode().Perm()&^0o750 != 0 {
			t.Errorf("%s: made %v (%v), want %v with mode 0750", d, got, fi, want)
		}
	}
	if g := Guarding(ro + "/config.toml"); !g.Gate {
		t.Errorf("a write in the gate directory not made: %+v, want refused (rule R9)", g)
	}
}
