package builtin

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/tools"
)

// Bash runs its command under bubblewrap (rule R6) when the gateway gives
// the call a sandbox: the whole filesystem read-only but for the writable
// set, a private /tmp, its own PID namespace and /proc (the gateway's
// descriptors are out of reach), no network unless allowed, a cleared
// environment, and --die-with-parent, so that the namespace and every
// process in it end with the call or with the gateway.

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

// SandboxAvailable reports whether Bash can run sandboxed here, and why not.
func SandboxAvailable() error {
	_, err := bwrap()
	return err
}

// passedEnv are the variables every sandboxed command keeps (rule R6).
var passedEnv = []string{"PATH", "HOME", "LANG", "TERM"}

// sandboxArgs is the bwrap command line that runs command in dir inside sb.
func sandboxArgs(sb *tools.Sandbox, dir, command string) []string {
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
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if contains(passedEnv, name) || strings.HasPrefix(name, "LC_") || contains(sb.Env, name) {
			a = append(a, "--setenv", name, value)
		}
	}
	a = append(a, "--setenv", "TMPDIR", "/tmp")
	if dir != "" {
		a = append(a, "--chdir", dir)
	}
	return append(a, "--", "bash", "-c", command)
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
