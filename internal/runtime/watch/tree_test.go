package watch

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/policydir"
)

// idle returns a watcher that is not run, so that a test can feed it events.
func idle(t testing.TB, dir string) *Watcher {
	t.Helper()
	w, err := New(dir, func(*policy.Generation) error { return nil }, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// Which events may change the policy, and what they do to the watches.
func TestR3EventsThatReload(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Echo")})
	parent := filepath.Dir(dir)
	w := idle(t, dir)
	must(t, os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, ".git", "objects"), 0o755))
	must(t, os.MkdirAll(filepath.Join(parent, "sibling"), 0o755))
	must(t, os.Symlink("policy.cue", filepath.Join(dir, "..data")))
	must(t, os.Symlink("user@host.1234", filepath.Join(dir, ".#policy.cue")))

	cases := []struct {
		name   string
		path   string
		op     fsnotify.Op
		reload bool
	}{
		{"policy file written", "policy.cue", fsnotify.Write, true},
		{"policy file renamed into place", "policy.cue", fsnotify.Create, true},
		{"policy file removed", "policy.cue", fsnotify.Remove, true},
		{"policy file made unreadable", "policy.cue", fsnotify.Chmod, true},
		{"module file written", "cue.mod/module.cue", fsnotify.Write, true},
		{"anything in cue.mod", "cue.mod/gen/x/y.json", fsnotify.Write, true},
		{"another file written", "README.md", fsnotify.Write, false},
		{"temporary file before a rename", ".policy.cue.tmp123", fsnotify.Create, false},
		{"vim swap file", ".policy.cue.swp", fsnotify.Write, false},
		{"vim backup", "policy.cue~", fsnotify.Create, false},
		{"vim probe", "4913", fsnotify.Create, false},
		{"emacs lock", ".#policy.cue", fsnotify.Create, false},
		{"emacs autosave", "#policy.cue#", fsnotify.Write, false},
		{"jetbrains temporary", "policy.cue___jb_tmp___", fsnotify.Create, false},
		{"symlink swapped in", "..data", fsnotify.Create, true},
		{"new subdirectory", "sub", fsnotify.Create, true},
		{"new hidden directory", ".git", fsnotify.Create, false},
		{"subdirectory removed", "sub", fsnotify.Remove, true},
		{"unknown name removed", "notes.txt", fsnotify.Remove, false},
		{"sibling of the directory", "../sibling", fsnotify.Create, false},
		{".cue file outside the module", "../stray.cue", fsnotify.Write, false},
		{"the directory itself removed", ".", fsnotify.Remove, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Join(dir, filepath.FromSlash(c.path))
			if got := w.handle(fsnotify.Event{Name: name, Op: c.op}); got != c.reload {
				t.Errorf("handle(%s %s) = %v; want %v", c.op, c.path, got, c.reload)
			}
			switch c.name {
			case "new subdirectory":
				if !w.tree[filepath.Join(dir, "sub", "deeper")] {
					t.Errorf("the new subdirectory's own subdirectory is not watched: %v", w.tree)
				}
			case "new hidden directory":
				if w.tree[filepath.Join(dir, ".git")] || w.tree[filepath.Join(dir, ".git", "objects")] {
					t.Errorf("a hidden directory is watched: %v", w.tree)
				}
			case "subdirectory removed":
				if w.tree[filepath.Join(dir, "sub")] || w.tree[filepath.Join(dir, "sub", "deeper")] {
					t.Errorf("a removed subdirectory is still watched: %v", w.tree)
				}
			case "the directory itself removed":
				// dir is still there, so the watches come straight back.
				if !w.present || !w.tree[dir] || !w.flat[parent] {
					t.Errorf("after a stale removal: present %v, tree %v, flat %v", w.present, w.tree, w.flat)
				}
			}
		})
	}

	must(t, os.RemoveAll(dir))
	if !w.handle(fsnotify.Event{Name: dir, Op: fsnotify.Remove}) || w.present || len(w.tree) != 0 || !w.missing() {
		t.Errorf("after the directory is removed: present %v, tree %v", w.present, w.tree)
	}
	if w.ensure() {
		t.Errorf("ensure found a directory that is gone")
	}
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	if !w.handle(fsnotify.Event{Name: dir, Op: fsnotify.Create}) || !w.present || !w.tree[filepath.Join(dir, "sub")] || w.missing() {
		t.Errorf("after the directory is back: present %v, tree %v", w.present, w.tree)
	}
}

// With the module root above the directory, the ancestors up to it and the
// module's cue.mod are watched, and the package's files in them count.
func TestR3WatchesUpToModuleRoot(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cue.mod", "module.cue"), policydir.Module)
	dir := filepath.Join(root, "a", "b")
	write(t, filepath.Join(dir, "policy.cue"), source("Echo"))
	w := idle(t, dir)

	for _, a := range []string{filepath.Join(root, "a"), root} {
		if !w.flat[a] {
			t.Errorf("ancestor %s is not watched: %v", a, w.flat)
		}
	}
	if w.flat[filepath.Dir(root)] {
		t.Errorf("a directory above the module root is watched")
	}
	if !w.tree[filepath.Join(root, "cue.mod")] {
		t.Errorf("the module's cue.mod is not watched: %v", w.tree)
	}
	cases := []struct {
		path   string
		op     fsnotify.Op
		reload bool
	}{
		{"a/shared.cue", fsnotify.Write, true},
		{"shared.cue", fsnotify.Create, true},
		{"cue.mod/module.cue", fsnotify.Write, true},
		{"go.mod", fsnotify.Write, false},
		{"a/other", fsnotify.Create, false},
	}
	for _, c := range cases {
		if got := w.handle(fsnotify.Event{Name: filepath.Join(root, c.path), Op: c.op}); got != c.reload {
			t.Errorf("handle(%s %s) = %v; want %v", c.op, c.path, got, c.reload)
		}
	}
	// An ancestor renamed away takes everything under it along.
	if !w.handle(fsnotify.Event{Name: filepath.Join(root, "a"), Op: fsnotify.Rename}) {
		t.Errorf("an ancestor's rename does not reload")
	}
}

func TestEditorTemp(t *testing.T) {
	for name, want := range map[string]bool{
		"policy.cue": false, "4913": true, "policy.cue~": true, ".policy.cue.swp": true,
		".policy.cue.swo": true, ".policy.cue.swx": true, "policy.swp": false, ".#policy.cue": true,
		"#policy.cue#": true, "#": false, "#x": false, "x.cue___jb_old___": true, "..data": false,
	} {
		if got := editorTemp(name); got != want {
			t.Errorf("editorTemp(%q) = %v; want %v", name, got, want)
		}
	}
}

// No event, whatever its name, makes the watcher panic, and an editor's
// file never reloads unless it is the directory or above it.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{"policy.cue", "..", "../..", "sub/x.cue", ".#a.cue", "cue.mod", "/", "a\x00b", "../policy.cue~"} {
		f.Add(s, uint32(fsnotify.Create))
		f.Add(s, uint32(fsnotify.Remove|fsnotify.Rename))
	}
	dir := policyDir(f, map[string]string{"policy.cue": source("Echo")})
	w := idle(f, dir)
	f.Fuzz(func(t *testing.T, rel string, op uint32) {
		name := filepath.Join(dir, rel)
		got := w.handle(fsnotify.Event{Name: name, Op: fsnotify.Op(op)})
		clean := filepath.Clean(name)
		if got && editorTemp(filepath.Base(clean)) && clean != dir && !within(dir, clean) {
			t.Errorf("handle(%q) reloads for an editor's file", rel)
		}
	})
}
