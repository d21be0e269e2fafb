package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/testkit/need"
)

// testPidsCgroup makes a pids cgroup under the test's own for the gateway
// to make its groups in, owned by the gateway's user (a delegation), and
// removes it at the end. It needs root; under CI (root) it must work.
func testPidsCgroup(t *testing.T, u gatewayUser) string {
	t.Helper()
	own, err := ownPidsCgroup()
	if err == nil && os.Geteuid() != 0 {
		err = os.ErrPermission
	}
	var dir string
	if err == nil {
		dir, err = os.MkdirTemp(own, "aimon-gw-test-")
	}
	if err != nil {
		need.Missing(t, "a pids cgroup is needed (CI runs as root, with cgroups): %v", err)
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				syscall.Rmdir(filepath.Join(dir, e.Name()))
			}
		}
		if err := syscall.Rmdir(dir); err != nil {
			t.Errorf("the test's cgroup %s: %v", dir, err)
		}
	})
	if u.uid >= 0 {
		entries, _ := os.ReadDir(dir)
		os.Lchown(dir, u.uid, u.gid)
		for _, e := range entries {
			os.Lchown(filepath.Join(dir, e.Name()), u.uid, u.gid)
		}
	}
	return dir
}

// ownPidsCgroup is the test's pids cgroup at its usual mount: cgroup v1's
// pids hierarchy, or v2's with pids.
func ownPidsCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && strings.Contains(","+parts[1]+",", ",pids,") {
			return filepath.Join("/sys/fs/cgroup/pids", parts[2]), nil
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if own, ok := strings.CutPrefix(line, "0::"); ok {
			dir := filepath.Join("/sys/fs/cgroup", own)
			if ctl, _ := os.ReadFile(dir + "/cgroup.controllers"); strings.Contains(string(ctl), "pids") {
				return dir, nil
			}
		}
	}
	return "", os.ErrNotExist
}

// bashOnly gives the layout a policy of Bash alone: the layout's plugin,
// a Go program, needs more threads than a test's bound of 8.
func (l *r8Layout) bashOnly(t *testing.T) {
	t.Helper()
	writeFile(t, l.policy+"/policy.cue", "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Bash: schema.#Bash}\nagent: \"allowed-tools\": [\"Bash\"]\n")
	if l.u.uid >= 0 {
		chownAll(t, l.root, l.u.uid, l.u.gid)
	}
}

// groups lists the gateway's pids groups in dir.
func groups(dir string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "aimon-gw-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestR8BashProcessesAreBoundedThroughTheBinary: with the bound lowered to
// 8, a command that starts 20 processes gets fork failures, the gateway
// answers the next line, and the call's pids group is gone after it; as
// root (where RLIMIT_NPROC holds nothing) and as nobody with the cgroup
// delegated.
func TestR8BashProcessesAreBoundedThroughTheBinary(t *testing.T) {
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		l.bashOnly(t)
		cg := testPidsCgroup(t, l.u)
		env := []string{sandbox.PidsCgroupEnv + "=" + cg, sandbox.ProcessesEnv + "=8"}
		replies := l.serveLog(t, "agent", env, nil,
			bashLine("bomb", `sh -c 'i=0; while [ $i -lt 20 ]; do sleep 100 & i=$((i+1)); done; echo all started'`),
			bashLine("groups", "cd "+cg+" && ls -d aimon-gw-*"),
			bashLine("next", "echo alive"))
		if w := text(replies[0]); replies[0]["is_error"] != true || !strings.Contains(w, "Cannot fork") || strings.Contains(w, "all started") {
			t.Errorf("20 processes under a bound of 8: %v", replies[0])
		}
		if g := strings.Split(text(replies[1]), "\n"); len(g) != 2 || !strings.HasPrefix(g[0], "aimon-gw-") {
			// its own group, then "Exit code: 0"
			t.Errorf("the groups during the next call, want only its own: %v", replies[1])
		}
		if w := text(replies[2]); replies[2]["is_error"] != false || !strings.Contains(w, "alive") {
			t.Errorf("the call after: %v", replies[2])
		}
		if g := groups(cg); len(g) != 0 {
			t.Errorf("groups left after serve ended: %v", g)
		}
	})
}

// TestR8NoPidsCgroupAsRootRefusesBash: where no pids cgroup can be made,
// the gateway as root says so at start and refuses sandboxed Bash calls
// with a sentence; as nobody, prlimit's count holds and they run.
func TestR8NoPidsCgroupAsRootRefusesBash(t *testing.T) {
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		tests := []struct{ note, cgroup string }{
			{note: "a directory that is no cgroup", cgroup: l.root + "/home"},
			{note: "a directory that does not exist", cgroup: "/sys/fs/cgroup/aimon-gw-none"},
		}
		for _, tt := range tests {
			var log bytes.Buffer
			replies := l.serveLog(t, "agent", []string{sandbox.PidsCgroupEnv + "=" + tt.cgroup}, &log,
				bashLine("run", "echo ran"), bashLine("again", "echo ran"))
			root := l.u.uid < 0 && os.Geteuid() == 0
			for _, r := range replies {
				w := text(r)
				switch {
				case root && (r["is_error"] != true || !strings.Contains(w, "Run the gateway as a user other than root") || strings.Contains(w, "ran")):
					t.Errorf("%s: as root: %v", tt.note, r)
				case !root && (r["is_error"] != false || !strings.Contains(w, "ran")):
					t.Errorf("%s: as %s: %v", tt.note, l.u.name, r)
				}
			}
			if warned := strings.Count(log.String(), "sandboxed Bash calls will be refused"); root && warned != 1 || !root && warned != 0 {
				t.Errorf("%s: %d warnings at start:\n%s", tt.note, warned, log.String())
			}
		}
	})
}

// TestR8ExecIsBoundedAsBashIs: aimon-gw exec, which runs Claude Code's
// Bash commands, runs them in a pids group, and as root with none to make
// refuses them (exit 126) with the sentence; as nobody they run.
func TestR8ExecIsBoundedAsBashIs(t *testing.T) {
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		l.bashOnly(t)
		cg := testPidsCgroup(t, l.u)
		bin := gatewayBinary(t)
		os.Chmod(filepath.Dir(bin), 0o755) // nobody runs it
		root := l.u.uid < 0 && os.Geteuid() == 0
		tests := []struct {
			note, cgroup, command, want string
			refused                     bool
		}{
			{note: "past the bound", cgroup: cg, command: `sh -c 'i=0; while [ $i -lt 20 ]; do sleep 100 & i=$((i+1)); done; echo all started'`, want: "Cannot fork"},
			{note: "no pids cgroup", cgroup: l.root + "/home", command: "echo ran", want: "ran", refused: root},
		}
		for _, tt := range tests {
			env := []string{sandbox.PidsCgroupEnv + "=" + tt.cgroup, sandbox.ProcessesEnv + "=8", "HOME=" + l.root + "/home", "XDG_CACHE_HOME=" + l.root + "/home/.cache"}
			_, wrapped := hookSealed(t, append(append([]string{}, l.u.prefix...), bin), env, l.policy, l.proj, tt.command)
			argv := append(append([]string{}, l.u.prefix...), "bash", "-c", wrapped)
			c := exec.Command(argv[0], argv[1:]...)
			c.Dir, c.Env = l.proj, append(os.Environ(), env...)
			out, err := c.CombinedOutput()
			switch {
			case tt.refused:
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitNotRun || !strings.Contains(string(out), "Run the gateway as a user other than root") || strings.Contains(string(out), tt.want) {
					t.Errorf("%s: %v\n%s", tt.note, err, out)
				}
			case !strings.Contains(string(out), tt.want) || strings.Contains(string(out), "all started"):
				t.Errorf("%s: %v\n%s", tt.note, err, out)
			}
		}
		if g := groups(cg); len(g) != 0 {
			t.Errorf("groups left after exec: %v", g)
		}
	})
}

// TestR8PluginGroupGoesWithTheGateway: a sandboxed plugin runs in a pids
// group of its own, which is gone once serve has ended.
func TestR8PluginGroupGoesWithTheGateway(t *testing.T) {
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		cg := testPidsCgroup(t, l.u)
		replies := l.serveLog(t, "agent", []string{sandbox.PidsCgroupEnv + "=" + cg}, nil,
			bashLine("groups", "cd "+cg+" && ls -d aimon-gw-*"))
		// The plugin's group and the call's own.
		if g := strings.Split(text(replies[0]), "\n"); len(g) != 3 {
			t.Errorf("the groups during a call, want the plugin's and the call's: %v", replies[0])
		}
		if g := groups(cg); len(g) != 0 {
			t.Errorf("groups left after serve ended: %v", g)
		}
	})
}
