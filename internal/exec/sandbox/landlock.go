package sandbox

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"aimon.dev/gw/internal/exec/sandbox/launch"
	"aimon.dev/gw/tools"
)

// Every sandbox's first process is the launcher (package launch): the
// gateway's sandbox program, or its own binary (program.go). bwrap
// executes it after its mounts: it makes the
// paths the command may write not executable with Landlock, and sets up
// the network of listed hosts when there is one, then executes the
// command. bwrap executes it as /proc/self/fd/N, a descriptor of the
// binary, so that it needs no bind (the private /tmp may cover it: go
// run) and PID 1's argument vector names no path of the gateway's.

// Launcher is the gateway's binary, beside which its sandbox program is
// looked for, and which runs as a sandbox's first process with
// launch.Arg where there is none: the running one, which imports package
// launch through this package, as every binary that makes a sandbox does.
var Launcher = os.Executable

// NotExecutable is the sentence for a command whose program could not be
// executed (126, permission denied) in a sandbox.
const NotExecutable = "A program or library that lies where the command may write (the working directory, /tmp, /dev/shm or another writable path) cannot be executed or loaded in the sandbox (rule P16), nor can a file without execute permission. Run a script through its interpreter (sh x.sh, python3 x.py), or have the operator list the directory in the tool's sandbox.exec (\"./bin/**\")."

// landlockABI is the kernel's Landlock ABI version; tests replace it.
var landlockABI = sync.OnceValues(ll.LandlockGetABIVersion)

// landlockReady says why no sandbox can refuse execution here: nil when
// Landlock can.
func landlockReady() error {
	abi, err := landlockABI()
	if err == nil && abi >= launch.MinABI {
		return nil
	}
	return fmt.Errorf("this kernel cannot keep a command from executing what it writes (Landlock ABI %d, %d is needed: Linux 5.19 or later with landlock among the LSMs it enables, lsm=...,landlock), so no sandboxed command runs (rule R6); run the gateway on such a kernel, or set sandbox: mode: \"off\" on the tool to run it unsandboxed", abi, launch.MinABI)
}

// execSpec is where the launcher refuses execution: the private /tmp, the
// /dev bwrap makes, and what binds makes writable; and where it allows it
// again inside them: what binds makes read-only, readOnly, and the
// policy's sandbox.exec paths (execBinds, bound writable on their own so
// that they are not part of a noexec mount). With the whole tree writable
// ("/"), every program could be the command's own: the working directory
// is refused then, besides /tmp and /dev, and only what lies in /tmp is
// made noexec (the tree's mounts hold the system's programs).
func execSpec(binds map[string]string, execBinds map[string]bool, all bool, readOnly []string, dir string) launch.Spec {
	spec := launch.Spec{NoExec: []string{"/tmp", "/dev"}, Mounts: []string{"/tmp", "/dev"}}
	if all {
		if real := resolved(dir); real != "" && real != "/" {
			spec.NoExec = append(spec.NoExec, real)
		}
	}
	var again []string
	for _, p := range slices.Sorted(maps.Keys(binds)) {
		switch {
		case binds[p] == "--ro-bind" || execBinds[p]:
			again = append(again, p)
		case all && !within(p, "/tmp"):
		default:
			spec.NoExec = append(spec.NoExec, p)
			spec.Mounts = append(spec.Mounts, p)
		}
	}
	again = append(again, readOnly...)
	for _, p := range again {
		if slices.ContainsFunc(spec.NoExec, func(n string) bool { return within(p, n) }) {
			spec.Exec = append(spec.Exec, p)
		}
	}
	slices.Sort(spec.Exec)
	spec.Exec = slices.Compact(spec.Exec)
	return spec
}

// elsewhere is spec refusing execution in the paths others, where other
// calls may write, besides its own; again are the paths in them whose
// programs run still (what the gateway protects, the sandbox.exec paths).
func elsewhere(spec launch.Spec, others, again []string) launch.Spec {
	added := false
	for _, p := range others {
		if p == "/" || slices.ContainsFunc(spec.NoExec, func(n string) bool { return within(p, n) }) {
			continue
		}
		spec.NoExec, added = append(spec.NoExec, p), true
	}
	if !added {
		return spec
	}
	for _, p := range again {
		if slices.ContainsFunc(spec.NoExec, func(n string) bool { return within(p, n) }) && !slices.Contains(spec.Exec, p) {
			spec.Exec = append(spec.Exec, p)
		}
	}
	slices.Sort(spec.Exec)
	return spec
}

// execRoots are the sandbox.exec paths that exist, resolved.
func execRoots(sb *tools.Sandbox, dir string) []string {
	var out []string
	for _, e := range sb.Executable {
		if real := resolved(execRoot(e, dir)); real != "" && real != "/" {
			out = append(out, real)
		}
	}
	return out
}

// execBinds are the sandbox.exec paths that exist and lie where the
// command may write, resolved: each is bound writable on its own.
func execBinds(sb *tools.Sandbox, dir string, all bool, writable []string) map[string]bool {
	out := map[string]bool{}
	for _, e := range sb.Executable {
		real := resolved(execRoot(e, dir))
		if real != "" && real != "/" && (all || slices.ContainsFunc(writable, func(w string) bool { return within(real, w) })) {
			out[real] = true
		}
	}
	return out
}

// ExecRoot is the path a sandbox.exec entry lets programs run under: the
// directory of "DIR/**", or the path itself; relative to dir, ~/ to the
// gateway's home.
func execRoot(e, dir string) string {
	e = strings.TrimSuffix(strings.TrimSuffix(e, "/**"), "/")
	if rest, ok := strings.CutPrefix(e, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	if !filepath.IsAbs(e) {
		if dir == "" {
			return ""
		}
		e = filepath.Join(dir, e)
	}
	return e
}

// specArgs are bwrap's options that hand spec to the launcher.
func specArgs(spec launch.Spec) []string {
	b, _ := json.Marshal(spec)
	return []string{"--setenv", launch.SpecEnv, string(b)}
}

// withLaunch makes a, bwrap's arguments running argv, start the launcher
// on its descriptor, with the network of listed hosts when network; it
// returns the arguments and the launcher's base name.
func withLaunch(cmd *exec.Cmd, a []string, network bool) ([]string, string, error) {
	f, name, err := launcherFile()
	if err != nil {
		return nil, "", err
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
	i := slices.Index(a, "--")
	opts, run := slices.Clip(a[:i]), []string{"--", "/proc/self/fd/" + strconv.Itoa(fd), launch.Arg}
	if network {
		opts = append(opts, "--sync-fd", strconv.Itoa(syncFD))
		run = append(run, launch.NetArg)
	}
	return slices.Concat(opts, run, a[i:]), name, nil
}
