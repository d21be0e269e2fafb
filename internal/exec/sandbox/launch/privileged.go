package launch

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock's execute right is checked at execve only: a file mapped
// executable without one (the loader run as a program on a file, a
// written library through LD_PRELOAD or dlopen) would still run. So the
// mounts the command may write are made noexec too, which the kernel
// checks at every executable mapping. bwrap cannot do that, so it starts
// the launcher with CAP_SYS_ADMIN and CAP_SETPCAP in the sandbox's user
// namespace and without its seccomp filter; the launcher, on the one
// thread that will execute the command, takes a mount namespace of its
// own where bwrap's belongs to a user namespace above the command's (bwrap
// maps a user other than root back after mounting /dev), marks the mounts
// noexec, drops every capability, from the bounding set too, and loads
// the filter from FilterFD, then executes the command. Anything that
// fails runs nothing.

// FilterFD is the descriptor the seccomp filter is read from, to its end.
const FilterFD = 3

// noexec makes noexec, in this thread's mount namespace (one of its own
// where bwrap's is not its user namespace's), every read-write mount at
// or below one of roots, but for those at keep. The mounts are read from the namespace itself, so that a bind
// nested in a writable one (a pinned parent) is marked too, a read-only
// one (the gateway's binaries) is left alone, and no path is resolved.
func noexec(roots, keep []string) error {
	if !ownsMounts() {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("no mount namespace of its own: %w", err)
		}
	}
	// This thread's namespace, not the process's.
	b, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOEXEC}
	var covered []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		mp, opts := Unescape(f[4]), strings.Split(f[5], ",")
		if opts[0] != "rw" || slices.Contains(opts, "noexec") || slices.Contains(keep, mp) ||
			!slices.ContainsFunc(roots, func(r string) bool { return within(mp, r) }) {
			continue
		}
		err := unix.MountSetattr(unix.AT_FDCWD, mp, unix.AT_SYMLINK_NOFOLLOW, &attr)
		if err == unix.EINVAL || err == unix.ENOENT {
			// Covered by a later mount (the host's /dev/shm under bwrap's
			// /dev): what the path reaches now is checked below.
			covered = append(covered, mp)
		} else if err != nil {
			return fmt.Errorf("%s cannot be made noexec: %w", mp, err)
		}
	}
	for _, mp := range covered {
		var st unix.Statfs_t
		if err := unix.Statfs(mp, &st); err != nil && err != unix.ENOENT {
			return fmt.Errorf("%s cannot be checked: %w", mp, err)
		} else if err == nil && st.Flags&unix.ST_NOEXEC == 0 && !slices.ContainsFunc(keep, func(k string) bool { return within(mp, k) }) {
			return fmt.Errorf("%s is covered by a mount that is not noexec", mp)
		}
	}
	return nil
}

// ownsMounts reports whether this thread's mount namespace belongs to its
// user namespace, in which it holds CAP_SYS_ADMIN: bwrap's, where bwrap
// made no second user namespace (the gateway runs as root). Then the
// mounts are marked where they are, and no namespace of its own is copied
// from bwrap's, then torn down when the command ends (some forty mounts,
// each a grace period's wait in the kernel's unmount).
func ownsMounts() bool {
	mnt, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(mnt)
	owner, err := unix.IoctlRetInt(mnt, unix.NS_GET_USERNS)
	if err != nil {
		return false
	}
	defer unix.Close(owner)
	var a, b unix.Stat_t
	return unix.Fstat(owner, &a) == nil && unix.Stat("/proc/thread-self/ns/user", &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
}

// Unescape undoes mountinfo's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dropCaps leaves this thread no capability, now or after an exec.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("the ambient capabilities cannot be cleared: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("capability %d cannot be dropped from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("the capabilities cannot be dropped: %w", err)
	}
	return nil
}

// loadFilter applies the seccomp filter on FilterFD to this thread.
func loadFilter() error {
	f := os.NewFile(FilterFD, "seccomp-filter")
	prog, err := io.ReadAll(f)
	f.Close()
	if err != nil || len(prog) == 0 || len(prog)%8 != 0 {
		return fmt.Errorf("the seccomp filter cannot be read (%d bytes, %v)", len(prog), err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog) / 8), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("the seccomp filter cannot be loaded: %w", err)
	}
	return nil
}
