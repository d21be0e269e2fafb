package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/core/hostpattern"
	"aimon.dev/gw/internal/exec/netproxy"
	"aimon.dev/gw/tools"
)

// A sandbox whose network is a list of hosts has a network namespace of
// its own, with only loopback, and reaches the hosts through the gateway's
// proxy (package netproxy). Its first process is the gateway's binary as
// a launcher (package launch): it listens on a loopback port inside the namespace,
// hands the listening socket to the gateway over a socket pair, closes the
// pair and executes the command with HTTP_PROXY and the like pointing at
// that port. The gateway accepts on the socket and proxies each connection
// from its own namespace; no process of the gateway's stays inside, no
// socket file is bound in, and the command holds no descriptor of the
// gateway's. The proxy ends when bwrap's --sync-fd pipe closes, that is
// when the sandbox does. As root this still holds: the namespace is the
// sandbox's own, and without capabilities or setns its only way out is
// the port the gateway serves.

// The launcher's descriptors: 4 is the socket pair (launch.CtlFD), 5
// bwrap's sync pipe (not seen inside), after the filter's 3.
const syncFD = 5

// withNetwork makes cmd serve the proxy for sb's hosts to the launcher.
func withNetwork(cmd *exec.Cmd, sb *tools.Sandbox) error {
	allow, err := hostpattern.Parse(sb.Hosts)
	if err != nil {
		return fmt.Errorf("the sandbox's network allow list is bad: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "proxy-control"), os.NewFile(uintptr(pair[1]), "proxy-control")
	r, w, err := os.Pipe()
	if err != nil {
		ours.Close()
		theirs.Close()
		return err
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, theirs, w)
	go serveNetwork(ours, r, &netproxy.Proxy{Allow: allow, Log: sb.Log})
	return nil
}

// serveNetwork takes the sandbox's listening socket from ctl and proxies
// what it accepts until the sandbox ends: sync reads to its end.
func serveNetwork(ctl, sync *os.File, p *netproxy.Proxy) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		io.Copy(io.Discard, sync)
		sync.Close()
		cancel()
	}()
	l, err := receiveListener(ctl)
	if err != nil {
		if p.Log != nil {
			p.Log.Debug("the sandbox's network ended before its proxy started", "cause", err)
		}
		return
	}
	p.Serve(ctx, l)
}

// receiveListener reads the one descriptor the launcher sends; an error
// when the sandbox ended first.
func receiveListener(ctl *os.File) (net.Listener, error) {
	c, err := net.FileConn(ctl)
	ctl.Close()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := c.(*net.UnixConn).ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("no descriptor came (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("not one descriptor came (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "sandbox-listener")
	defer f.Close()
	return net.FileListener(f)
}
