// Package launch is the first process of a sandbox whose network is a
// list of hosts (package sandbox): the gateway's binary started with Arg.
// It listens on a loopback port inside the sandbox's network namespace,
// hands the listening socket to the gateway over the socket pair on
// descriptor CtlFD, closes the pair, and executes the command with the
// proxy variables naming that port. It runs from this package's init,
// which comes before the packages the gateway's commands need (CUE,
// gRPC, …): a launch costs a process start, not the gateway's start-up.
package launch

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Arg, as the first argument, makes the binary the launcher.
const Arg = "__aimon-gw-sandbox-network"

// CtlFD is the descriptor of the socket pair to the gateway.
const CtlFD = 4

func init() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	err := launch(os.Args[2:])
	fmt.Fprintf(os.Stderr, "aimon-gw: the sandbox's network could not be set up, so the command was not run: %v.\n", err)
	os.Exit(126)
}

func launch(args []string) error {
	if len(args) < 2 || args[0] != "--" {
		return fmt.Errorf("the launcher takes -- and a command, not %q", args)
	}
	argv := args[1:]
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("no loopback port: %w", err)
	}
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return err
	}
	if err := unix.Sendmsg(CtlFD, []byte{1}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		return fmt.Errorf("the gateway's proxy cannot be reached: %w", err)
	}
	// The pair is not the command's; the listener and f close on exec.
	unix.Close(CtlFD)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, argv, ProxyEnv(os.Environ(), "http://"+l.Addr().String()))
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
