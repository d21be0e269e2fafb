package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// The file tools act on the file that was decided (rule R6): every file is
// opened through an os.Root anchored at the directory the deciding entry
// allows, so that a symbolic link or ".." cannot take the open out of it,
// and without blocking, so that a FIFO or a device cannot hang the gateway;
// what was opened is then checked on its descriptor, never by a second look
// at the path.

// anchor is an os.Root at the call's scope.
type anchor struct {
	root *os.Root
	dir  string
	env  *tools.Env
	// The anchor's directory as plain opened it, for beneath; 0 for none.
	// dev and ino identify it, for a root opened after it (ensureRoot).
	dirfd    int
	dev, ino uint64
	// A search root (from) that a symbolic link took to another place
	// under the anchor (to), for allows; "" for none.
	from, to string
}

// anchorDir is the directory the call was allowed: its scope's anchor,
// "/" without one.
func anchorDir(env *tools.Env) string {
	if env != nil && env.Scope != nil && env.Scope.Anchor != "" {
		return env.Scope.Anchor
	}
	return "/"
}

// openReadAnchor is openAnchor for a call that only opens files to read
// them (Read): an anchor opened plain needs no os.Root until an open must
// take the root's way, which saves a Read four system calls.
func openReadAnchor(env *tools.Env) (*anchor, error) {
	a := &anchor{dir: anchorDir(env), env: env}
	if a.plain() {
		return a, nil
	}
	return openAnchor(env)
}

// ensureRoot opens the root of an anchor opened plain, and checks that it
// is the directory plain opened.
func (a *anchor) ensureRoot() error {
	if a.root != nil {
		return nil
	}
	r, err := os.OpenRoot(a.dir)
	if err != nil {
		return err
	}
	fi, err := r.Stat(".")
	if st, ok := statOf(fi); err != nil || !ok || st.Dev != a.dev || st.Ino != a.ino {
		r.Close()
		return &anchorLink{dir: a.dir}
	}
	a.root = r
	return nil
}

// statOf is fi's system stat.
func statOf(fi fs.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

// openAnchor opens the directory the call was allowed.
func openAnchor(env *tools.Env) (*anchor, error) {
	dir := anchorDir(env)
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	a := &anchor{root: r, dir: dir, env: env}
	if a.plain() || dir == "/" {
		return a, nil
	}
	// The anchor is the directory of that name, not where a link the agent
	// made there leads (rule R8); checked on what was opened, so that a
	// link swapped in meanwhile is caught too.
	link := sandbox.AgentLink(dir, workdir(env))
	opened, err1 := r.Stat(".")
	named, err2 := os.Stat(dir)
	if link != "" || err1 != nil || err2 != nil || !os.SameFile(opened, named) {
		r.Close()
		return nil, &anchorLink{dir: dir, link: link}
	}
	return a, nil
}

// anchorLink is an anchor that a symbolic link takes elsewhere.
type anchorLink struct{ dir, link string }

func (e *anchorLink) Error() string {
	if e.link == "" {
		e.link = e.dir
	}
	return fmt.Sprintf("%s, where this surface may act, leads through the symbolic link %s to %s; a tool follows no link made there. Remove the link, or give the real path in the policy.", e.dir, e.link, leadsTo(e.dir))
}

// anchorFailure is the sentence for an anchor that could not be opened,
// ok false for another failure.
func anchorFailure(env *tools.Env, tool string, err error) (tools.Result, bool) {
	var al *anchorLink
	if errors.As(err, &al) {
		return refuse(env, tool, "%s", al.Error()), true
	}
	var c *concealedErr
	if errors.As(err, &c) {
		return refuse(env, tool, "%s is a secret of the gateway's (the key that seals approvals, or a TLS key); no tool may read or write it.", c.path), true
	}
	var w *withheld
	if errors.As(err, &w) {
		return refuse(env, tool, "%s leads through a symbolic link to %s, which this surface may not %s: a deny, ask or narrower allow entry withholds it, and %s follows no link into what the lists withhold. Give that path itself, to have it decided as itself.", w.path, w.at, strings.ToLower(tool), tool), true
	}
	return tools.Result{}, false
}

func (a *anchor) Close() {
	a.closeDir()
	if a.root != nil {
		a.root.Close()
	}
}

// rel is path relative to the anchor; ok is false when path lies outside it.
func (a *anchor) rel(path string) (string, bool) {
	rel, err := filepath.Rel(a.dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// allows reports whether the scope admits path (a search's files), and,
// for a search whose root a link took elsewhere (stat), the place path
// really is.
func (a *anchor) allows(path string) bool {
	if !a.limited() {
		return true
	}
	if r, ok := strings.CutPrefix(path, a.from+"/"); ok && a.to != "" && !a.env.Scope.Allows(filepath.Join(a.to, r)) {
		return false
	}
	return a.env.Scope.Allows(path)
}

// mayAllowBelow reports whether the scope may admit dir or a path below
// it, so that a search reads no directory it would skip every file of.
// A search root a link took elsewhere is judged where it is named, as
// allows judges it there too.
func (a *anchor) mayAllowBelow(dir string) bool {
	return !a.limited() || a.env.Scope.MayAllowBelow(dir)
}

// errEscapes marks an open that a symbolic link or ".." took out of the anchor.
var errEscapes = errors.New("it leads outside the allowed directory")

// open opens path (absolute) under the anchor with flag, never blocking,
// and keeps it only when the place it is really at is one the scope
// admits (withheldAt).
func (a *anchor) open(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := a.openAt(path, flag, perm)
	if err != nil {
		return nil, err
	}
	at := openedAt(f)
	if sandbox.Concealing(path, at) != "" {
		f.Close()
		return nil, &concealedErr{path: path}
	}
	if err := a.withheldAt(path, at); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// concealedErr is an open of a secret of the gateway's (rules P15, R8).
type concealedErr struct{ path string }

func (e *concealedErr) Error() string { return e.path + " is a secret of the gateway's" }

// concealing refuses a path that is, or leads to, a secret of the
// gateway's, before a tool's own way of opening it.
func concealing(env *tools.Env, tool, path string) (tools.Result, bool) {
	return concealingAt(env, tool, path, sandbox.RealPath(path))
}

// concealingAt is concealing with where path really is already known: for
// a path opened without following any link, path itself.
func concealingAt(env *tools.Env, tool, path, real string) (tools.Result, bool) {
	if sandbox.Concealing(path, real) != "" {
		r, _ := anchorFailure(env, tool, &concealedErr{path: path})
		return r, false
	}
	return tools.Result{}, true
}

// withheld is an open that a symbolic link inside the anchor took to a
// place the scope does not admit: one a deny, ask or narrower allow entry
// withholds (rules P14, R6). An agent with Bash can make such a link where
// it may write, though its sandbox keeps a denied or asked directory
// read-only; so where a link leads is decided as itself.
type withheld struct{ path, at string }

func (e *withheld) Error() string { return e.path + " leads to " + e.at }

// withheldAt is a withheld error when real, where path really leads (""
// when unknown), is another place than path and one the scope does not
// admit. real is taken relative to the anchor's own real directory, so
// that a link of the operator's above the anchor changes nothing.
func (a *anchor) withheldAt(path, real string) error {
	if !a.limited() || real == "" || real == path {
		return nil
	}
	if at := a.at(real); at != "" && at != path && !a.env.Scope.Allows(at) {
		return &withheld{path: path, at: at}
	}
	return nil
}

// at is real, a place a path really leads to, named under the anchor's
// own name; "" when unknown or outside the anchor (its own checks refuse
// that).
func (a *anchor) at(real string) string {
	if real == "" {
		return ""
	}
	base, err := filepath.EvalSymlinks(a.dir)
	if err != nil {
		base = a.dir
	}
	rel, err := filepath.Rel(base, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(a.dir, rel)
}

// limited reports whether the scope's patterns limit what the call may
// touch below its anchor.
func (a *anchor) limited() bool {
	return a.env != nil && a.env.Scope != nil && a.env.Scope.Allows != nil
}

// openedAt is where the open file f really is, from its descriptor, so
// that a link swapped in before the open cannot hide it; "" when unknown.
func openedAt(f *os.File) string {
	sc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var at string
	sc.Control(func(fd uintptr) { at, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) })
	if !filepath.IsAbs(at) {
		return ""
	}
	return at
}

// openAt is open without the check of where the file is.
func (a *anchor) openAt(path string, flag int, perm fs.FileMode) (*os.File, error) {
	flag |= syscall.O_NONBLOCK | syscall.O_CLOEXEC | syscall.O_NOCTTY
	if rel, ok := a.rel(path); ok && flag&writing == 0 {
		if f, err, done := a.beneath(rel, flag); done {
			return f, err
		}
	}
	if err := a.ensureRoot(); err != nil {
		return nil, err
	}
	rel, err := a.resolve(path)
	if err != nil {
		return nil, err
	}
	f, err := a.root.OpenFile(rel, flag, perm)
	if err != nil && isEscape(err) {
		return nil, errEscapes
	}
	return f, err
}

// writing are the flags of an open that may change a file; such opens
// always take the root's way.
const writing = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND | os.O_EXCL

// resolve is path relative to the anchor, for the root's operations. An
// os.Root follows no absolute symbolic link; a path through one that stays
// inside the anchor is taken at the place it leads to, which the root then
// opens as anchored as any other (a link swapped in meanwhile cannot lead it
// out).
func (a *anchor) resolve(path string) (string, error) {
	rel, ok := a.rel(path)
	if !ok {
		return "", errEscapes
	}
	if _, err := a.root.Stat(rel); !isEscape(err) {
		return rel, nil
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", errEscapes
	}
	base, err := filepath.EvalSymlinks(a.dir)
	if err != nil {
		return "", errEscapes
	}
	rel, err = filepath.Rel(base, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", errEscapes
	}
	return rel, nil
}

// stat is fs.Stat of path through the anchor.
func (a *anchor) stat(path string) (fs.FileInfo, string, error) {
	if err := a.ensureRoot(); err != nil {
		return nil, "", err
	}
	rel, err := a.resolve(path)
	if err != nil {
		return nil, "", err
	}
	fi, err := a.root.Stat(rel)
	if isEscape(err) {
		return nil, "", errEscapes
	}
	if at := a.at(leadsTo(path)); err == nil && a.limited() && at != "" && at != path {
		a.from, a.to = path, at // a search's root: its files are decided where they are too
	}
	return fi, rel, err
}

func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// leadsTo is where path leads once its symbolic links are followed, for a
// sentence or a decision; through a chain of links whose end is missing,
// where the chain points (a file to create there lands there).
func leadsTo(path string) string { return leadsToWithin(path, 40) }

// leadsToWithin is leadsTo following at most n links, as the kernel does.
func leadsToWithin(path string, n int) string {
	if p, err := filepath.EvalSymlinks(path); err == nil || n == 0 {
		if err != nil {
			return path
		}
		return p
	}
	if t, err := os.Readlink(path); err == nil {
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(path), t)
		}
		return leadsToWithin(filepath.Clean(t), n-1)
	}
	dir, base := filepath.Split(path)
	if dir != "" && dir != "/" {
		if d := leadsToWithin(filepath.Clean(dir), n-1); d != "" {
			return filepath.Join(d, base)
		}
	}
	return path
}

// escaped is the sentence for an open that left the anchor.
func (a *anchor) escaped(tool, path string) tools.Result {
	return refuse(a.env, tool, "%s leads to %s, outside %s where this surface may act; %s follows no symbolic link or '..' out of it. Give the path of the file itself.", path, leadsTo(path), a.dir, tool)
}

// openRegular opens path for tool and checks that it is a regular file.
// ok is false with the error result otherwise: a FIFO, device, socket or
// directory is refused at once (rule C2: no file can hang the gateway).
func (a *anchor) openRegular(tool, path string, flag int, onDir string) (*os.File, fs.FileInfo, tools.Result, bool) {
	f, err := a.open(path, flag, 0)
	switch {
	case errors.Is(err, errEscapes):
		return nil, nil, a.escaped(tool, path), false
	case errors.Is(err, syscall.EISDIR):
		return nil, nil, refuse(a.env, tool, "%s is a directory, not a file. %s", path, onDir), false
	case err != nil:
		return nil, nil, openFailure(a.env, tool, path, err), false
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fail(a.env, tool, err, "Could not inspect %s: %v.", path, err), false
	}
	switch {
	case fi.IsDir():
		f.Close()
		return nil, nil, refuse(a.env, tool, "%s is a directory, not a file. %s", path, onDir), false
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, refuse(a.env, tool, "%s is not a regular file (it is a %s); %s works on regular files only.", path, fileKind(fi.Mode()), tool), false
	}
	bound(f)
	return f, fi, tools.Result{}, true
}

// pollWait bounds how long a read waits on a file that can make it wait: a
// "regular" file of a kernel interface such as /proc/kmsg. Disk files
// never wait, and take no deadline.
const pollWait = 2 * time.Second

// bound gives a file that the poller can wait on a read deadline, so that
// a read of a kernel interface that has no data fails rather than blocks.
func bound(f *os.File) { _ = f.SetReadDeadline(time.Now().Add(pollWait)) }

// readFailure is the result of a read that failed; one that waited past
// pollWait is a file that is not an ordinary file.
func readFailure(env *tools.Env, tool, path string, err error) tools.Result {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.EAGAIN) {
		return refuse(env, tool, "%s is not a regular file one can read to its end (it gave no data within %s, as a device or a kernel interface does); %s reads ordinary files only.", path, pollWait, tool)
	}
	return fail(env, tool, err, "Could not read %s: %v.", path, err)
}

// fileKind names a non-regular file's type for a sentence.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return fmt.Sprintf("file of mode %v", m.Type())
}

// stateOf is what a read saw of a file (rule C6).
func stateOf(fi fs.FileInfo) tools.FileState {
	st := tools.FileState{Size: fi.Size(), ModTime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ChangeTime, st.Inode = time.Unix(sys.Ctim.Unix()), sys.Ino
	}
	return st
}

// trailingSlash refuses a file path that ends with a slash: it names a
// directory, and cleaning it would act on the file of that name.
func trailingSlash(env *tools.Env, tool, raw string) (tools.Result, bool) {
	if strings.HasSuffix(raw, "/") && raw != "/" || strings.HasSuffix(raw, "/.") {
		return refuse(env, tool, "Parameter 'file_path' %s ends with a slash, so it names a directory, not a file; give the file's path without it.", quote(raw)), false
	}
	return tools.Result{}, true
}

// maxFileBytes is the call's bound on a file Edit or Write produces.
func maxFileBytes(env *tools.Env) int64 {
	if env != nil && env.MaxFileBytes > 0 {
		return env.MaxFileBytes
	}
	return tools.DefaultMaxFileBytes
}
