// Package launch is the first process of every sandbox (package sandbox):
// the gateway's binary started with Arg, by bwrap, after its mounts. It
// joins the command's pids group where the gateway hands it one
// (JoinEnv), runs nothing where its programs are to be judged and no
// tracer follows it (Spec.Traced), makes the paths a command may write
// not executable (Landlock, see
// landlock.go) and, for a sandbox whose network is a list of hosts,
// listens on a loopback port inside the sandbox's network namespace,
// hands the listening socket to the gateway over the socket pair on
// descriptor CtlFD and closes the pair; then it executes the command (with
// the proxy variables naming that port). It runs from this package's init,
// which comes before the packages the gateway's commands need (CUE, gRPC,
// …): a launch costs a process start, not the gateway's start-up. Go
// initializes a package after its imports, the packages ready first in
// the order of their paths, so it imports none that comes late (net,
// os/exec, path/filepath).
package launch

import (
	"embed"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sources are this package's source files, embedded by the build (see
// package trace's Sources).
//
//go:embed *.go
var Sources embed.FS

// Arg, as the first argument, makes the binary the launcher:
// Arg [NetArg] -- ARGV..., with the Landlock rules in SpecEnv.
const Arg = "__aimon-gw-sandbox-launch"

// NetArg, after Arg, sets up the network of listed hosts.
const NetArg = "net"

// CtlFD is the descriptor of the socket pair to the gateway.
const CtlFD = 4

// JoinEnv names the variable that gives the descriptor of the tasks file
// of the sandbox's pids group (cgroup v1), which the launcher writes 0 to
// first: it moves the thread that writes, the one that executes the
// command, and only it (package sandbox, pids.go).
const JoinEnv = "AIMON_GW_SANDBOX_JOIN"

func init() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	err := launch(os.Args[2:])
	fmt.Fprintf(os.Stderr, "aimon-gw: %v.\n", err)
	os.Exit(126)
}

func launch(args []string) error {
	// Landlock binds the thread that restricts itself: the exec must be
	// made by the same one, and so must the join of the pids group
	// (which moves the writing thread). This runs in the package's init,
	// which Go runs on the main thread, locked to it (runtime.main): no
	// LockOSThread, which would start a thread more (the tracer's quiet
	// launcher relies on the exec being the main thread's, too).
	network := len(args) > 0 && args[0] == NetArg
	if network {
		args = args[1:]
	}
	if len(args) < 2 || args[0] != "--" {
		return fmt.Errorf("the sandbox's launcher takes [%s] -- and a command, not %q, so the command was not run", NetArg, args)
	}
	argv := args[1:]
	env := os.Environ()
	env, err := join(env)
	if err != nil {
		return fmt.Errorf("the command's pids cgroup could not be joined, so it was not run: %w", err)
	}
	spec, env, err := takeSpec(env)
	if err == nil && spec.Traced {
		if err := traced(); err != nil {
			return err
		}
	}
	if err == nil {
		err = noexec(spec.Mounts, spec.Exec)
	}
	if err == nil {
		err = restrict(spec)
	}
	if err != nil {
		return fmt.Errorf("the paths the command may write could not be made not executable, so the command was not run: %w", err)
	}
	if err := dropCaps(); err != nil {
		return fmt.Errorf("the sandbox's capabilities could not be dropped, so the command was not run: %w", err)
	}
	if network {
		if env, err = listen(env); err != nil {
			return fmt.Errorf("the sandbox's network could not be set up, so the command was not run: %w", err)
		}
	}
	// Last: the filter refuses what made the mounts noexec.
	if err := loadFilter(); err != nil {
		return fmt.Errorf("the sandbox's system call filter could not be loaded, so the command was not run: %w", err)
	}
	path, err := lookPath(argv[0])
	if err != nil {
		return fmt.Errorf("the command %s cannot be found in the sandbox: %w", argv[0], err)
	}
	err = syscall.Exec(path, argv, env)
	if err == unix.EACCES {
		return fmt.Errorf("%s may not be executed in the sandbox: it lies where the command may write, or is not executable (%w)", path, err)
	}
	return fmt.Errorf("the command %s could not be executed: %w", path, err)
}

// join joins the pids group whose tasks file JoinEnv names the
// descriptor of, where it does, and returns env without it.
func join(env []string) ([]string, error) {
	var v string
	env = slices.DeleteFunc(env, func(kv string) bool {
		rest, ok := strings.CutPrefix(kv, JoinEnv+"=")
		if ok {
			v = rest
		}
		return ok
	})
	if v == "" {
		return env, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return env, fmt.Errorf("%s=%q is not a descriptor", JoinEnv, v)
	}
	// Closed before the command runs, whatever the write says.
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("0")); err != nil {
		return env, err
	}
	return env, nil
}

// traced says why the launcher is not traced, which the gateway's tracer
// attaches to bwrap's PID 1 before bwrap forks it (package trace), if
// bwrap was woken some other way (the gateway's end of its --block-fd
// closed as the gateway died): nil when it is. PTRACE_TRACEME fails with
// EPERM for a process that has a tracer already, and the launcher is not
// under the sandbox's filter yet (it refuses ptrace). Where it succeeds,
// bwrap's PID 1 is the tracer of a process that exits now.
func traced() error {
	_, _, e := unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
	switch e {
	case unix.EPERM:
		return nil
	case 0:
		return fmt.Errorf("the sandbox's programs are not followed by the gateway's tracer, so the command was not run")
	}
	return fmt.Errorf("whether the gateway's tracer follows the sandbox's programs cannot be told (PTRACE_TRACEME: %v), so the command was not run", e)
}

// listen makes the loopback listener, hands it to the gateway and returns
// env naming it as the proxy. Raw system calls rather than package net,
// which Go initializes late (see init).
func listen(env []string) ([]string, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("no socket: %w", err)
	}
	// The listener closes on exec: the command never holds it.
	defer syscall.Close(fd)
	lo := &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := syscall.Bind(fd, lo); err != nil {
		return nil, fmt.Errorf("no loopback port: %w", err)
	}
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("no loopback port: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	in4, ok := sa.(*syscall.SockaddrInet4)
	if err != nil || !ok {
		return nil, fmt.Errorf("the loopback port is unknown: %v", err)
	}
	if err := unix.Sendmsg(CtlFD, []byte{1}, unix.UnixRights(fd), nil, 0); err != nil {
		return nil, fmt.Errorf("the gateway's proxy cannot be reached: %w", err)
	}
	// The pair is not the command's.
	unix.Close(CtlFD)
	return ProxyEnv(env, "http://127.0.0.1:"+strconv.Itoa(in4.Port)), nil
}

// lookPath is where argv0 is found on the PATH of env (the launcher's
// own): argv0 itself when it names a path.
func lookPath(argv0 string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + argv0
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && syscall.Access(p, 1) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("it is not on PATH")
}

// proxyVars are the variables that name a proxy, in the spellings programs
// read (curl, Go, npm, pip read one or the other case).
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}

// ProxyEnv is env with every proxy variable naming url and no NO_PROXY.
func ProxyEnv(env []string, url string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(proxyVars, name) || strings.EqualFold(name, "NO_PROXY")
	})
	for _, v := range proxyVars {
		env = append(env, v+"="+url)
	}
	return env
}
