package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/lockedbuf"
)

// piped is the binary's serve or mcp as a process on pipes, for a test
// that talks to one process over many lines, signals it, or reads its log
// while it runs: lines go in, replies come out a line at a time, and what
// it writes on standard error is kept.
type piped struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr lockedbuf.Buffer
	mu     sync.Mutex // one send's line and its reply at a time
	closed bool
}

// startServeProc runs the gateway's serve with args on pipes.
func startServeProc(t *testing.T, args ...string) *piped {
	t.Helper()
	return startPiped(t, nil, append([]string{gatewayBinary(t), "serve"}, args...)...)
}

// startPiped runs argv (a program and its arguments) with env added to
// this process's environment. When the test ends its standard input is
// closed and it is waited for, and killed if it has not ended within 30 s,
// so that no test leaves a gateway behind or waits without end.
func startPiped(t *testing.T, env []string, argv ...string) *piped {
	t.Helper()
	p := &piped{t: t, cmd: exec.Command(argv[0], argv[1:]...)}
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stderr = &p.stderr
	in, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.in, p.out = in, bufio.NewReader(out)
	t.Cleanup(p.close)
	return p
}

// write writes each line and a newline, and reads nothing.
func (p *piped) write(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.in, l+"\n"); err != nil {
			p.t.Errorf("the gateway took no more input: %v; stderr:\n%s", err, p.stderr.String())
			return
		}
	}
}

// next is the next reply, false once the output has ended; a reply that
// is not JSON fails the test.
func (p *piped) next() (map[string]any, bool) {
	p.t.Helper()
	l, err := p.out.ReadBytes('\n')
	if err != nil && len(l) == 0 {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(l, &m); err != nil {
		p.t.Errorf("reply %q: %v", l, err)
	}
	return m, true
}

// send writes line and returns its reply; nil, with the test failed, if
// none came. Goroutines may send at once: each waits for its own reply.
func (p *piped) send(line string) map[string]any {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.write(line)
	m, ok := p.next()
	if !ok {
		p.t.Errorf("no reply to %s; stderr:\n%s", line, p.stderr.String())
	}
	return m
}

// close closes the standard input and waits for the process to end, as
// at the end of the test; it may be called before.
func (p *piped) close() {
	if p.closed {
		return
	}
	p.closed = true
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}
