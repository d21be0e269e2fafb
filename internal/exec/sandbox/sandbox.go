// Package sandbox runs a program under bubblewrap (rules R6, R8): in a user
// namespace with no capabilities and a seccomp filter on the system calls
// that reach outside it, the whole file system read-only but for the
// writable set, what the gateway reads or runs read-only even inside it,
// a private /tmp, its own PID namespace and /proc, no network unless
// allowed (all of it, or listed hosts through the gateway's proxy), a cleared environment, and --die-with-parent, so that the
// namespace and every process in it end with the program or with the
// gateway. Bash runs each command in one, a sandboxed plugin or server
// its whole process.
package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/tools"
)

var bwrapCheck struct {
	once sync.Once
	path string
	err  error
}

// bwrap returns the path of a bwrap that can run here: it must be
// installed, and able to make an unprivileged sandbox (a user namespace
// without capabilities): where it cannot, nothing runs privileged instead.
func bwrap() (string, error) {
	bwrapCheck.once.Do(func() {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			bwrapCheck.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, p, "--unshare-user", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--unshare-net", "--die-with-parent", "true")
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			bwrapCheck.err = &bwrapError{err: err, out: strings.TrimSpace(string(out))}
			return
		}
		bwrapCheck.path = p
	})
	return bwrapCheck.path, bwrapCheck.err
}

// Withheld is a sandbox the gateway would not make, though it could: a
// command in it could switch the gate off or read what it withholds
// (rules R8, R9). Its sentence says what the operator should change.
type Withheld struct{ Err error }

func (r Withheld) Error() string { return r.Err.Error() }
func (r Withheld) Unwrap() error { return r.Err }

type bwrapError struct {
	err error
	out string
}

func (e *bwrapError) Error() string {
	return "bwrap cannot make an unprivileged sandbox here (it needs user namespaces): " + e.err.Error() + ": " + e.out
}

// Available reports whether a sandbox can be made here, and why not.
func Available() error {
	_, err := bwrap()
	return err
}

// Command is the command that runs argv in dir inside sb: bwrap, with an
// environment of its own that is empty, its options from a memfd, whose
// first process, the launcher, makes what the command writes not
// executable and loads the seccomp filter from descriptor 3. The command
// is in a pids cgroup of its own where one can be made (pids.go): the
// launcher joins it where the join file moves one thread (cgroup v1),
// else /bin/sh does and executes bwrap. Where its programs are judged, a
// thread of the gateway's traces the sandbox from bwrap's PID 1 on
// (exec.go). The command's environment is drawn from env
// (os.Environ() when nil); keep names more variables to pass through as
// they are (a plugin's handshake). Call Release once it has started.
func Command(sb *tools.Sandbox, dir string, argv, env []string, keep func(name string) bool) (*exec.Cmd, error) {
	bw, err := bwrap()
	if err != nil {
		return nil, err
	}
	if err := landlockReady(); err != nil {
		return nil, err
	}
	if env == nil {
		env = os.Environ()
	}
	// What runs is the program found now, not one found later on the
	// sandbox's PATH (rule R8).
	if len(argv) > 0 && !strings.Contains(argv[0], "/") {
		if p, err := exec.LookPath(argv[0]); err == nil {
			argv = slices.Concat([]string{p}, argv[1:])
		}
	}
	a, err := args(sb, dir, argv, env, keep)
	if err != nil {
		return nil, err
	}
	f, err := filterFile()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bw)
	// bwrap's own environment is what its first process, PID 1 in the
	// sandbox, shows in /proc/1/environ: nothing.
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{f}
	network := len(sb.Hosts) > 0 && !sb.Network
	if network {
		if err := withNetwork(cmd, sb); err != nil {
			f.Close()
			return nil, err
		}
	}
	a, launcher, err := withLaunch(cmd, a, network)
	if err != nil {
		Release(cmd)
		return nil, err
	}
	fail := func(err error) (*exec.Cmd, error) {
		Release(cmd)
		finishTrace(cmd)
		Finish(cmd) // the sh's group
		return nil, err
	}
	if sb.Exec != nil {
		// The launcher's exec, then argv's, and the program after its
		// "--" (prlimit -- bash -c CMD), are the command's start.
		decided := []string{launcher, filepath.Base(argv[0])}
		if i := slices.Index(argv, "--"); i >= 0 && i+1 < len(argv) {
			decided = append(decided, filepath.Base(argv[i+1]))
		}
		if a, err = withTrace(cmd, a, sb.Exec, decided, launcher); err != nil {
			return fail(err)
		}
	}
	if h := pidsParent(); h.err == nil {
		if a, err = withPids(cmd, h, a); err != nil {
			return fail(err)
		}
	}
	if err := withArgsFile(cmd, a); err != nil {
		return fail(err)
	}
	return cmd, nil
}

// withArgsFile hands bwrap its options on a descriptor (--args FD,
// NUL-separated), which it reads and closes before the command starts:
// its argument vector, which every process in the sandbox reads in
// /proc/1/cmdline (its PID 1 is bwrap), then holds only the command, not
// the mount layout and the gateway's paths (rule R6). A memfd, so that no
// size blocks a write before bwrap reads, and nothing is left on disk.
func withArgsFile(cmd *exec.Cmd, a []string) error {
	i := slices.Index(a, "--")
	var b []byte
	for _, s := range a[:i] {
		if strings.ContainsRune(s, 0) {
			return fmt.Errorf("the sandbox's argument %q holds a NUL byte, which no path or value can hold", s)
		}
		b = append(append(b, s...), 0)
	}
	fd, err := unix.MemfdCreate("bwrap-args", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("no memory file for the sandbox's arguments: %w", err)
	}
	f := os.NewFile(uintptr(fd), "bwrap-args")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	n := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	cmd.Args = slices.Concat(cmd.Args, []string{"--args", strconv.Itoa(n)}, a[i:])
	return nil
}

// Release closes what Command opened for the start of cmd; Finish, once
// it has exited, removes what Command made for it.
func Release(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
}

// passedEnv are the variables every sandboxed command keeps (rule R6).
var passedEnv = []string{"PATH", "HOME", "LANG", "TERM"}

// args is the bwrap arguments that run argv in dir inside sb. Paths are
// bound by what they are when the sandbox is made: writable and hidden
// paths resolved, a writable one refused when a symbolic link the agent
// could have made takes it elsewhere (rule R8).
func args(sb *tools.Sandbox, dir string, argv, env []string, keep func(string) bool) ([]string, error) {
	all := slices.Contains(sb.Writable, "/")
	root := "--ro-bind"
	if all {
		root = "--bind"
	}
	// The launcher holds these two to make the writable mounts noexec,
	// drops every capability and loads the filter (package launch).
	a := []string{"--unshare-user", "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
		root, "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		// The sandbox's root is the host's root by its user id: without
		// capabilities it still owns the kernel's settings (core_pattern).
		"--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--clearenv"}
	if !sb.Network {
		a = append(a, "--unshare-net")
	}
	writable, err := resolveWritable(sb.Writable, dir)
	if err != nil {
		return nil, err
	}
	binds := map[string]string{}
	for _, w := range writable {
		binds[w] = "--bind"
	}
	// The private /tmp covers a working directory under it: bound back,
	// writable when the surface may write there.
	if real := resolved(dir); real != "" && within(real, "/tmp") && binds[real] == "" {
		binds[real] = "--ro-bind"
		if all || slices.ContainsFunc(writable, func(w string) bool { return within(real, w) }) {
			binds[real] = "--bind"
		}
	}
	exe := execBinds(sb, dir, all, writable)
	for p := range exe {
		binds[p] = "--bind"
	}
	// A directory that is a mount point cannot be renamed (EBUSY): the
	// writable ancestors of a hidden or protected path are bound onto
	// themselves, so that it stays at the path that hides or protects it.
	// Otherwise a command could move a protected directory's parent away
	// and make a new one in its place, which the gateway would read (rule
	// R8: a forged record in the load cache).
	pin := func(real string) {
		for p := filepath.Dir(real); p != "/"; p = filepath.Dir(p) {
			if binds[p] == "" && (all && !within(p, "/tmp") || slices.ContainsFunc(writable, func(w string) bool { return within(p, w) })) {
				binds[p] = "--bind"
			}
		}
	}
	var hidden []string
	for _, h := range append(slices.Clip(sb.Hidden), Concealed()...) {
		if real := resolved(h); real != "" {
			hidden = append(hidden, real)
			pin(real)
		}
	}
	// A runtime's gate directory that is absent is made first where a
	// command of this sandbox could make it (rule R9), then bound
	// read-only as the rest.
	ro := resolvedAll(sb.ReadOnly)
	writes := func(d string) bool {
		writes := all && !within(d, "/tmp") || slices.ContainsFunc(slices.Collect(maps.Keys(binds)), func(b string) bool { return binds[b] == "--bind" && within(d, b) })
		return writes && !slices.ContainsFunc(ro, func(r string) bool { return within(d, r) })
	}
	if err := makeGateDirs(writes); err != nil {
		return nil, Withheld{err}
	}
	if err := shadowable(writes); err != nil {
		return nil, Withheld{err}
	}
	protected := Protected()
	// A runtime's settings directory anywhere below where the command may
	// write (a package's .claude in a monorepo) is the gate of a runtime
	// started there later (rule R9): those a bounded walk finds are
	// read-only too. One made by this command is not: the runtimes' own
	// managed-hooks-only switches are the remedy (README).
	// (Not the host's /tmp, which the sandbox does not see, but the
	// working directory bound back into it; from there alone when the
	// command may write everywhere.)
	var roots []string
	if real := resolved(dir); real != "" && binds[real] == "--bind" || all {
		roots = append(roots, real)
	}
	if !all {
		for _, w := range writable {
			if !within(w, "/tmp") {
				roots = append(roots, w)
			}
		}
	}
	protected = append(protected, NestedGateDirs(roots, nestedGateBudget)...)
	slices.Sort(protected)
	protected = slices.Compact(protected)
	for _, r := range protected {
		pin(r)
	}
	// While the gateway's sandbox program is absent, no command may put
	// one where the next gateway would start it (ProtectPrograms): its
	// directory is read-only where the sandbox could write it.
	var guarded []string
	for _, d := range absentPrograms() {
		if all && !within(d, "/tmp") || slices.ContainsFunc(slices.Collect(maps.Keys(binds)), func(b string) bool { return binds[b] == "--bind" && within(d, b) }) {
			guarded = append(guarded, d)
			pin(d)
		}
	}
	readOnly := slices.Concat(ro, protected)
	if err := relinkable(func(d string) bool {
		writes := all && !within(d, "/tmp") || slices.ContainsFunc(writable, func(w string) bool { return within(d, w) })
		return writes && !slices.ContainsFunc(slices.Concat(readOnly, guarded), func(r string) bool { return within(d, r) })
	}); err != nil {
		return nil, Withheld{err}
	}
	// Parents before children, so a deeper bind is not covered.
	for _, p := range slices.Sorted(maps.Keys(binds)) {
		a = append(a, binds[p], p, p)
	}
	// After the writable binds, so that they win (rule R8).
	for _, r := range readOnly {
		a = append(a, "--ro-bind", r, r)
	}
	for _, d := range guarded {
		a = append(a, "--ro-bind", d, d)
	}
	// Root or not, no command moves itself out of its pids cgroup or
	// raises its bound (pids.go), and no sysfs file is written.
	a = append(a, "--ro-bind-try", "/sys", "/sys")
	if h := pidsParent(); h.err == nil && !within(h.mount, "/sys") {
		a = append(a, "--ro-bind", h.mount, h.mount)
	}
	for _, h := range hidden {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			a = append(a, "--tmpfs", h, "--remount-ro", h)
		} else if err == nil {
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if slices.Contains(passedEnv, name) || strings.HasPrefix(name, "LC_") || slices.Contains(sb.Env, name) || keep != nil && keep(name) {
			a = append(a, "--setenv", name, value)
		}
	}
	a = append(a, "--setenv", "TMPDIR", "/tmp")
	spec := execSpec(binds, exe, all, readOnly, dir)
	spec = elsewhere(spec, resolvedAll(sb.NoExec), slices.Concat(readOnly, execRoots(sb, dir)))
	spec.Traced = sb.Exec != nil
	a = append(a, specArgs(spec)...)
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	return append(append(a, "--"), argv...), nil
}

// resolveWritable resolves the writable entries that exist. A symbolic
// link on the way to one that lies in the working directory or in another
// writable entry is the agent's to make, and refused (rule R8); one above
// them is the system's (/var/run), and followed.
func resolveWritable(ws []string, dir string) ([]string, error) {
	var out []string
	for _, w := range ws {
		if w == "/" {
			continue
		}
		real := resolved(w)
		if real == "" {
			continue
		}
		if real != w {
			if link := agentLink(w, dir, ws); link != "" {
				return nil, fmt.Errorf("the writable path %s leads through the symbolic link %s to %s, outside it; a command may not write through a link made where commands write. Remove the link, or write the real path into the policy", w, link, real)
			}
		}
		out = append(out, real)
	}
	return out, nil
}

// AgentLink is the first symbolic link on the way to path that lies in
// path itself or in the working directory dir: one the agent could have
// made to take a tool anchored at path elsewhere; "" when none does.
func AgentLink(path, dir string) string { return agentLink(path, dir, []string{path}) }

// agentLink is the first symbolic link on the way to w that lies inside
// dir or inside a writable entry other than "/"; "" when none does.
func agentLink(w, dir string, ws []string) string {
	for p := w; p != "/" && p != "."; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		inside := dir != "" && dir != "/" && p != dir && within(p, dir)
		for _, o := range ws {
			inside = inside || o != "/" && within(p, o)
		}
		if inside {
			return p
		}
	}
	return ""
}

// resolved is p with its symbolic links followed; "" when it does not exist.
func resolved(p string) string {
	if p == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return real
}

// A resolver follows the symbolic links of absolute paths as
// filepath.EvalSymlinks does, remembering where each directory on the way
// led, for one batch of paths: the paths one Protect names share most of
// their directories, which EvalSymlinks would lstat again for each (the
// hook's few dozen took a tenth of its decision). A later batch resolves
// afresh, so a link swapped since is followed where it leads then.
type resolver map[string]string

// resolve is resolved(p), from what r remembers of p's directories.
func (r resolver) resolve(p string) string {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return resolved(p) // a .. after a link goes up from where it leads
	}
	if p == "/" {
		return p
	}
	if real, ok := r[p]; ok {
		return real
	}
	real := ""
	if dir := r.resolve(filepath.Dir(p)); dir != "" {
		next := filepath.Join(dir, filepath.Base(p))
		if fi, err := os.Lstat(next); err == nil {
			real = next
			if fi.Mode()&os.ModeSymlink != 0 {
				real = resolved(next)
			}
		}
	}
	r[p] = real
	return real
}

// resolvedAll are the paths of ps that exist, resolved.
func resolvedAll(ps []string) []string {
	var out []string
	for _, p := range ps {
		if real := resolved(p); real != "" {
			out = append(out, real)
		}
	}
	return out
}

// within reports whether p is base or below it.
func within(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}
