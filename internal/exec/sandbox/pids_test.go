package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	testneed "aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/tools"
)

// needPids fails the test without a pids cgroup the gateway can make under
// CI as root (where nothing else bounds a command's processes), and skips
// it elsewhere.
func needPids(t *testing.T) pidsHome {
	t.Helper()
	h := pidsParent()
	if h.err != nil {
		// Only root can make one: as another user it is not missing.
		if os.Getuid() != 0 {
			t.Skip(h.err)
		}
		testneed.Missing(t, "a pids cgroup is needed as root and cannot be made here: %v", h.err)
	}
	return h
}

// lowered lowers the bound on a sandbox's processes for the test.
func lowered(t *testing.T, n int) {
	old := maxProcesses
	maxProcesses = func() int { return n }
	t.Cleanup(func() { maxProcesses = old })
}

// allowAll judges a sandbox's programs and lets each run: the tracer
// starts the sandbox.
func allowAll() *tools.ExecJudge {
	return &tools.ExecJudge{Decide: func([]string) (string, bool) { return "", false }}
}

// TestR8PidsCgroupBoundsACommand: a command that starts more processes
// than the bound gets fork failures, cannot move itself out of its group
// or raise its bound even with everything writable, and the group is gone
// once the call is finished; judged or not.
func TestR8PidsCgroupBoundsACommand(t *testing.T) {
	need(t)
	h := needPids(t)
	lowered(t, 8)
	for _, sb := range []*tools.Sandbox{{Writable: []string{"/"}}, {Writable: []string{"/"}, Exec: allowAll()}} {
		t.Run(fmt.Sprintf("traced=%v", sb.Exec != nil), func(t *testing.T) { boundsACommand(t, h, sb) })
	}
}

func boundsACommand(t *testing.T, h pidsHome, sb *tools.Sandbox) {
	tests := []struct {
		note, script, want string
		fail               bool
	}{
		{note: "past the bound", script: `i=0; while [ $i -lt 20 ]; do sleep 100 & i=$((i+1)); done; echo all started`, want: "Cannot fork", fail: true},
		{note: "moving out of the group", script: `echo $$ > ` + h.mount + `/cgroup.procs`, fail: true},
		{note: "raising the bound", script: `for f in ` + h.dir + `/aimon-gw-*/pids.max; do echo max > $f || exit 1; done`, fail: true},
		{note: "within the bound", script: `sleep 0 & sleep 0 & wait; echo ok`, want: "ok"},
		// sh is one of the eight: whoever joins the group (the launcher,
		// or sh before bwrap, for which the bound is two higher), the
		// command has the same seven more.
		{note: "up to the bound", script: `for i in 1 2 3 4 5 6 7; do sleep 0.2 & done; wait; echo ok`, want: "ok"},
		{note: "one past the bound", script: `for i in 1 2 3 4 5 6 7 8; do sleep 0.2 & done; wait; echo all started`, want: "Cannot fork", fail: true},
	}
	for _, tt := range tests {
		cmd, err := Command(sb, "", []string{"sh", "-c", tt.script}, []string{"PATH=/usr/bin:/bin"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.note, err)
		}
		group := groupOf(cmd)
		if !strings.HasPrefix(group, h.dir+"/aimon-gw-") {
			t.Fatalf("%s: the command joins no pids group: %q", tt.note, cmd.Args)
		}
		out, err := cmd.CombinedOutput()
		Release(cmd)
		Finish(cmd)
		if (err != nil) != tt.fail || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: err %v, output:\n%s", tt.note, err, out)
		}
		if _, err := os.Stat(group); !os.IsNotExist(err) {
			t.Errorf("%s: the group %s is left (%v)", tt.note, group, err)
		}
	}
}

// shPids makes cmd join a new pids group of h's through /bin/sh, as a
// group with no tasks file is joined.
func shPids(cmd *exec.Cmd, h pidsHome) error {
	g, err := newPidsGroup(h.dir, maxProcesses())
	if err == nil {
		joinBySh(cmd, g)
	}
	return err
}

// TestR8PidsGroupIsJoinedBeforeTheProgramRuns: joined through sh (a
// group without a tasks file), the program is in its group from its
// first instruction; a group that cannot be joined runs nothing; Finish
// kills what is left in a group and removes it.
func TestR8PidsGroupIsJoinedBeforeTheProgramRuns(t *testing.T) {
	h := needPids(t)
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	if err := shPids(cmd, h); err != nil {
		t.Fatal(err)
	}
	group := strings.TrimPrefix(cmd.Args[3], groupTag)
	out, err := cmd.Output()
	Release(cmd)
	Finish(cmd)
	if err != nil || !strings.Contains(string(out), "/"+filepath.Base(group)+"\n") {
		t.Errorf("the program is not in %s (%v):\n%s", group, err, out)
	}

	ran := filepath.Join(t.TempDir(), "ran")
	cmd = exec.Command("/usr/bin/touch", ran)
	if err := shPids(cmd, h); err != nil {
		t.Fatal(err)
	}
	removeGroup(strings.TrimPrefix(cmd.Args[3], groupTag))
	err = cmd.Run()
	Release(cmd)
	if _, serr := os.Stat(ran); err == nil || serr == nil {
		t.Errorf("a program whose group was gone ran (%v)", err)
	}

	cmd = exec.Command("/bin/sleep", "100")
	if err := shPids(cmd, h); err != nil {
		t.Fatal(err)
	}
	group = strings.TrimPrefix(cmd.Args[3], groupTag)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	Release(cmd)
	for { // until sleep is in its group (sh execs it after it joined)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if string(comm) == "sleep\n" {
			break
		}
		time.Sleep(time.Millisecond)
	}
	Finish(cmd)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the process left in the group was not killed: %v", err)
	}
	if _, err := os.Stat(group); !os.IsNotExist(err) {
		t.Errorf("the group %s is left (%v)", group, err)
	}
}

// TestR8LauncherJoinsThePidsGroup: where the group has a tasks file
// (cgroup v1), the sandbox's launcher joins it before the command runs,
// with no sh before bwrap, traced or not: the command is in the group,
// bwrap's PID 1 is not; a group that cannot be joined runs nothing,
// saying so; Finish kills what is left in the group and removes it.
func TestR8LauncherJoinsThePidsGroup(t *testing.T) {
	need(t)
	h := needPids(t)
	g, err := newPidsGroup(h.dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	g.procs.Close()
	removeGroup(g.dir)
	if !g.thread {
		t.Skip("the group has no tasks file here (cgroup v2): sh joins it")
	}
	dir := t.TempDir()
	for _, j := range []*tools.ExecJudge{nil, allowAll()} {
		sb := &tools.Sandbox{Writable: []string{dir}, Exec: j}
		cmd, err := Command(sb, dir, []string{"sh", "-c", `cat /proc/self/cgroup; echo tasks; cat "$0"/tasks`}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		group := groupOf(cmd)
		cmd.Args = append(cmd.Args, group) // $0
		out, err := cmd.CombinedOutput()
		Release(cmd)
		Finish(cmd)
		cgroup, tasks, _ := strings.Cut(string(out), "tasks\n")
		if cmd.Path == "/bin/sh" || group == "" || err != nil || !strings.Contains(cgroup, ":/"+filepath.Base(group)+"\n") {
			t.Fatalf("traced %v: the command is not in its group %q, joined by its launcher (%v, %s %q):\n%s", j != nil, group, err, cmd.Path, cmd.Args, out)
		}
		if ts := strings.Fields(tasks); len(ts) == 0 || slices.Contains(ts, "1") {
			t.Errorf("traced %v: the group's tasks are %q: bwrap's PID 1 is in it, or the command is not", j != nil, ts)
		}

		ran := filepath.Join(dir, "ran")
		cmd, err = Command(sb, dir, []string{"touch", ran}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		removeGroup(groupOf(cmd))
		out, err = cmd.CombinedOutput()
		Release(cmd)
		Finish(cmd)
		if _, serr := os.Stat(ran); err == nil || serr == nil || !strings.Contains(string(out), "pids cgroup could not be joined") {
			t.Errorf("traced %v: a program whose group was gone ran, or the call does not say why (%v): %s", j != nil, err, out)
		}

		cmd, err = Command(sb, dir, []string{"sh", "-c", "echo started; exec sleep 100"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		group = groupOf(cmd)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		Release(cmd)
		line := make([]byte, 8)
		if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "started\n" {
			t.Fatalf("traced %v: the command did not start: %q %v", j != nil, line, err)
		}
		removeGroup(group) // as Finish does where bwrap's end is not yet seen: kills the group
		if err := cmd.Wait(); err == nil {
			t.Errorf("traced %v: the process left in the group was not killed", j != nil)
		}
		Finish(cmd)
		if _, err := os.Stat(group); !os.IsNotExist(err) {
			t.Errorf("traced %v: the group %s is left (%v)", j != nil, group, err)
		}
	}
}

// TestR8NoPidsGroupWhereNoneCanBeMade: a directory that is not a pids
// cgroup, or that does not exist, gives no group and leaves nothing; as
// root that refuses, with a sentence, and not as another user.
func TestR8NoPidsGroupWhereNoneCanBeMade(t *testing.T) {
	plain := t.TempDir()
	tests := []struct {
		note, parent, want string
	}{
		{note: "a plain directory", parent: plain, want: "not a pids cgroup"},
		{note: "a directory that does not exist", parent: filepath.Join(plain, "none"), want: "no pids cgroup can be made"},
	}
	for _, tt := range tests {
		g, err := newPidsGroup(tt.parent, 8)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: group %v, err %v, want %q", tt.note, g, err, tt.want)
		}
	}
	if left, _ := os.ReadDir(plain); len(left) != 0 {
		t.Errorf("a failed group left %v", left)
	}
	none := pidsHome{err: os.ErrPermission}
	if err := bounded(none, 0); err == nil || !strings.Contains(err.Error(), "Run the gateway as a user other than root") {
		t.Errorf("as root with no group: %v", err)
	}
	if err := bounded(none, 65534); err != nil {
		t.Errorf("as another user with no group: %v", err)
	}
	if err := bounded(pidsHome{dir: plain}, 0); err != nil {
		t.Errorf("as root with a group: %v", err)
	}
}

// TestR8FindPids: where groups are made, from /proc/self/cgroup and
// mountinfo as the kernel writes them.
func TestR8FindPids(t *testing.T) {
	root := t.TempDir()
	v2 := filepath.Join(root, "unified")
	os.MkdirAll(filepath.Join(v2, "user.slice/gw"), 0o755)
	os.WriteFile(filepath.Join(v2, "user.slice/gw/cgroup.controllers"), []byte("cpu memory pids\n"), 0o644)
	nopids := filepath.Join(root, "nopids")
	os.MkdirAll(filepath.Join(nopids, "gw"), 0o755)
	os.WriteFile(filepath.Join(nopids, "gw/cgroup.controllers"), []byte("cpu memory\n"), 0o644)
	v1 := "35 25 0:30 / /sys/fs/cgroup/pids rw,nosuid shared:13 - cgroup cgroup rw,pids\n"
	tests := []struct {
		note, env, cgroup, mountinfo string
		dir, mount, err              string
	}{
		{note: "v1 pids, the gateway at the root", cgroup: "8:pids:/\n0::/\n", mountinfo: v1,
			dir: "/sys/fs/cgroup/pids", mount: "/sys/fs/cgroup/pids"},
		{note: "v1 pids in a namespace whose root is a subpath", cgroup: "3:cpu,pids:/sub/gw\n",
			mountinfo: "35 25 0:30 /sub /sys/fs/cgroup/pids rw - cgroup cgroup rw,cpu,pids\n",
			dir:       "/sys/fs/cgroup/pids/gw", mount: "/sys/fs/cgroup/pids"},
		{note: "v1 pids wins over v2", cgroup: "8:pids:/\n0::/user.slice/gw\n",
			mountinfo: "40 25 0:31 / " + v2 + " rw - cgroup2 cgroup2 rw\n" + v1, dir: "/sys/fs/cgroup/pids"},
		{note: "v2 with pids", cgroup: "0::/user.slice/gw\n", mountinfo: "40 25 0:31 / " + v2 + " rw - cgroup2 cgroup2 rw\n",
			dir: v2 + "/user.slice/gw", mount: v2},
		{note: "v2 without pids", cgroup: "0::/gw\n", mountinfo: "40 25 0:31 / " + nopids + " rw - cgroup2 cgroup2 rw\n",
			err: "no pids controller"},
		{note: "no cgroup mounted", cgroup: "0::/gw\n", mountinfo: "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n", err: "no pids controller"},
		{note: "the variable names a group", env: "/sys/fs/cgroup/pids/delegated/", cgroup: "0::/\n", mountinfo: v1,
			dir: "/sys/fs/cgroup/pids/delegated", mount: "/sys/fs/cgroup/pids"},
		{note: "the variable names no hierarchy", env: "/var/tmp/x", cgroup: "0::/\n", mountinfo: v1, err: "not in a mounted cgroup hierarchy"},
		{note: "an escaped mount point", cgroup: "8:pids:/\n",
			mountinfo: `35 25 0:30 / /mnt/cg\040pids rw - cgroup cgroup rw,pids` + "\n", dir: "/mnt/cg pids"},
	}
	for i, tt := range tests {
		cg, mi := filepath.Join(root, "cgroup"+string(rune('a'+i))), filepath.Join(root, "mountinfo"+string(rune('a'+i)))
		os.WriteFile(cg, []byte(tt.cgroup), 0o644)
		os.WriteFile(mi, []byte(tt.mountinfo), 0o644)
		h := findPids(tt.env, cg, mi)
		if tt.err != "" {
			if h.err == nil || !strings.Contains(h.err.Error(), tt.err) {
				t.Errorf("%s: %+v, want the error %q", tt.note, h, tt.err)
			}
			continue
		}
		if h.err != nil || h.dir != tt.dir || tt.mount != "" && h.mount != tt.mount {
			t.Errorf("%s: %+v, want %s in %s", tt.note, h, tt.dir, tt.mount)
		}
	}
	if h := findPids("", filepath.Join(root, "missing"), filepath.Join(root, "mountinfoa")); h.err == nil {
		t.Errorf("an unreadable /proc/self/cgroup: %+v", h)
	}
}

// BenchmarkR8PidsGroup: one sandboxed true with its pids group (made,
// joined by the launcher where it has a tasks file, else through /bin/sh,
// removed) against the same without one, in one
// loop; with/without is the ratio, added-ms what the group adds to a call.
func BenchmarkR8PidsGroup(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	h := pidsParent()
	if h.err != nil {
		b.Skip(h.err)
	}
	dir := b.TempDir()
	run := func(home pidsHome) { benchRun(b, dir, []string{"true"}, nil, home) }
	var with, without time.Duration
	for b.Loop() {
		t0 := time.Now()
		run(h)
		t1 := time.Now()
		run(pidsHome{err: os.ErrNotExist})
		with += t1.Sub(t0)
		without += time.Since(t1)
	}
	b.ReportMetric(float64(with)/float64(without), "with/without")
	b.ReportMetric(float64(with-without)/float64(b.N)/1e6, "added-ms")
}

// TestR8SweepRemovesLeftGroups: the empty groups of this gateway and of
// one no longer running go; another live gateway's, a group still in use
// (not empty) and other directories stay.
func TestR8SweepRemovesLeftGroups(t *testing.T) {
	parent := t.TempDir()
	dead := 4194000
	for ; dead > 1; dead-- {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", dead)); os.IsNotExist(err) {
			break
		}
	}
	tests := []struct {
		note, name  string
		busy, stays bool
	}{
		{note: "this gateway's, empty", name: fmt.Sprintf("aimon-gw-%d-3", os.Getpid())},
		{note: "this gateway's, in use", name: fmt.Sprintf("aimon-gw-%d-4", os.Getpid()), busy: true, stays: true},
		{note: "a gateway's no longer running", name: fmt.Sprintf("aimon-gw-%d-1", dead)},
		{note: "a live gateway's", name: "aimon-gw-1-2", stays: true},
		{note: "not a group of ours", name: "other-1-2", stays: true},
		{note: "a name without a pid", name: "aimon-gw-x-2", stays: true},
	}
	for _, tt := range tests {
		os.Mkdir(filepath.Join(parent, tt.name), 0o755)
		if tt.busy {
			os.WriteFile(filepath.Join(parent, tt.name, "task"), nil, 0o644)
		}
	}
	sweep(parent)
	for _, tt := range tests {
		if _, err := os.Stat(filepath.Join(parent, tt.name)); (err == nil) != tt.stays {
			t.Errorf("%s: stat %v, want it to stay %v", tt.note, err, tt.stays)
		}
	}
}
