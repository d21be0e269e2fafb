// Package sandbox runs a program under bubblewrap (rule R6): the whole file
// system read-only but for the writable set, a private /tmp, its own PID
// namespace and /proc, no network unless allowed, a cleared environment,
// and --die-with-parent, so that the namespace and every process in it end
// with the program or with the gateway. Bash runs each command in one, a
// sandboxed plugin its whole process.
package sandbox

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/tools"
)

var bwrapCheck struct {
	once sync.Once
	path string
	err  error
}

// bwrap returns the path of a bwrap that can run here: it must be
// installed, and able to make the namespaces (a container may forbid them).
func bwrap() (string, error) {
	bwrapCheck.once.Do(func() {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			bwrapCheck.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, p, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
			"--unshare-pid", "--unshare-net", "--die-with-parent", "true").CombinedOutput()
		if err != nil {
			bwrapCheck.err = &bwrapError{err: err, out: strings.TrimSpace(string(out))}
			return
		}
		bwrapCheck.path = p
	})
	return bwrapCheck.path, bwrapCheck.err
}

type bwrapError struct {
	err error
	out string
}

func (e *bwrapError) Error() string {
	return "bwrap cannot make a sandbox here: " + e.err.Error() + ": " + e.out
}

// Available reports whether a sandbox can be made here, and why not.
func Available() error {
	_, err := bwrap()
	return err
}

// Argv is the command line that runs argv in dir inside sb. Its
// environment is drawn from env (os.Environ() when nil); keep names more
// variables to pass through as they are (a plugin's handshake).
func Argv(sb *tools.Sandbox, dir string, argv, env []string, keep func(name string) bool) ([]string, error) {
	bw, err := bwrap()
	if err != nil {
		return nil, err
	}
	if env == nil {
		env = os.Environ()
	}
	return append([]string{bw}, args(sb, dir, argv, env, keep)...), nil
}

// passedEnv are the variables every sandboxed command keeps (rule R6).
var passedEnv = []string{"PATH", "HOME", "LANG", "TERM"}

// args is the bwrap arguments that run argv in dir inside sb.
func args(sb *tools.Sandbox, dir string, argv, env []string, keep func(string) bool) []string {
	root := "--ro-bind"
	for _, w := range sb.Writable {
		if w == "/" {
			root = "--bind"
		}
	}
	a := []string{root, "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session", "--clearenv"}
	if !sb.Network {
		a = append(a, "--unshare-net")
	}
	// The working directory stays visible when the private /tmp covers it.
	if dir != "" && (dir == "/tmp" || strings.HasPrefix(dir, "/tmp/")) {
		a = append(a, "--ro-bind", dir, dir)
	}
	for _, w := range sb.Writable {
		if w != "/" && exists(w) {
			a = append(a, "--bind", w, w)
		}
	}
	for _, r := range sb.ReadOnly {
		if exists(r) {
			a = append(a, "--ro-bind", r, r)
		}
	}
	for _, h := range sb.Hidden {
		fi, err := os.Stat(h)
		switch {
		case err != nil:
		case fi.IsDir():
			a = append(a, "--tmpfs", h, "--remount-ro", h)
		default:
			a = append(a, "--ro-bind", "/dev/null", h)
		}
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if contains(passedEnv, name) || strings.HasPrefix(name, "LC_") || contains(sb.Env, name) || keep != nil && keep(name) {
			a = append(a, "--setenv", name, value)
		}
	}
	a = append(a, "--setenv", "TMPDIR", "/tmp")
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	return append(append(a, "--"), argv...)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
