package builtin

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// plain reports whether the anchor's directory is reached through no
// symbolic link at all: one openat2 with RESOLVE_NO_SYMLINKS of its name
// that is the directory the root holds. Then no link the agent made can
// be on the way (rule R8) and the walk of the path that looks for one is
// not needed (issue 32: a Read was 2.3× os.ReadFile); what was opened
// stays as the directory that beneath opens below. False, with nothing
// kept, whenever it cannot say: the caller then looks for links. A root
// opened before must be that directory; one opened after is checked
// against it (ensureRoot).
func (a *anchor) plain() bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, a.dir, &how)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		unix.Close(fd)
		return false
	}
	if a.root != nil { // opened before: it must be this directory
		fi, err := a.root.Stat(".")
		if rs, ok := statOf(fi); err != nil || !ok || rs.Dev != st.Dev || rs.Ino != st.Ino {
			unix.Close(fd)
			return false
		}
	}
	a.dirfd, a.dev, a.ino = fd, st.Dev, st.Ino
	return true
}

// beneath opens rel (relative to the anchor) for reading in one openat2
// with RESOLVE_BENEATH: the kernel refuses any step out of the anchor, by
// "..", an absolute symbolic link or a magic link, as os.Root's walk does
// one component at a time with an open and a close each (rule R6). done
// is false when the caller must take the root's way: the anchor was not
// opened plain, openat2 is filtered, or the path leads through a link that
// only the root's resolution (resolve) may follow.
func (a *anchor) beneath(rel string, flag int) (f *os.File, err error, done bool) {
	if a.dirfd <= 0 {
		return nil, nil, false
	}
	how := unix.OpenHow{Flags: uint64(flag) | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(a.dirfd, rel, &how)
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Openat2(a.dirfd, rel, &how)
	}
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), filepath.Join(a.dir, rel)), nil, true
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EAGAIN),
		errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.EINVAL):
		return nil, nil, false
	}
	return nil, &fs.PathError{Op: "openat2", Path: rel, Err: err}, true
}

// linkFree reports whether the directory rel (relative to the anchor) is
// reached through no symbolic link: one openat2 beneath the anchor opened
// plain that follows none. False when it cannot say.
func (a *anchor) linkFree(rel string) bool {
	if a.dirfd <= 0 {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(a.dirfd, rel, &how)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// listBeneath lists the directory rel (relative to the anchor), opened
// with beneath; each regular file's entry that stat (if set) says carries its FileInfo,
// stated on the directory's descriptor by the name alone (fstatat, no link
// followed: anchored as the open was). done is false when the root's way
// must list it.
func (a *anchor) listBeneath(rel string, stat func(name string) bool) (ents []fs.DirEntry, err error, done bool) {
	f, err, done := a.beneath(rel, os.O_RDONLY|unix.O_DIRECTORY)
	if !done || err != nil {
		return nil, err, done
	}
	defer f.Close()
	ents, err = f.ReadDir(-1)
	if stat == nil {
		return ents, err, true
	}
	sc, serr := f.SyscallConn()
	if serr != nil {
		return nil, nil, false
	}
	sc.Control(func(fd uintptr) {
		for i, e := range ents {
			if !e.Type().IsRegular() || !stat(e.Name()) {
				continue
			}
			var st unix.Stat_t
			if unix.Fstatat(int(fd), e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				ents[i] = statted{e, statInfo{name: e.Name(), st: st}}
			}
		}
	})
	return ents, err, true
}

// statInfo is a regular file's FileInfo from its stat.
type statInfo struct {
	name string
	st   unix.Stat_t
}

func (s statInfo) Name() string       { return s.name }
func (s statInfo) Size() int64        { return s.st.Size }
func (s statInfo) Mode() fs.FileMode  { return fs.FileMode(s.st.Mode & 0o777) }
func (s statInfo) ModTime() time.Time { return time.Unix(s.st.Mtim.Unix()) }
func (s statInfo) IsDir() bool        { return false }
func (s statInfo) Sys() any           { return &s.st }

// openPlain opens path (absolute) for Grep in one openat2 beneath the
// anchor that follows no symbolic link at all: the file is then where its
// name says (the anchor was opened plain), so the look at /proc/self/fd
// that open makes to find where it really is is not needed, and the
// descriptor is read as it is, without an os.File's poller set-up (issue
// 32: half of a file's cost in Grep). ok is false, with nothing open, for
// anything else, a file of stated size 0 included (a kernel interface may
// make a read wait): the caller then takes open's way.
func (a *anchor) openPlain(path string) (f rawFile, size int64, ok bool) {
	rel, in := a.rel(path)
	if a.dirfd <= 0 || !in || sandbox.Concealing(path) != "" {
		return -1, 0, false
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(a.dirfd, rel, &how)
	if err != nil {
		return -1, 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size <= 0 {
		unix.Close(fd)
		return -1, 0, false
	}
	return rawFile(fd), st.Size, true
}

// rawFile is a descriptor read as it is.
type rawFile int

func (f rawFile) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f rawFile) Close() error { return unix.Close(int(f)) }

// closeDir closes what plain kept.
func (a *anchor) closeDir() {
	if a.dirfd > 0 {
		unix.Close(a.dirfd)
		a.dirfd = 0
	}
}

// readWhole reads path whole, for Read, when it is a regular file of 1 to
// maxReadBuf-1 bytes that dir's anchor holds and that is reached through
// no symbolic link at all: one openat2 with RESOLVE_NO_SYMLINKS of the
// clean absolute path, which is the anchored open (the anchor is reached
// without a link, as plain checks, and nothing of a path without links or
// ".." can lead out of it) in one call instead of three (issue 32: a small
// Read was 1.67× os.ReadFile). The descriptor is read as it is, without
// an os.File, which costs three more calls to set up for the poller. ok is
// false, with nothing open, whenever anything differs from that, even an
// ordinary error: Read then takes its way, which says what is wrong.
func readWhole(dir, path string) (data []byte, st tools.FileState, ok bool) {
	if rel, ok := (&anchor{dir: dir}).rel(path); !ok || rel == "." || !filepath.IsAbs(path) {
		return nil, st, false
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err != nil {
		return nil, st, false
	}
	defer unix.Close(fd)
	var s unix.Stat_t
	// A size of 0 is also what kernel interfaces state, which may make a
	// read wait: those take Read's way, with its deadline.
	if unix.Fstat(fd, &s) != nil || s.Mode&unix.S_IFMT != unix.S_IFREG || s.Size <= 0 || s.Size >= maxReadBuf {
		return nil, st, false
	}
	// One byte more than stated, so that a file grown since is noticed.
	buf := make([]byte, s.Size+1)
	n := 0
	for {
		m, err := unix.Read(fd, buf[n:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, st, false
		}
		if m == 0 {
			break
		}
		if n += m; n == len(buf) {
			return nil, st, false
		}
	}
	st = tools.FileState{Size: s.Size, ModTime: time.Unix(s.Mtim.Unix()), ChangeTime: time.Unix(s.Ctim.Unix()), Inode: s.Ino}
	return buf[:n], st, true
}
