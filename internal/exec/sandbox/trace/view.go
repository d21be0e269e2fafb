package trace

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"unsafe"
)

// A view is how a process names files: its root and its working
// directory, each held as a descriptor of /proc/PID/root and
// /proc/PID/cwd (no path string is built, so a working directory deeper
// than PATH_MAX does not matter), opened once for the arguments of one
// exec stop.
type view struct {
	pid       int
	root, cwd int
	rootSt    syscall.Stat_t
	err       error // why the view could not be opened
}

// newView is pid's view; its errors are not wrapped, so that an ENOENT
// there (pid gone) is not taken for a path's.
func newView(pid int) *view {
	v := &view{pid: pid, root: -1, cwd: -1}
	var err error
	if v.root, err = syscall.Open(fmt.Sprintf("/proc/%d/root", pid), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
		v.err = fmt.Errorf("its root directory cannot be opened: %v", err)
	} else if err = syscall.Fstat(v.root, &v.rootSt); err != nil {
		v.err = fmt.Errorf("its root directory cannot be examined: %v", err)
	} else if v.cwd, err = syscall.Open(fmt.Sprintf("/proc/%d/cwd", pid), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
		v.err = fmt.Errorf("its working directory cannot be opened: %v", err)
	}
	return v
}

func (v *view) close() {
	for _, fd := range []int{v.root, v.cwd} {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
}

// openIn opens path (O_PATH) as the process pid would (one view).
func openIn(pid int, path string) (int, error) {
	v := newView(pid)
	defer v.close()
	return v.open(path)
}

// open opens path (O_PATH) as the view's process would: first in one
// openat2 that crosses no link (RESOLVE_NO_SYMLINKS) and stays in its
// root, or below its working directory for a relative path, whose answer
// is then the process's own; else one component at a time (walk) with
// its links followed as the kernel follows them for the process: a
// link's text from its root or the link's directory, .. not above its
// root, a magic link of a procfs (/proc/N/cwd, root, exe, fd/N) to what
// it names, and self and thread-self at the root of a procfs as the
// process itself in that procfs, not the tracer (rule P16; the
// re-probe's P9).
//
// An error that the kernel would give the process as well (lookupFails)
// means that it cannot open that path either; any other is a path the
// tracer could not follow, which the caller refuses.
func (v *view) open(path string) (int, error) {
	if path == "" {
		return -1, syscall.ENOENT
	}
	if len(path) >= 4096 { // PATH_MAX with its NUL: no open of it succeeds
		return -1, syscall.ENAMETOOLONG
	}
	if v.err != nil {
		return -1, v.err
	}
	start, resolve := v.cwd, uint64(resolveNoSymlinks|resolveBeneath)
	if path[0] == '/' {
		start, resolve = v.root, resolveNoSymlinks|resolveInRoot
	}
	fd, err := openat2(start, path, oPath|syscall.O_CLOEXEC, resolve)
	if err == nil || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) {
		return fd, err
	}
	return v.walk(path) // a link, a .. above the working directory, a race
}

// walk is open one component at a time.
func (v *view) walk(path string) (int, error) {
	root, rootSt, pid := v.root, v.rootSt, v.pid
	start := v.cwd
	if path[0] == '/' {
		start = root
	}
	cur, err := dup(start)
	if err != nil {
		return -1, fmt.Errorf("its directory cannot be held: %v", err)
	}
	fail := func(err error) (int, error) {
		syscall.Close(cur)
		return -1, err
	}
	move := func(fd int) {
		syscall.Close(cur)
		cur = fd
	}
	comps := strings.Split(path, "/")
	links := 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			var st syscall.Stat_t
			if err := syscall.Fstat(cur, &st); err != nil {
				return fail(err)
			}
			if st.Dev == rootSt.Dev && st.Ino == rootSt.Ino {
				continue // not above its root
			}
			fd, err := openat(cur, "..", oPath|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
			if err != nil {
				return fail(err)
			}
			move(fd)
			continue
		}
		if (c == "self" || c == "thread-self") && procRoot(cur) {
			// A link of the reader's own: pid's number in this procfs.
			if links++; links > maxLinks {
				return fail(syscall.ELOOP)
			}
			n, err := selfIn(cur, pid)
			if err != nil {
				return fail(err)
			}
			to := []string{n}
			if c == "thread-self" { // one thread at an exec stop: tid is pid
				to = append(to, "task", n)
			}
			comps = append(to, comps...)
			continue
		}
		fd, err := openat(cur, c, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
		if err != nil {
			return fail(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			return fail(err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
			move(fd)
			continue
		}
		if links++; links > maxLinks {
			syscall.Close(fd)
			return fail(syscall.ELOOP)
		}
		if onProc(fd) && !procRoot(cur) {
			// A magic link (below a procfs's root every link is one): the
			// kernel takes it to what it names, whatever its text says.
			syscall.Close(fd)
			to, err := openat(cur, c, oPath|syscall.O_CLOEXEC)
			if err != nil {
				return fail(err)
			}
			move(to)
			continue
		}
		text, err := readlinkFd(fd)
		syscall.Close(fd)
		if err != nil {
			return fail(err)
		}
		if strings.HasPrefix(text, "/") {
			fd, err := dup(root)
			if err != nil {
				return fail(err)
			}
			move(fd)
		}
		comps = append(strings.Split(text, "/"), comps...)
	}
	return cur, nil
}

// openat2 and its RESOLVE flags, which package syscall lacks (437 on
// every architecture since Linux 5.6's common numbering).
const (
	sysOpenat2        = 437
	resolveNoSymlinks = 0x04
	resolveBeneath    = 0x08
	resolveInRoot     = 0x10
)

func openat2(dir int, path string, flags int, resolve uint64) (int, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	how := struct{ flags, mode, resolve uint64 }{uint64(flags), 0, resolve}
	fd, _, e := syscall.Syscall6(sysOpenat2, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// maxLinks is the kernel's bound on the links one lookup follows.
const maxLinks = 40

// lookupFails reports whether err is what the kernel answers pid's own
// open of that path: nothing there (ENOENT, ENOTDIR), a name too long,
// too many links. Anything else (EACCES, a /proc/self not told, a
// descriptor that cannot be opened) says only that the tracer could not
// follow it.
func lookupFails(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.ELOOP)
}

const procSuperMagic = 0x9fa0

// onProc reports whether fd is on a procfs.
func onProc(fd int) bool {
	var fs syscall.Statfs_t
	return syscall.Fstatfs(fd, &fs) == nil && fs.Type == procSuperMagic
}

// procRoot reports whether fd is the root directory of a procfs.
func procRoot(fd int) bool {
	var st syscall.Stat_t
	return onProc(fd) && syscall.Fstat(fd, &st) == nil && st.Ino == 1
}

// selfIn is pid's number in the procfs whose root is proc: of the numbers
// it has in its namespaces (NSpid, as the tracer sees them), the one whose
// directory there is pid, by the same numbers inward and start time.
func selfIn(proc, pid int) (string, error) {
	ours, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", fmt.Errorf("its numbers cannot be read: %v", err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", fmt.Errorf("its start time cannot be read: %v", err)
	}
	nums, start := nspid(ours), startTime(stat)
	for i := len(nums) - 1; i >= 0 && start != ""; i-- {
		theirs, err1 := readAt(proc, nums[i]+"/status")
		tstat, err2 := readAt(proc, nums[i]+"/stat")
		if err1 != nil || err2 != nil {
			continue
		}
		if in := nspid(theirs); len(in) > 0 && in[0] == nums[i] && slices.Equal(in, nums[len(nums)-len(in):]) && startTime(tstat) == start {
			return nums[i], nil
		}
	}
	return "", errors.New("its /proc/self is a procfs in which the tracer cannot find it")
}

// nspid are the numbers of a /proc/N/status's NSpid line.
func nspid(status []byte) []string {
	for _, l := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// startTime is the start time field (22nd) of a /proc/N/stat.
func startTime(stat []byte) string {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:]) // from the 3rd field
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// readAt is the content of the file name below the directory dir.
func readAt(dir int, name string) ([]byte, error) {
	fd, err := openat(dir, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	b := make([]byte, 4096)
	n, err := f.Read(b)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

func openat(dir int, name string, flags int) (int, error) {
	fd, err := syscall.Openat(dir, name, flags, 0)
	if err != nil {
		return -1, err
	}
	return fd, nil
}

func dup(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// readlinkFd is the text of the link fd (opened O_PATH|O_NOFOLLOW):
// readlinkat with an empty name, which package syscall does not offer.
func readlinkFd(fd int) (string, error) {
	empty := [1]byte{}
	for n := 256; n <= 65536; n *= 4 {
		b := make([]byte, n)
		r, _, e := syscall.Syscall6(syscall.SYS_READLINKAT, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])), uintptr(unsafe.Pointer(&b[0])), uintptr(n), 0, 0)
		if e != 0 {
			return "", e
		}
		if int(r) < n {
			return string(b[:r]), nil
		}
	}
	return "", syscall.ENAMETOOLONG
}
