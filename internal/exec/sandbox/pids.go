package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/exec/sandbox/launch"
)

// A sandbox's processes are bounded by a pids cgroup of its own when the
// gateway can make one (rule R8): the kernel does not hold a process whose
// real user is root to RLIMIT_NPROC, so as root prlimit --nproc bounds
// nothing. The group is made under the gateway's own pids cgroup (cgroup
// v1's pids hierarchy, or v2's with pids enabled below it), or under the
// one PidsCgroupEnv names, and its pids.max set. The command is in it
// from its first instruction: given the group's join file open on a
// descriptor, a process writes 0 there (the writer moves itself, with the
// opener's credentials checked) and closes it before it runs anything
// else. If the write fails, nothing runs. Finish removes the group when
// the call ends.
//
// The join file is v1's tasks where there is one, else cgroup.procs. A
// write to cgroup.procs moves a whole thread group, which takes the
// kernel's global cgroup_threadgroup_rwsem for writing: a percpu rwsem,
// whose writer waits for an RCU grace period unless another writer came
// just before (10 to 20 ms here, v1 and v2 alike, most of a sandboxed
// call's start). A write of 0 to tasks moves only the writing thread,
// which cannot exit or exec under the kernel's hands, so the kernel skips
// that lock (Linux 5.13's "cgroup: optimize single thread migration").
// Where there is tasks, the writer is the sandbox's launcher (package
// launch), on the thread that executes the command, before it executes
// anything: only the command is in the group, not bwrap and its PID 1,
// whose end (the PID namespace's, its mounts') the group's removal does
// not wait for. The launcher's other threads, made before, stay out, and
// its exec ends them (de_thread). Where there is not, the command of cmd
// is /bin/sh, which joins and executes bwrap: the group holds bwrap and
// its PID 1 too, two more than the bound.
// Every sandbox binds /sys and the hierarchy read-only, so that no command
// moves itself out or raises pids.max, root or not.

// PidsCgroupEnv names a pids cgroup directory (v1, or v2 with pids
// enabled) the gateway makes its sandboxes' groups in, instead of its own
// cgroup: one delegated to it when it does not run as root.
const PidsCgroupEnv = "AIMON_GW_PIDS_CGROUP"

// ProcessesEnv lowers the bound on a sandbox's processes (threads count),
// DefaultProcesses, to test it or to hold commands tighter.
const ProcessesEnv = "AIMON_GW_SANDBOX_PROCESSES"

// DefaultProcesses bounds the processes of one sandbox.
const DefaultProcesses = 1024

// MaxProcesses is the bound on one sandbox's processes: DefaultProcesses,
// or a lower one that ProcessesEnv gives.
var MaxProcesses = sync.OnceValue(func() int {
	v := os.Getenv(ProcessesEnv)
	if v == "" {
		return DefaultProcesses
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > DefaultProcesses {
		slog.Warn("the bound on a sandbox's processes must be a whole number from 1 to 1024; the default holds", "variable", ProcessesEnv, "value", v)
		return DefaultProcesses
	}
	return n
})

// maxProcesses is MaxProcesses, which tests lower.
var maxProcesses = MaxProcesses

// pidsHome is where a sandbox's pids group is made, and the hierarchy's
// mount, which sandboxes bind read-only; err says why none can be made.
type pidsHome struct {
	dir, mount string
	err        error
}

var pidsParent = sync.OnceValue(func() pidsHome {
	h := findPids(os.Getenv(PidsCgroupEnv), "/proc/self/cgroup", "/proc/self/mountinfo")
	if h.err == nil {
		sweep(h.dir)
		// A group can be made and bounded here, or there is none to use.
		var g *pidsGroup
		if g, h.err = newPidsGroup(h.dir, 1); h.err == nil {
			g.procs.Close()
			h.err = removeGroup(g.dir)
		}
	}
	return h
})

// Bounded says why sandboxed commands' processes cannot be bounded here:
// the gateway runs as root and can make no pids cgroup. nil when a pids
// cgroup bounds them, or when the gateway is not root, where prlimit's
// count within the sandbox's user namespace does.
func Bounded() error { return bounded(pidsParent(), os.Getuid()) }

func bounded(h pidsHome, uid int) error {
	if h.err == nil || uid != 0 {
		return nil
	}
	return fmt.Errorf("the gateway runs as root, which the kernel does not hold to a process limit, and no pids cgroup can be made to bound a command's processes instead (%v). Run the gateway as a user other than root, or give it a pids cgroup it may write (cgroup v1's pids hierarchy, or v2 with pids delegated; %s names one)", h.err, PidsCgroupEnv)
}

// findPids finds where to make pids groups: in dir when given, else in the
// process's own pids cgroup as cgroupFile and mountinfo show it (v1's pids
// hierarchy first, then v2's).
func findPids(dir, cgroupFile, mountinfo string) pidsHome {
	mounts, err := cgroupMounts(mountinfo)
	if err != nil {
		return pidsHome{err: err}
	}
	if dir != "" {
		dir = filepath.Clean(dir)
		m := ""
		for _, c := range mounts {
			if within(dir, c.point) && len(c.point) > len(m) {
				m = c.point
			}
		}
		if m == "" {
			return pidsHome{err: fmt.Errorf("%s=%s is not in a mounted cgroup hierarchy", PidsCgroupEnv, dir)}
		}
		return pidsHome{dir: dir, mount: m}
	}
	data, err := os.ReadFile(cgroupFile)
	if err != nil {
		return pidsHome{err: err}
	}
	var v1, v2 string
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case hasWord(parts[1], ",", "pids"):
			v1 = parts[2]
		}
	}
	for _, c := range mounts {
		own := v2
		if c.v1Pids {
			own = v1
		} else if c.fs != "cgroup2" {
			continue
		}
		if own == "" || !within(own, c.root) {
			continue
		}
		d := filepath.Join(c.point, strings.TrimPrefix(own, c.root))
		if c.v1Pids {
			return pidsHome{dir: d, mount: c.point}
		}
		if ctl, _ := os.ReadFile(filepath.Join(d, "cgroup.controllers")); hasWord(string(ctl), " ", "pids") {
			return pidsHome{dir: d, mount: c.point}
		}
	}
	return pidsHome{err: errors.New("the gateway's cgroup has no pids controller (neither a cgroup v1 pids hierarchy nor pids in cgroup v2's cgroup.controllers)")}
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	root, point, fs string
	v1Pids          bool
}

// cgroupMounts reads the cgroup hierarchies from mountinfo, v1's pids
// hierarchy first.
func cgroupMounts(mountinfo string) ([]cgroupMount, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var v1, v2 []cgroupMount
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		// id parent major:minor root point options [optional...] - fs source super
		pre, post, ok := strings.Cut(s.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 3 {
			continue
		}
		m := cgroupMount{root: launch.Unescape(a[3]), point: launch.Unescape(a[4]), fs: b[0]}
		switch {
		case m.fs == "cgroup" && hasWord(b[2], ",", "pids"):
			m.v1Pids = true
			v1 = append(v1, m)
		case m.fs == "cgroup2":
			v2 = append(v2, m)
		}
	}
	return append(v1, v2...), s.Err()
}

func hasWord(s, sep, w string) bool {
	for _, f := range strings.Split(strings.TrimSpace(s), sep) {
		if f == w {
			return true
		}
	}
	return false
}

// pidsGroup is one sandbox's pids cgroup, its join file (tasks in v1,
// else cgroup.procs) open to write; thread when that is tasks, which
// moves only the thread that writes.
type pidsGroup struct {
	dir    string
	procs  *os.File
	thread bool
}

var groupSeq atomic.Int64

// newPidsGroup makes a pids group under parent bounded to max tasks. In
// cgroup v2, pids is enabled in parent's subtree first where it is not.
func newPidsGroup(parent string, max int) (*pidsGroup, error) {
	if ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control")); err == nil && !hasWord(string(ctl), " ", "pids") {
		// Refused where parent holds processes of its own (v2's rule of
		// no internal processes); the check of pids.max below says so.
		writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+pids")
	}
	var dir string
	for {
		dir = filepath.Join(parent, fmt.Sprintf("aimon-gw-%d-%d", os.Getpid(), groupSeq.Add(1)))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("no pids cgroup can be made in %s: %w", parent, err)
		}
	}
	if err := writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(max)); err != nil {
		removeGroup(dir)
		return nil, fmt.Errorf("%s is not a pids cgroup the gateway may bound (%v)", parent, err)
	}
	procs, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	thread := err == nil
	if err != nil { // v2, or a v1 group delegated without its tasks
		procs, err = os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
	}
	if err != nil {
		removeGroup(dir)
		return nil, fmt.Errorf("the pids cgroup %s cannot be joined: %w", dir, err)
	}
	return &pidsGroup{dir: dir, procs: procs, thread: thread}, nil
}

// writeFile writes s to the existing file name (a cgroup's, which cannot
// be created).
func writeFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// joinScript is what /bin/sh runs to join the group on descriptor fd and
// execute bwrap: with no environment of its own (dash exports PWD).
func joinScript(fd int) string {
	return fmt.Sprintf(`unset PWD; echo 0 >&%[1]d && exec %[1]d>&- && exec "$@"`, fd)
}

// groupTag marks the argument of the joining sh that names its group.
const groupTag = "aimon-gw-pids:"

// JoinEnv names the variable that gives the launcher the descriptor of
// its pids group's tasks file, to join (package launch).
const JoinEnv = launch.JoinEnv

// withPids puts the sandbox of cmd, bwrap with the arguments a, in a new
// pids group of the parent's: its launcher joins it where the group has
// a tasks file, else /bin/sh does before it executes bwrap. It returns
// bwrap's arguments.
func withPids(cmd *exec.Cmd, h pidsHome, a []string) ([]string, error) {
	g, err := newPidsGroup(h.dir, maxProcesses())
	if err != nil {
		return nil, err
	}
	if !g.thread {
		// bwrap and its PID 1 are in the group too.
		if err := writeFile(filepath.Join(g.dir, "pids.max"), strconv.Itoa(maxProcesses()+2)); err != nil {
			g.procs.Close()
			removeGroup(g.dir)
			return nil, fmt.Errorf("the pids cgroup %s cannot be bounded: %w", g.dir, err)
		}
		joinBySh(cmd, g)
		return a, nil
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, g.procs)
	groups.Store(cmd, g.dir)
	i := slices.Index(a, "--")
	return slices.Concat(a[:i], []string{"--setenv", JoinEnv, strconv.Itoa(fd)}, a[i:]), nil
}

// groups are the pids groups that sandboxes' launchers join, by their
// commands, until Finish.
var groups sync.Map // *exec.Cmd → directory

// joinBySh makes cmd, bwrap, start through /bin/sh, which joins g first.
func joinBySh(cmd *exec.Cmd, g *pidsGroup) {
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, g.procs)
	cmd.Args = append([]string{"sh", "-c", joinScript(fd), groupTag + g.dir}, cmd.Args...)
	cmd.Path = "/bin/sh"
}

// Sweep removes the empty pids groups of this gateway and of gateways no
// longer running, which a process that exited before its Finish (a plugin
// at the gateway's exit, a gateway killed) left; serve and mcp call it as
// they end, and the first sandbox before it is made.
func Sweep() {
	if h := pidsParent(); h.err == nil {
		sweep(h.dir)
	}
}

// sweep removes the groups in parent named for this process or for one
// that no longer exists. rmdir removes only an empty group: one in use
// stays, and another gateway's (its process lives) is not touched.
func sweep(parent string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "aimon-gw-")
		ps, _, ok2 := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(ps)
		if !ok || !ok2 || err != nil || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); pid == os.Getpid() || errors.Is(err, os.ErrNotExist) {
			unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}

// Finish ends what is left of a sandbox cmd ran in and removes its pids
// group, once cmd has exited; nothing when it had none.
func Finish(cmd *exec.Cmd) {
	finishTrace(cmd)
	dir := groupOf(cmd)
	groups.Delete(cmd)
	if dir == "" {
		return
	}
	if err := removeGroup(dir); err != nil {
		slog.Warn("a sandbox's pids cgroup cannot be removed", "cgroup", dir, "cause", err)
	}
}

// groupOf is the pids group cmd joins, its launcher or the joining sh
// (named in its arguments); "" when it joins none.
func groupOf(cmd *exec.Cmd) string {
	if dir, ok := groups.Load(cmd); ok {
		return dir.(string)
	}
	if cmd.Path != "/bin/sh" || len(cmd.Args) < 4 || !strings.HasPrefix(cmd.Args[3], groupTag) {
		return ""
	}
	return strings.TrimPrefix(cmd.Args[3], groupTag)
}

// removeGroup removes a pids group, killing what is still in it: after
// bwrap exits, its PID namespace is torn down asynchronously, so the group
// may hold dying processes for a moment. It tries for about two seconds.
func removeGroup(dir string) error {
	wait := 500 * time.Microsecond
	for i := 0; ; i++ {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || wait > time.Second {
			return err
		}
		if i > 0 {
			killGroup(dir)
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// killGroup kills the processes in a group: cgroup.kill in v2, each one
// listed in v1. Only a group still busy after bwrap exited gets here; a
// listed PID could in principle be reaped and reused before the kill, a
// window of microseconds on a process the kernel is already tearing down.
func killGroup(dir string) {
	if writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		return
	}
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 && pid != os.Getpid() {
			unix.Kill(pid, unix.SIGKILL)
		}
	}
}
