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

// openIn opens path (O_PATH) as the process pid would: from its root
// and its working directory, each held as a descriptor of /proc/PID/root
// and /proc/PID/cwd (no path string is built, so a working directory
// deeper than PATH_MAX does not matter), one component at a time with
// its links followed as the kernel follows them for pid: a link's text
// from pid's root or the link's directory, .. not above pid's root, a
// magic link of a procfs (/proc/N/cwd, root, exe, fd/N) to what it
// names, and self and thread-self at the root of a procfs as pid itself
// in that procfs, not the tracer (rule P16; the re-probe's P9).
//
// An error that the kernel would give pid as well (lookupFails) means
// that pid cannot open that path either; any other is a path the tracer
// could not follow, which the caller refuses: the errors of pid's own
// root, working directory and numbers are not wrapped, so that an ENOENT
// there (pid gone) is not taken for the path's.
func openIn(pid int, path string) (int, error) {
	if path == "" {
		return -1, syscall.ENOENT
	}
	if len(path) >= 4096 { // PATH_MAX with its NUL: no open of it succeeds
		return -1, syscall.ENAMETOOLONG
	}
	root, err := syscall.Open(fmt.Sprintf("/proc/%d/root", pid), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("its root directory cannot be opened: %v", err)
	}
	defer syscall.Close(root)
	var rootSt syscall.Stat_t
	if err := syscall.Fstat(root, &rootSt); err != nil {
		return -1, fmt.Errorf("its root directory cannot be examined: %v", err)
	}
	var cur int
	if path[0] == '/' {
		cur, err = dup(root)
	} else {
		cur, err = syscall.Open(fmt.Sprintf("/proc/%d/cwd", pid), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return -1, fmt.Errorf("its working directory cannot be opened: %v", err)
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
