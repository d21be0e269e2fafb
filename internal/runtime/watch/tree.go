package watch

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// What is watched, and why:
//
//   - dir and every directory below it (fsnotify does not recurse portably),
//     except hidden ones such as .git, whose churn is never policy;
//   - each directory from dir's parent up to the module root, without
//     recursing: the parent sees dir vanish and come back, and CUE also loads
//     the package's files that lie in those directories;
//   - the module's cue.mod tree, when the module root is above dir.
//
// A directory that cannot be watched yet (dir removed, a parent gone) is
// looked for again on every poll tick.

// ensure adds the watches that are missing and reports whether dir came
// (back) into view.
func (w *Watcher) ensure() bool {
	for _, a := range w.ancestors() {
		if !w.flat[a] && w.fs.Add(a) == nil {
			w.flat[a] = true
		}
	}
	came := false
	if !w.present {
		if st, err := os.Stat(w.dir); err == nil && st.IsDir() && w.watchTree(w.dir) {
			w.present, came = true, true
		}
	}
	if cm := w.cueMod(); cm != "" && !w.tree[cm] {
		if st, err := os.Stat(cm); err == nil && st.IsDir() {
			w.watchTree(cm)
		}
	}
	return came
}

// missing reports whether something that should be watched is not.
func (w *Watcher) missing() bool {
	if !w.present {
		return true
	}
	for _, a := range w.ancestors() {
		if !w.flat[a] {
			return true
		}
	}
	return false
}

// rescan adds watches for whatever events may have been missed.
func (w *Watcher) rescan() {
	w.ensure()
	if w.present {
		w.watchTree(w.dir)
	}
	if cm := w.cueMod(); cm != "" && w.tree[cm] {
		w.watchTree(cm)
	}
}

// lose drops every watch, after dir or a directory above it was removed or
// renamed (the watches that followed it are stale), then adds back what is
// still there.
func (w *Watcher) lose() {
	for d := range w.tree {
		w.fs.Remove(d) // already gone when the kernel dropped it
	}
	for d := range w.flat {
		w.fs.Remove(d)
	}
	clear(w.tree)
	clear(w.flat)
	w.present = false
	w.ensure()
}

// watchTree watches root and the directories below it, and reports whether
// root itself is watched.
func (w *Watcher) watchTree(root string) bool {
	ok := false
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			w.cannotWatch(p, err)
			return nil // go on with the rest of the tree
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err := w.fs.Add(p); err != nil {
			w.cannotWatch(p, err)
			return nil
		}
		w.tree[p] = true
		delete(w.warned, p)
		if p == root {
			ok = true
		}
		return nil
	})
	return ok
}

func (w *Watcher) cannotWatch(p string, err error) {
	if os.IsNotExist(err) || w.warned[p] {
		return
	}
	w.warned[p] = true
	w.log.Warn("cannot watch a policy directory; changes there are seen on the next other change or SIGHUP",
		"dir", p, "error", err)
}

// unwatchUnder drops the watches of p and the directories below it.
func (w *Watcher) unwatchUnder(p string) {
	for d := range w.tree {
		if d == p || within(d, p) {
			w.fs.Remove(d)
			delete(w.tree, d)
		}
	}
}

// handle updates the watches for one event and reports whether it may have
// changed the policy.
func (w *Watcher) handle(ev fsnotify.Event) bool {
	name := filepath.Clean(ev.Name)
	gone := ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename)
	if name == w.dir || within(w.dir, name) {
		// dir itself or a directory above it: removed, renamed, back, or
		// its permissions changed.
		if gone {
			w.lose()
		} else {
			w.ensure()
		}
		return true
	}
	base := filepath.Base(name)
	if editorTemp(base) {
		return false
	}
	for _, d := range w.extra {
		if name == d || within(name, d) {
			// A markdown surface's file, or a directory among them.
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Lstat(name); err == nil && fi.IsDir() && !strings.HasPrefix(base, ".") {
					w.watchTree(name)
				}
			}
			return strings.HasSuffix(base, ".md") || w.tree[name] || gone
		}
	}
	cm := w.cueMod()
	if !within(name, w.dir) && (cm == "" || (name != cm && !within(name, cm))) {
		// A file beside an ancestor of dir: its .cue files are policy when
		// the ancestor is in the module.
		return w.flat[filepath.Dir(name)] && filepath.Ext(base) == ".cue" && w.inModule(filepath.Dir(name))
	}
	if gone {
		if w.tree[name] {
			w.unwatchUnder(name)
			return true
		}
		return w.policyFile(name)
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Lstat(name); err == nil {
			switch {
			case fi.IsDir():
				if strings.HasPrefix(base, ".") {
					return false
				}
				w.watchTree(name)
				return true
			case fi.Mode()&fs.ModeSymlink != 0:
				// A symlink swapped into place (a Kubernetes ConfigMap's ..data).
				return true
			}
		}
	}
	// A watched directory's permissions decide whether it can be read.
	return w.tree[name] || w.policyFile(name)
}

// policyFile reports whether name is a file the loader may read: a .cue file,
// or anything in the module's cue.mod.
func (w *Watcher) policyFile(name string) bool {
	switch filepath.Ext(name) {
	case ".cue", ".yaml", ".yml", ".json":
		return true
	}
	if w.modRoot == "" {
		return false
	}
	cm := filepath.Join(w.modRoot, "cue.mod")
	return name == cm || within(name, cm)
}

// inModule reports whether directory d lies in dir's CUE module.
func (w *Watcher) inModule(d string) bool {
	return w.modRoot != "" && (d == w.modRoot || within(d, w.modRoot))
}

// ancestors lists the directories from dir's parent up to the module root.
func (w *Watcher) ancestors() []string {
	parent := filepath.Dir(w.dir)
	if parent == w.dir {
		return nil // dir is a root directory
	}
	out := []string{parent}
	if w.modRoot == "" || !within(w.dir, w.modRoot) {
		return out
	}
	for d := parent; d != w.modRoot; {
		d = filepath.Dir(d)
		out = append(out, d)
	}
	return out
}

// cueMod is the module's cue.mod when it lies outside dir's tree.
func (w *Watcher) cueMod() string {
	if w.modRoot == "" || w.modRoot == w.dir {
		return ""
	}
	return filepath.Join(w.modRoot, "cue.mod")
}

// within reports whether p lies strictly below dir.
func within(p, dir string) bool {
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return len(p) > len(dir) && strings.HasPrefix(p, dir)
}

// moduleRoot finds the CUE module dir belongs to, as policy.Load does: the
// nearest directory at or above dir with a cue.mod directory.
func moduleRoot(dir string) string {
	for d := dir; ; {
		if st, err := os.Stat(filepath.Join(d, "cue.mod")); err == nil && st.IsDir() {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}
