package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Signal sends sig to what runs in cmd's sandbox: every process of its
// pids group but the one cmd started (the command itself, inside bwrap's
// PID namespace, which no pid outside it names; the gateway's tracer
// goes on tracing it to its end), else the process cmd started, which is all
// there is without a group (rule R10: a stop asked of the command reaches
// it).
func Signal(cmd *exec.Cmd, sig unix.Signal) {
	if cmd.Process == nil {
		return
	}
	if dir := groupOf(cmd); dir != "" {
		// The command's own processes are those in bwrap's PID
		// namespace; bwrap, outside it, would end on the
		// signal and take the command with them unasked.
		ours, _ := os.Readlink("/proc/self/ns/pid")
		data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		var outside []int
		sent := false
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid <= 0 || pid == os.Getpid() || pid == cmd.Process.Pid {
				continue
			}
			if ns, err := os.Readlink("/proc/" + f + "/ns/pid"); err == nil && ns != ours {
				sent = unix.Kill(pid, sig) == nil || sent
				continue
			}
			outside = append(outside, pid)
		}
		if sent {
			return
		}
		for _, pid := range outside { // a sandbox of no PID namespace
			unix.Kill(pid, sig)
		}
		return
	}
	unix.Kill(cmd.Process.Pid, sig)
}

// Kill kills what runs in cmd's sandbox, its pids group whole, and the
// process cmd started (bwrap, or the sh that started it), whose death
// ends its PID 1 and so its PID namespace (--die-with-parent).
func Kill(cmd *exec.Cmd) {
	if cmd.Process == nil {
		return
	}
	if dir := groupOf(cmd); dir != "" {
		killGroup(dir)
	}
	cmd.Process.Kill()
}
