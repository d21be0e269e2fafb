package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What a command writes, it cannot execute (rule R6; issue 41): the
// launcher restricts itself, and so the command, with a Landlock ruleset
// that handles only the right to execute a file (and reparenting, which
// every ruleset handles), after bwrap's mounts (Landlock forbids a
// restricted process to mount) and before the command's exec. Landlock
// only allows, and a right granted on a directory holds for all below it,
// so execute is granted on each file and directory that is neither under
// a path the command may write nor on the way to one: the siblings along
// each writable path's ancestors, not "/". Paths bound read-only inside a
// writable one (the policy, the gateway's and plugins' binaries) and the
// paths the policy lets run (sandbox.exec) are granted again where they lie.
// Reads and writes stay bwrap's: they are not handled.

// SpecEnv names the variable the gateway passes the rules in, as JSON;
// the launcher takes it out of the command's environment.
const SpecEnv = "AIMON_GW_SANDBOX_EXEC"

// Spec is where execution is refused and allowed again.
type Spec struct {
	// NoExec are the paths whose files may not be executed: the writable ones.
	NoExec []string `json:"noexec"`
	// Exec are paths inside NoExec ones whose files may be.
	Exec []string `json:"exec,omitempty"`
	// Mounts are where read-write mounts are made noexec, at and below:
	// the writable ones (not Exec ones, which are mounts of their own).
	Mounts []string `json:"mounts"`
	// Traced says the gateway's tracer follows the sandbox's programs:
	// the launcher runs nothing where it is not traced (Traced).
	Traced bool `json:"traced,omitempty"`
}

// MinABI is the Landlock ABI the launcher needs: 2, for the reparenting
// right that every ruleset handles, which it grants everywhere so that a
// command still moves files between directories (rename, mv).
const MinABI = 2

// takeSpec is the Landlock spec from env, and env without it.
func takeSpec(env []string) (Spec, []string, error) {
	var spec Spec
	var raw string
	found := false
	env = slices.DeleteFunc(env, func(kv string) bool {
		if v, ok := strings.CutPrefix(kv, SpecEnv+"="); ok {
			raw, found = v, true
			return true
		}
		return false
	})
	if !found {
		return spec, env, fmt.Errorf("the gateway passed no %s", SpecEnv)
	}
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return spec, env, fmt.Errorf("%s does not read: %w", SpecEnv, err)
	}
	return spec, env, nil
}

// The three Landlock system calls are made here with golang.org/x/sys/unix's
// numbers and structures, not through go-landlock's syscall package (which
// the gateway uses): that package imports libcap's psx, which with cgo
// (go install's default) makes the sandbox program a cgo binary that loads
// the C library and starts its threads through it, 1.4 ms more for each of
// its two starts in every sandboxed command (issue 41).

// landlockABI is the kernel's Landlock ABI version.
func landlockABI() (int, error) {
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// restrict applies spec to the calling thread, which must be the one that
// executes the command.
func restrict(spec Spec) error {
	if abi, err := landlockABI(); err != nil || abi < MinABI {
		return fmt.Errorf("this kernel's Landlock (ABI %d, %v) cannot refuse execution; Linux 5.19 or later with landlock among its LSMs is needed", abi, err)
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_REFER}
	r, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return fmt.Errorf("no Landlock ruleset: %w", e)
	}
	fd := int(r)
	defer unix.Close(fd)
	if err := addRule(fd, "/", unix.LANDLOCK_ACCESS_FS_REFER); err != nil {
		return err
	}
	for _, p := range Grants(spec) {
		if err := addRule(fd, p, unix.LANDLOCK_ACCESS_FS_EXECUTE); err != nil && !errors.Is(err, errSkip) {
			return err
		}
	}
	// bwrap set no_new_privs for every thread; landlock_restrict_self
	// needs it on this one.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	// The launcher's own file, which bwrap executed as /proc/self/fd/N,
	// is not the command's to hold.
	if n, ok := strings.CutPrefix(os.Args[0], "/proc/self/fd/"); ok {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

var errSkip = errors.New("not a file or directory")

// addRule grants access on path: opened without following a symbolic
// link anywhere on it (every path given is resolved already, so a link
// there was swapped in since, and granting through it could reach a
// writable directory).
func addRule(ruleset int, path string, access uint64) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return errSkip // gone, or a link: nothing to grant
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return errSkip
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
	case unix.S_IFREG:
		if access&unix.LANDLOCK_ACCESS_FS_REFER != 0 {
			return errSkip
		}
	default:
		return errSkip
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule on %s: %w", path, e)
	}
	return nil
}

// Grants are the paths to grant execute on for spec: each path whose
// nearest enclosing root (NoExec or Exec) is an Exec one, or which has
// none, taken as high as it can be without covering a NoExec root.
func Grants(spec Spec) []string {
	roots := slices.Concat(spec.NoExec, spec.Exec)
	if len(roots) == 0 {
		return []string{"/"}
	}
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		for _, name := range entries(dir, roots) {
			p := strings.TrimSuffix(dir, "/") + "/" + name
			fi, err := os.Lstat(p)
			if err != nil || fi.Mode()&os.ModeSymlink != 0 {
				continue // a link is granted, or not, where it leads
			}
			switch {
			case fi.IsDir() && slices.ContainsFunc(roots, func(r string) bool { return r != p && within(r, p) }):
				walk(p)
			case executable(p, spec):
				out = append(out, p)
			}
		}
	}
	walk("/")
	return out
}

// entries are the names in dir: what it lists, and the next names on the
// way to the roots below it, which a directory that cannot be listed
// (mode 0711) still leads to.
func entries(dir string, roots []string) []string {
	var names []string
	if des, err := os.ReadDir(dir); err == nil {
		for _, d := range des {
			names = append(names, d.Name())
		}
	}
	for _, r := range roots {
		if r != dir && within(r, dir) {
			rest := strings.TrimPrefix(strings.TrimPrefix(r, dir), "/")
			names = append(names, strings.SplitN(rest, "/", 2)[0])
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// executable reports whether the files under p may be executed: the
// deepest root holding p decides, and none means they may.
func executable(p string, spec Spec) bool {
	best, exec := -1, true
	for _, r := range spec.NoExec {
		if within(p, r) && len(r) > best {
			best, exec = len(r), false
		}
	}
	for _, r := range spec.Exec {
		if within(p, r) && len(r) >= best {
			best, exec = len(r), true
		}
	}
	return exec
}

// within reports whether p is base or below it.
func within(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}
