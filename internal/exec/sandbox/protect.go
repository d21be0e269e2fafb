package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// protected are the paths the gateway reads or runs (rule R8): its policy
// module, surfaces sources, decision log, hook cache and the executables
// it starts. Every sandbox binds them read-only after its writable binds,
// and Write and Edit refuse them. The set only grows: what one generation
// ran stays protected while the gateway runs.
var protected struct {
	pathSet
	dirs []string // to create before a sandbox is made (ProtectDir)
}

// concealed are the gateway's secrets (the key that seals approval
// tokens, a TLS key): no sandbox shows them and no file tool reads them,
// since a tool that read the approval key could seal a token for any
// asked call (rules P15, R8). They are protected too.
var concealed pathSet

// pathSet is a set of absolute paths, each as given and as resolved,
// sorted; it only grows.
type pathSet struct {
	mu    sync.RWMutex
	paths []string
}

func (s *pathSet) add(paths []string) {
	var add []string
	for _, p := range paths {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		add = append(add, filepath.Clean(p))
		if real := resolved(p); real != "" {
			add = append(add, real)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paths = append(s.paths, add...)
	slices.Sort(s.paths)
	s.paths = slices.Compact(s.paths)
}

// existing lists the paths that exist, resolved.
func (s *pathSet) existing() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, p := range s.paths {
		if real := resolved(p); real != "" {
			out = append(out, real)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// holding is the path of the set that one of names is or lies in; "" for
// none.
func (s *pathSet) holding(names ...string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.paths {
		for _, n := range names {
			if within(n, p) {
				return p
			}
		}
	}
	return ""
}

// ProtectDir protects a directory the gateway's own programs create later
// (the hook's cache): it is created, empty, before a sandbox is made, so
// that it is bound read-only from the first command on, and no command
// can create it first and fill it (rule R8). One the gateway cannot create
// a command cannot create either.
func ProtectDir(dir string) {
	if dir == "" || !filepath.IsAbs(dir) {
		return
	}
	Protect(dir)
	protected.mu.Lock()
	defer protected.mu.Unlock()
	protected.dirs = append(protected.dirs, filepath.Clean(dir))
}

// Protect adds paths to what no tool may write.
func Protect(paths ...string) { protected.add(paths) }

// Protected lists the protected paths that exist, resolved, once the
// directories of ProtectDir exist.
func Protected() []string {
	protected.mu.RLock()
	for _, d := range protected.dirs {
		if _, err := os.Lstat(d); errors.Is(err, fs.ErrNotExist) {
			os.MkdirAll(d, 0o700)
		}
	}
	protected.mu.RUnlock()
	return protected.existing()
}

// Protecting is the protected path that path lies in, by its name or by
// where its symbolic links lead; "" when none.
func Protecting(path string) string { return protected.holding(path, realPath(path)) }

// Conceal adds paths to what no tool may read or write; a relative path
// is taken from the working directory, as the gateway read it.
func Conceal(paths ...string) {
	var abs []string
	for _, p := range paths {
		if a, err := filepath.Abs(p); p != "" && err == nil {
			abs = append(abs, a)
		}
	}
	Protect(abs...)
	concealed.add(abs)
}

// Concealed lists the concealed paths that exist, resolved.
func Concealed() []string { return concealed.existing() }

// Concealing is the concealed path that names (a path and where it
// really is) are or lie in; "" when none.
func Concealing(names ...string) string { return concealed.holding(names...) }

// RealPath is path with the symbolic links of its deepest existing
// ancestor followed (a file still to be created resolves by its parent).
func RealPath(path string) string { return realPath(path) }

func realPath(path string) string {
	path = filepath.Clean(path)
	var rest []string
	for p := path; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if p == "/" || p == "." {
			return path
		}
		rest = append(rest, filepath.Base(p))
	}
}

// Executable is where a command's program is found, resolved: a bare
// name through PATH, a relative path against dir. "" when not found.
func Executable(name, dir string) string {
	switch {
	case name == "":
		return ""
	case !strings.Contains(name, "/"):
		p, err := exec.LookPath(name)
		if err != nil {
			return ""
		}
		name, _ = filepath.Abs(p)
	case !filepath.IsAbs(name):
		name = filepath.Join(dir, name)
	}
	if _, err := os.Stat(name); err != nil {
		return ""
	}
	return resolved(name)
}
