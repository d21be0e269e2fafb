package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// protected are the paths the gateway reads or runs (rule R8): its policy
// module, surfaces sources, decision log, hook cache and the executables
// it starts. Every sandbox binds them read-only after its writable binds,
// and Write and Edit refuse them. The set only grows: what one generation
// ran stays protected while the gateway runs.
var protected struct {
	pathSet
	dirs []string // to create before a sandbox is made (ProtectDir)
	// gate are the paths that make an agent runtime call the gateway
	// (ProtectGate, rule R9).
	gate map[string]bool
	// programs are the gateway's sandbox programs, whether they exist or
	// not (ProtectPrograms).
	programs []string
	// gateMade are the gate's directories and files made before a
	// sandbox that could make them (ProtectGateDir, ProtectGateFile),
	// with what each is made with.
	gateMade map[string]gateMade
	// shadows are where a program would be found on PATH before the
	// gateway a runtime starts by its bare name (ProtectShadows).
	shadows []string
}

// concealed are the gateway's secrets (the key that seals approval
// tokens, a TLS key): no sandbox shows them and no file tool reads them,
// since a tool that read the approval key could seal a token for any
// asked call (rules P15, R8). They are protected too.
var concealed pathSet

// pathSet is a set of absolute paths, each as given and as resolved,
// sorted, with what each is; it only grows.
type pathSet struct {
	mu    sync.RWMutex
	paths []string
	what  map[string]string // for a sentence; the first given wins
}

// A Named is a path and what it is, for the sentence that refuses a
// write there.
type Named struct{ What, Path string }

// add adds paths (those that are absolute), each as given, cleaned, and
// as r resolves it, and returns what it added.
func (s *pathSet) add(what string, paths []string, r resolver) []string {
	ps := make([]Named, len(paths))
	for i, p := range paths {
		ps[i] = Named{what, p}
	}
	return s.addNamed(ps, r)
}

// addNamed is add of paths each with what it is. The set is sorted again
// only when it grew: a resident gateway protects the same files for each
// hook call it answers.
func (s *pathSet) addNamed(ps []Named, r resolver) []string {
	var add []Named
	for _, p := range ps {
		if p.Path == "" || !filepath.IsAbs(p.Path) {
			continue
		}
		add = append(add, Named{p.What, filepath.Clean(p.Path)})
		if real := r.resolve(p.Path); real != "" {
			add = append(add, Named{p.What, real})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.what == nil {
		s.what = map[string]string{}
	}
	grew := false
	added := make([]string, len(add))
	for i, p := range add {
		added[i] = p.Path
		if _, ok := s.what[p.Path]; !ok {
			s.what[p.Path] = p.What
			s.paths = append(s.paths, p.Path)
			grew = true
		}
	}
	if grew {
		slices.Sort(s.paths)
		s.paths = slices.Compact(s.paths)
	}
	return added
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

// holding is the deepest path of the set that one of names is or lies
// in; "" for none.
func (s *pathSet) holding(names ...string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var held string
	for _, p := range s.paths {
		for _, n := range names {
			if len(p) > len(held) && within(n, p) {
				held = p
			}
		}
	}
	return held
}

// What the gateway's caches and logs are, for Protect's sentences.
const (
	WhatCache = "the gateway's cache of compiled policies"
	WhatLog   = "the gateway's decision log"
	// WhatStartedAs is the path the gateway was started by (StartedAs).
	WhatStartedAs = "the path the agent runtime's settings start the gateway by"
)

// StartedAs is the path this process was started by, as the runtime's
// settings name it: os.Args[0], a bare name found through PATH as the
// runtime's shell finds it, a relative one from the working directory; ""
// when it cannot be told. Its links are not followed: a link on it that a
// command could repoint would make the next hook the agent's program
// (relinkable refuses such a sandbox), where os.Executable names only
// where the link led this time.
var StartedAs = sync.OnceValue(func() string {
	name := os.Args[0]
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return ""
		}
		name = p
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return ""
	}
	return abs
})

// WhatShadow is a path a bare name would be found at on PATH before the
// gateway (Shadows).
const WhatShadow = "a place on PATH before the gateway, where a program of the gateway's name would be started in its place"

// Shadows are, for a gateway started by a bare name (aimon-gw, found
// through PATH as the runtime's shell finds it), the name joined with
// each PATH directory before the one it was found in, a relative one
// (an empty entry, ".") taken from the working directory: a program put
// at any of them would be the runtime's next hook (rules R8, R9). None
// for a gateway started by a path.
var Shadows = sync.OnceValue(func() []string {
	name := os.Args[0]
	found := StartedAs()
	if strings.Contains(name, "/") || found == "" {
		return nil
	}
	wd, _ := os.Getwd()
	var out []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(d) {
			d = filepath.Join(wd, d)
		}
		p := filepath.Join(d, name)
		if p == found {
			return out
		}
		out = append(out, p)
	}
	return nil // not found the way the shell finds it
})

// ProtectShadows protects paths (Shadows, as the hook found them) from
// every file tool, and refuses a sandbox whose command could put a
// program at one (rules R8, R9); started is where the gateway was found,
// for the sentence.
func ProtectShadows(started string, paths ...string) {
	Protect(WhatShadow+" ("+started+")", paths...)
	protected.mu.Lock()
	defer protected.mu.Unlock()
	for _, p := range paths {
		if p = filepath.Clean(p); filepath.IsAbs(p) && !slices.Contains(protected.shadows, p) {
			protected.shadows = append(protected.shadows, p)
		}
	}
}

// shadowable refuses a sandbox whose command could put a program at one
// of the shadows: its directory, or the nearest existing one above, lies
// where writes says the command may write.
func shadowable(writes func(real string) bool) error {
	protected.mu.RLock()
	shadows := slices.Clone(protected.shadows)
	protected.mu.RUnlock()
	for _, p := range shadows {
		at, _, err := landsAt(p)
		if err != nil {
			at = p
		}
		d := filepath.Dir(at)
		for ; d != "/"; d = filepath.Dir(d) {
			if _, err := os.Lstat(d); err == nil {
				break
			}
		}
		if !writes(d) {
			continue
		}
		protected.mu.RLock()
		what := protected.what[filepath.Clean(p)]
		protected.mu.RUnlock()
		started := strings.TrimSuffix(strings.TrimPrefix(what, WhatShadow+" ("), ")")
		return fmt.Errorf("the agent runtime starts the gateway by the bare name %s, which PATH finds at %s, but the PATH directory %s comes before it and lies where this command may write (%s): a command could put a program named %s there, and the runtime's next hook would run that in the gateway's place (rules R8, R9), so no command runs; name the gateway by its absolute path (%s) in the runtime's settings", filepath.Base(p), started, filepath.Dir(p), d, filepath.Base(p), started)
	}
	return nil
}

// ProtectDir protects a directory the gateway's own programs create later
// (the hook's cache): it is created, empty, before a sandbox is made, so
// that it is bound read-only from the first command on, and no command
// can create it first and fill it (rule R8). One the gateway cannot create
// a command cannot create either.
func ProtectDir(what, dir string) {
	if dir == "" || !filepath.IsAbs(dir) {
		return
	}
	Protect(what, dir)
	protected.mu.Lock()
	defer protected.mu.Unlock()
	if d := filepath.Clean(dir); !slices.Contains(protected.dirs, d) {
		protected.dirs = append(protected.dirs, d)
	}
}

// Protect adds paths to what no tool may write; what says what they are,
// for the sentence that refuses a write ("the gateway's decision log").
func Protect(what string, paths ...string) { protected.add(what, paths, resolver{}) }

// ProtectGate adds paths that make an agent runtime call the gateway (its
// settings and hooks) to what no tool may write (rule R9): a write there
// would switch the gate off.
func ProtectGate(what string, paths ...string) {
	ps := make([]Named, len(paths))
	for i, p := range paths {
		ps[i] = Named{what, p}
	}
	ProtectGates(ps)
}

// ProtectGates is ProtectGate of many paths, each with what it is, in one
// batch: a runtime's settings and hooks lie in a few directories, which
// one resolver follows once.
func ProtectGates(ps []Named) {
	added := protected.addNamed(ps, resolver{})
	protected.mu.Lock()
	defer protected.mu.Unlock()
	if protected.gate == nil {
		protected.gate = map[string]bool{}
	}
	for _, p := range added {
		protected.gate[p] = true
	}
}

// ProtectGateDir is ProtectGate of a directory of an agent runtime's gate
// (its user, project or system settings directory) that, while absent, is
// made empty, with mode, before a sandbox whose commands could make it
// (rule R9): a command that made it first could fill it with settings that
// switch the hooks off, or with a hook the runtime runs, outside every
// sandbox, at its next start. Made only where a command could, so that a
// runtime nobody uses gets no directory of its own where no command
// writes (/etc, a home the policy keeps read-only).
func ProtectGateDir(what, dir string, mode fs.FileMode) {
	protectMade(what, dir, gateMade{dir: true, mode: mode})
}

// A gateMade is what an absent gate directory or file is made as.
type gateMade struct {
	dir     bool
	content string
	mode    fs.FileMode
}

// ProtectGateFile is ProtectGate of a file of an agent runtime's gate (its
// state file, a project's MCP servers, a shell's start-up file) that,
// while absent, is made with content, harmless, and mode before a sandbox
// whose commands could make it (rule R9): a command that made it first
// could name a program the runtime runs, outside every sandbox, at its
// next start. Made only where a command could, as ProtectGateDir.
func ProtectGateFile(what, path, content string, mode fs.FileMode) {
	protectMade(what, path, gateMade{content: content, mode: mode})
}

func protectMade(what, path string, m gateMade) {
	if path == "" || !filepath.IsAbs(path) {
		return
	}
	ProtectGates([]Named{{what, path}})
	protected.mu.Lock()
	defer protected.mu.Unlock()
	if protected.gateMade == nil {
		protected.gateMade = map[string]gateMade{}
	}
	p := filepath.Clean(path)
	if _, ok := protected.gateMade[p]; !ok {
		protected.gateMade[p] = m
	}
}

// makeable says whether a command of the sandbox writes says so of could
// make the absent path p: the nearest existing directory above where it
// lands lies where the command writes, outside every protected path.
// at is where it lands; ok false for a path that exists or cannot be
// told (refused by name, and no command walks it either).
func makeable(p string, writes func(real string) bool) (at string, ok bool) {
	at, _, err := landsAt(p)
	if err != nil {
		return "", false
	}
	if _, err := os.Lstat(at); !errors.Is(err, fs.ErrNotExist) {
		return at, false
	}
	parent := filepath.Dir(at)
	for ; parent != "/"; parent = filepath.Dir(parent) {
		if _, err := os.Lstat(parent); err == nil {
			break
		}
	}
	return at, writes(parent) && protected.holding(parent) == ""
}

// makeFile makes the absent file at, and the directories above it, with
// content; one that exists now is left as it is. Where the gateway may
// not (EACCES, EROFS), neither may a command.
func makeFile(at, content string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(at, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// harmless says whether err, from making a gate file or directory, means
// no command could make it either.
func harmless(err error) bool {
	return err == nil || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// makeGateDirs makes each absent directory of ProtectGateDir and file of
// ProtectGateFile whose nearest existing ancestor a sandbox's command may
// write (writes says so of a real path), so that the sandbox binds it
// read-only. Where the gateway may not make it (EACCES, EROFS) nor may the
// command, which runs as the same user without capabilities; any other
// failure refuses the sandbox, since the command could make it.
func makeGateDirs(writes func(real string) bool) error {
	protected.mu.RLock()
	made := maps.Clone(protected.gateMade)
	protected.mu.RUnlock()
	for _, p := range slices.Sorted(maps.Keys(made)) {
		at, ok := makeable(p, writes)
		if !ok {
			continue
		}
		m := made[p]
		var err error
		if m.dir {
			err = os.MkdirAll(at, m.mode)
		} else {
			err = makeFile(at, m.content, m.mode)
		}
		if harmless(err) {
			continue
		}
		protected.mu.RLock()
		what := protected.what[p]
		protected.mu.RUnlock()
		if m.dir {
			return fmt.Errorf("%s (%s) does not exist, and a command could make it with settings that switch the gate off or a hook the runtime runs outside every sandbox (rule R9); the gateway could not make it empty first (%v), so no command runs. Make the directory %s yourself, or keep the policy's commands from writing %s", what, p, err, at, filepath.Dir(at))
		}
		return fmt.Errorf("%s (%s) does not exist, and a command could make it naming a program the runtime runs outside every sandbox (rule R9); the gateway could not make it first (%v), so no command runs. Make %s yourself (%q will do), or keep the policy's commands from writing %s", what, p, err, at, m.content, filepath.Dir(at))
	}
	return nil
}

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

// A Guard is what a write of Path (cleaned) would change that the gateway
// reads or runs (rule R8): the protected path it lands in (Holder, "" for
// none), what that is, and where it lands (At). Err says why where it
// lands cannot be told (a loop of links, a directory the gateway may not
// search): such a write is refused too.
type Guard struct {
	Path, Holder, What, At string
	// Gate says Holder makes an agent runtime call the gateway (rule R9).
	Gate bool
	// Named is the runtime whose project settings directory Holder is by
	// its name (GateNamed), wherever it lies; "" when it was protected.
	Named string
	Err   error
}

// Guarding judges a write of path (absolute) by its name and by where an
// open that writes it lands: its symbolic links followed, a dangling one
// to where it points, as the kernel would create the file. A path through
// a link of /proc (/proc/self/cwd) cannot be told.
func Guarding(path string) Guard {
	path = filepath.Clean(path)
	at, proc, err := landsAt(path)
	if err == nil && proc != "" {
		// Its links lead elsewhere in the process that writes (Claude Code
		// under the hook) than in the gateway's.
		err = fmt.Errorf("it goes through %s, a link of /proc that leads somewhere else for each process", proc)
	}
	if err != nil {
		return Guard{Path: path, At: path, Err: err}
	}
	g := Guard{Path: path, At: at, Holder: protected.holding(path, at)}
	if g.Holder != "" {
		protected.mu.RLock()
		g.What, g.Gate = protected.what[g.Holder], protected.gate[g.Holder]
		protected.mu.RUnlock()
		return g
	}
	// Where it leads first, then as written.
	for _, p := range []string{at, path} {
		if d, runtime := GateNamed(p); d != "" {
			g.Holder, g.Gate, g.Named = d, true, runtime
			break
		}
	}
	return g
}

// GateDirNames are the names of the directories an agent runtime reads a
// project's settings and hooks from, with the runtime: in whatever
// directory it is started in (and, for Codex, every one up to the
// project's root), so one in any directory of a project is a gate a
// runtime started there later reads (rule R9).
var GateDirNames = map[string]string{".claude": "Claude Code", ".codex": "Codex", ".gemini": "Gemini CLI"}

// nestedGateBudget bounds the directories NestedGateDirs reads for one
// sandbox, nearest first: enough for a project's packages (packages/NAME),
// at a cost of about a third of a sandboxed true on a loaded host
// (BenchmarkR9NestedGateWalk).
const nestedGateBudget = 256

// NestedGateDirs are the directories named as GateDirNames below roots
// (real paths), found breadth first, nearest first, reading at most
// budget directories; links are not followed, and .git and node_modules,
// where no runtime is started, are not walked.
func NestedGateDirs(roots []string, budget int) []string {
	var found []string
	queue := slices.Clone(roots)
	seen := map[string]bool{}
	for len(queue) > 0 && budget > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] || d == "" {
			continue
		}
		seen[d] = true
		budget--
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue // a link or a file
			}
			p := filepath.Join(d, e.Name())
			switch name := e.Name(); {
			case GateDirNames[name] != "":
				found = append(found, p)
			case name == ".git" || name == "node_modules":
			default:
				queue = append(queue, p)
			}
		}
	}
	return found
}

// GateNamed is the first directory of path (absolute, cleaned) that has
// one of GateDirNames, and its runtime; "" for none.
func GateNamed(path string) (dir, runtime string) {
	for i := 0; i < len(path); {
		j := strings.IndexByte(path[i+1:], '/')
		end := len(path)
		if j >= 0 {
			end = i + 1 + j
		}
		if r, ok := GateDirNames[path[i+1:end]]; ok {
			return path[:end], r
		}
		i = end
	}
	return "", ""
}

// Refusal is the sentence that refuses the write g judged (rule R8); ""
// when it may go on.
func (g Guard) Refusal() string {
	path := g.Path
	if g.Err != nil {
		return fmt.Sprintf("where %s leads cannot be told (%v), so it may be a file the gateway reads or runs, and no tool may write it (rule R8); give a path without a loop of symbolic links, in directories the gateway may search", path, g.Err)
	}
	if g.Holder == "" {
		return ""
	}
	name := path
	if g.At != path {
		name = fmt.Sprintf("%s (it leads through a symbolic link to %s)", path, g.At)
	}
	if g.Named != "" {
		return fmt.Sprintf("%s lies in %s, a directory named %s, where %s reads the settings and hooks of a project it is started in: a file written there could switch the gate off, or add a hook the runtime would run outside every sandbox, so no tool may write in any .claude, .codex or .gemini directory (rule R9); write the file elsewhere", name, g.Holder, filepath.Base(g.Holder), g.Named)
	}
	which, id := "which the gateway reads or runs", "R8"
	if g.Gate {
		which, id = "which makes the agent runtime call the gateway, and would switch the gate off", "R9"
	}
	if g.At == g.Holder || path == g.Holder {
		return fmt.Sprintf("%s is %s, %s; no tool may write it (rule %s)", name, g.What, which, id)
	}
	return fmt.Sprintf("%s lies in %s, %s, %s; no tool may write there (rule %s)", name, g.Holder, g.What, which, id)
}

// landsAt is where an open that creates path lands: its components walked
// once as the kernel walks them, following at most maxLinks symbolic
// links, a dangling one to where it points; from the first missing
// component on, the rest is taken as written; proc is the last link of
// /proc followed, "" for none. One lstat a component.
func landsAt(path string) (at, proc string, err error) { return walk(path, nil) }

// walk is landsAt that tells onLink, when not nil, each symbolic link it
// follows, by the link's own path (its directory resolved).
func walk(path string, onLink func(link string)) (at, proc string, err error) {
	const maxLinks = 40
	done, rest, links := "", path, 0 // done is "" for the root
	var st syscall.Stat_t
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		switch c {
		case "", ".":
			continue
		case "..":
			done = done[:strings.LastIndexByte(done, '/')+1]
			done = strings.TrimSuffix(done, "/")
			continue
		}
		next := done + "/" + c
		err = syscall.Lstat(next, &st)
		for err == syscall.EINTR {
			err = syscall.Lstat(next, &st)
		}
		switch {
		case err == syscall.ENOENT || err == syscall.ENOTDIR:
			return filepath.Clean(next + "/" + rest), proc, nil
		case err != nil:
			return "", "", &fs.PathError{Op: "lstat", Path: next, Err: err}
		case st.Mode&syscall.S_IFMT != syscall.S_IFLNK:
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", "", fmt.Errorf("%s: more than %d symbolic links", path, maxLinks)
		}
		if onLink != nil {
			onLink(next)
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", "", err
		}
		if strings.HasPrefix(next, "/proc/") {
			proc = next
		}
		if strings.HasPrefix(t, "/") {
			done = ""
		}
		rest = t + "/" + rest
	}
	if done == "" {
		return "/", proc, nil
	}
	return done, proc, nil
}

// relinkable refuses a sandbox in which a command could point elsewhere a
// symbolic link the gateway reads through: a protected or concealed path,
// as the gateway was given it (--policy ./.policy), named through a link
// that lies where the sandbox may write (inside reports that). The
// sandbox binds what the link names read-only, but the link itself stays
// the command's to replace, and the next start or reload would read what
// it then names: the agent's policy, key or state (rule R8).
func relinkable(inside func(dir string) bool) error {
	protected.mu.RLock()
	paths := slices.Clone(protected.paths)
	protected.mu.RUnlock()
	for _, p := range paths {
		var link string
		walk(p, func(l string) {
			if link == "" && inside(filepath.Dir(l)) {
				link = l
			}
		})
		if link == "" {
			continue
		}
		protected.mu.RLock()
		what := protected.what[p]
		protected.mu.RUnlock()
		real := resolved(p)
		if real == "" {
			real = "where it leads"
		}
		if what == WhatStartedAs {
			return fmt.Errorf("the agent runtime starts the gateway by %s, through the symbolic link %s, which lies where this command may write: a command could point the link at a program of its own, and the runtime's next hook would run that in the gateway's place (rules R8, R9), so no command runs; name the gateway's real path (%s) in the runtime's settings", p, link, real)
		}
		return fmt.Errorf("%s, %s, is named through the symbolic link %s, which lies where this command may write: a command could point the link elsewhere, and the gateway would read what it then names (rule R8), so no command runs; give the gateway the real path (%s) in its flags or the runtime's settings", p, what, link, real)
	}
	return nil
}

// Conceal adds paths to what no tool may read or write; a relative path
// is taken from the working directory, as the gateway read it.
func Conceal(paths ...string) {
	var abs []string
	for _, p := range paths {
		if a, err := filepath.Abs(p); p != "" && err == nil {
			abs = append(abs, a)
		}
	}
	r := resolver{}
	protected.add("a secret of the gateway's", abs, r)
	concealed.add("a secret of the gateway's", abs, r)
}

// Concealed lists the concealed paths that exist, resolved.
func Concealed() []string { return concealed.existing() }

// Concealing is the concealed path that names (a path and where it
// really is) are or lie in; "" when none.
func Concealing(names ...string) string { return concealed.holding(names...) }

// LandsAt is where an open that creates path lands, as Guarding judges
// it; path, cleaned, when that cannot be told.
func LandsAt(path string) string {
	path = filepath.Clean(path)
	if at, _, err := landsAt(path); err == nil {
		return at
	}
	return path
}

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

// ConcealedBelow is a concealed path that lies below dir (or is dir); ""
// when none does: a program that searches the files below dir reads it.
func ConcealedBelow(dir string) string {
	concealed.mu.RLock()
	defer concealed.mu.RUnlock()
	for _, p := range concealed.paths {
		if within(p, dir) {
			return p
		}
	}
	return ""
}
