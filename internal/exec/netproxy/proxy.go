package netproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"aimon.dev/gw/internal/core/hostpattern"
)

// A Proxy serves the HTTP proxy protocol to one sandbox's commands: a
// CONNECT tunnel or one plain-HTTP request at a time, each to a host its
// Allow lists, at an address it resolved itself.
type Proxy struct {
	Allow hostpattern.Patterns
	// Log receives a warning for every refused connection, with the host.
	Log *slog.Logger
	// Resolve looks a name up; nil for the system's resolver (and the
	// names of TestHostsEnv).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Idle closes a connection, tunnel or plain, through which no byte
	// moved either way for so long; 0 for DefaultIdle.
	Idle time.Duration
	// MaxConns bounds the connections served at once; one beyond is
	// answered 503 and closed. 0 for DefaultMaxConns.
	MaxConns int
}

// The proxy's bounds on one sandbox (rule R8).
const (
	DefaultIdle     = 2 * time.Minute
	DefaultMaxConns = 64
)

// TestHostsEnv names the variable that maps names under .test (a domain
// that never resolves, RFC 6761) to addresses for the proxy's resolver:
// "a.test=127.0.0.1,b.test=::1". It lets a test give local listeners
// names; no other name is affected.
const TestHostsEnv = "AIMON_GW_TEST_HOSTS"

var testHosts = sync.OnceValue(func() map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, kv := range strings.Split(os.Getenv(TestHostsEnv), ",") {
		name, addr, _ := strings.Cut(strings.TrimSpace(kv), "=")
		a, err := netip.ParseAddr(addr)
		if err == nil && strings.HasSuffix(name, ".test") {
			m[strings.ToLower(name)] = append(m[strings.ToLower(name)], a)
		}
	}
	return m
})

// A refusal is a connection the allow list does not admit.
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

var dialer = net.Dialer{Timeout: 30 * time.Second}

// Dial connects to host:port when the allow list admits it: an address
// only when listed; a name when listed, at the addresses it resolves to,
// less those that are internal and not listed. Refused is a *refusal.
func (p *Proxy) Dial(ctx context.Context, host string, port int) (net.Conn, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if !p.Allow.Addr(a, port) {
			return nil, &refusal{fmt.Sprintf("the address %s:%d is not in the sandbox's network allow list; connect by a listed name", a, port)}
		}
		return dialer.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
	}
	if !p.Allow.Name(host, port) {
		return nil, &refusal{fmt.Sprintf("%s:%d is not in the sandbox's network allow list (%s)", host, port, p.listed())}
	}
	addrs, err := p.resolve(ctx, strings.TrimSuffix(strings.ToLower(host), "."))
	if err != nil {
		return nil, fmt.Errorf("%s does not resolve: %v", host, err)
	}
	var ok, internals []string
	for _, a := range addrs {
		s := netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
		if hostpattern.Internal(a) && !p.Allow.Addr(a, port) {
			internals = append(internals, a.Unmap().String())
			continue
		}
		ok = append(ok, s)
	}
	if len(ok) == 0 {
		return nil, &refusal{fmt.Sprintf("%s resolves to %s, a loopback, link-local or private address the sandbox's network allow list does not list", host, strings.Join(internals, ", "))}
	}
	var last error
	for _, s := range ok {
		c, err := dialer.DialContext(ctx, "tcp", s)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func (p *Proxy) listed() string {
	var s []string
	for _, a := range p.Allow {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}

func (p *Proxy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if p.Resolve != nil {
		return p.Resolve(ctx, host)
	}
	if a, ok := testHosts()[host]; ok {
		return a, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func (p *Proxy) log() *slog.Logger {
	if p.Log == nil {
		return slog.Default()
	}
	return p.Log
}

// Serve serves every connection l accepts until it is closed or ctx ends,
// at most MaxConns at once.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	max := p.MaxConns
	if max <= 0 {
		max = DefaultMaxConns
	}
	slots := make(chan struct{}, max)
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				p.ServeConn(ctx, c)
			}()
		default:
			p.log().Warn("the sandbox's network proxy refused a connection beyond its bound", "max", max)
			go func() {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				reply(c, http.StatusServiceUnavailable, fmt.Sprintf("aimon-gw: the sandbox already has %d connections open through its proxy, the most it may; close some, or make fewer at once.", max))
				c.Close()
			}()
		}
	}
}

// ServeConn serves one client connection until it closes, ctx ends, or
// it is idle for Idle.
func (p *Proxy) ServeConn(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	a := &activity{idle: p.idle()}
	c := a.join(raw)
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
				reply(c, http.StatusBadRequest, "aimon-gw: the sandbox's proxy could not read the request: "+err.Error()+".")
			}
			return
		}
		if req.Method == http.MethodConnect {
			p.connect(ctx, a, c, br, req)
			return
		}
		if !p.forward(ctx, a, c, req) {
			return
		}
	}
}

func (p *Proxy) idle() time.Duration {
	if p.Idle <= 0 {
		return DefaultIdle
	}
	return p.Idle
}

// connect opens a CONNECT tunnel and copies both ways until either ends
// or neither moves a byte for the idle time.
func (p *Proxy) connect(ctx context.Context, a *activity, c net.Conn, br *bufio.Reader, req *http.Request) {
	host, port, err := hostPort(req.Host, 0)
	if err != nil {
		reply(c, http.StatusBadRequest, "aimon-gw: "+err.Error())
		return
	}
	raw, ok := p.dial(ctx, c, host, port)
	if !ok {
		return
	}
	defer raw.Close()
	up := a.join(raw)
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(up, br) // what the client sent after the request, then the rest
		if t, ok := raw.(*net.TCPConn); ok {
			t.CloseWrite()
		}
		close(done)
	}()
	_, err = io.Copy(c, up)
	c.Close()
	<-done
	if isTimeout(err) {
		p.log().Info("the sandbox's network proxy closed an idle tunnel", "host", host, "port", port, "idle", a.idle)
	}
}

// forward sends one plain-HTTP request on a connection of its own and
// copies the response back; false when the client's connection must close.
func (p *Proxy) forward(ctx context.Context, a *activity, c net.Conn, req *http.Request) bool {
	if req.URL.Scheme != "http" || req.URL.Host == "" {
		reply(c, http.StatusBadRequest, fmt.Sprintf("aimon-gw: the sandbox's proxy forwards http://HOST/… requests and CONNECT tunnels; %s %s is neither.", req.Method, req.RequestURI))
		return false
	}
	host, port, err := hostPort(req.URL.Host, 80)
	if err != nil {
		reply(c, http.StatusBadRequest, "aimon-gw: "+err.Error())
		return false
	}
	raw, ok := p.dial(ctx, c, host, port)
	if !ok {
		return false // the reply said Connection: close
	}
	defer raw.Close()
	defer a.leave(raw)
	up := a.join(raw)
	for _, h := range []string{"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	keep := !req.Close
	req.Close = true // one request a connection upstream
	if err := req.Write(up); err != nil {
		reply(c, http.StatusBadGateway, fmt.Sprintf("aimon-gw: sending the request to %s failed: %v.", req.URL.Host, err))
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	switch {
	case isTimeout(err):
		a.touch() // the client's side, to hear why
		reply(c, http.StatusGatewayTimeout, fmt.Sprintf("aimon-gw: %s sent nothing for %s, so the sandbox's proxy closed the request.", req.URL.Host, a.idle))
		return false
	case err != nil:
		reply(c, http.StatusBadGateway, fmt.Sprintf("aimon-gw: %s did not answer with HTTP: %v.", req.URL.Host, err))
		return false
	}
	defer resp.Body.Close()
	// Kept open when the client wants it and the response's end is known
	// (a length, or chunks) without the upstream connection's close.
	keep = keep && (resp.ContentLength >= 0 || slices.Contains(resp.TransferEncoding, "chunked"))
	resp.Close = !keep
	return resp.Write(c) == nil && keep
}

// dial is Dial, answering the client with a sentence when it fails.
func (p *Proxy) dial(ctx context.Context, c net.Conn, host string, port int) (net.Conn, bool) {
	up, err := p.Dial(ctx, host, port)
	var r *refusal
	switch {
	case errors.As(err, &r):
		p.log().Warn("the sandbox's network proxy refused a connection", "host", host, "port", port, "reason", r.why)
		reply(c, http.StatusForbidden, "aimon-gw: the connection was refused: "+r.why+".")
		return nil, false
	case err != nil:
		p.log().Info("the sandbox's network proxy could not connect", "host", host, "port", port, "error", err)
		reply(c, http.StatusBadGateway, fmt.Sprintf("aimon-gw: could not connect to %s:%d: %v.", host, port, err))
		return nil, false
	}
	return up, true
}

// hostPort splits an authority; def is the port when it has none (0: one
// is required).
func hostPort(authority string, def int) (string, int, error) {
	host, ps, err := net.SplitHostPort(authority)
	if err != nil {
		if def == 0 {
			return "", 0, fmt.Errorf("%q is not HOST:PORT", authority)
		}
		return strings.Trim(authority, "[]"), def, nil
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("%q has no valid port", authority)
	}
	return host, port, nil
}

// reply answers the client with a status and a sentence, and no more.
func reply(w io.Writer, code int, msg string) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		code, http.StatusText(code), len(msg)+1, msg)
}

// activity holds a client connection and the upstream one it is served
// by to one idle time: a byte through either, either way, moves both
// deadlines, so a tunnel busy one way stays open the other, and one idle
// both ways fails its reads and writes with a timeout.
type activity struct {
	idle  time.Duration
	mu    sync.Mutex
	conns []net.Conn
	last  atomic.Int64 // when the deadlines were last moved, unix ns
}

// join adds c and returns it, counting what moves through it.
func (a *activity) join(c net.Conn) net.Conn {
	a.mu.Lock()
	a.conns = append(a.conns, c)
	a.mu.Unlock()
	c.SetDeadline(time.Now().Add(a.idle))
	return &busyConn{Conn: c, a: a}
}

// leave stops counting c.
func (a *activity) leave(c net.Conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns = slices.DeleteFunc(a.conns, func(o net.Conn) bool { return o == c })
}

// touch moves the deadlines, at most every idle/16: a busy stream does
// not reset timers for every read.
func (a *activity) touch() {
	now := time.Now()
	if last := a.last.Load(); now.UnixNano()-last < int64(a.idle/16) || !a.last.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.SetDeadline(now.Add(a.idle))
	}
}

// busyConn is a connection of an activity.
type busyConn struct {
	net.Conn
	a *activity
}

func (b *busyConn) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if n > 0 {
		b.a.touch()
	}
	return n, err
}

func (b *busyConn) Write(p []byte) (int, error) {
	n, err := b.Conn.Write(p)
	if n > 0 {
		b.a.touch()
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
