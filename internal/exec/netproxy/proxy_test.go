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
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/hostpattern"
	"aimon.dev/gw/internal/testkit/lockedbuf"
)

// resolver maps names to addresses, as DNS would answer.
func resolver(m map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range m[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		if out == nil {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return out, nil
	}
}

// TestR8ProxyRefusesRebinding: a listed name that resolves to an internal
// address is refused unless that address is listed; among its addresses,
// the internal ones are skipped; an address literal needs its own entry.
func TestR8ProxyRefusesRebinding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	var port int
	fmt.Sscan(u.Port(), &port)
	allow, err := hostpattern.Parse([]string{"loop.test", "meta.test", "mapped.test", "listed.test", "127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Allow: allow, Resolve: resolver(map[string][]string{
		"loop.test":   {"127.0.0.2"},
		"meta.test":   {"169.254.169.254", "10.0.0.1", "100.64.0.1", "fc00::1"},
		"mapped.test": {"::ffff:192.168.1.1"},
		"listed.test": {"10.9.9.9", "127.0.0.1"}, // the listed one is reached
	})}
	tests := []struct {
		note, host string
		refused    bool
	}{
		{note: "loopback", host: "loop.test", refused: true},
		{note: "link-local, private, shared and unique local", host: "meta.test", refused: true},
		{note: "private, mapped into v6", host: "mapped.test", refused: true},
		{note: "an internal address that is listed", host: "listed.test"},
		{note: "a listed address", host: "127.0.0.1"},
		{note: "an address not listed", host: "127.0.0.2", refused: true},
		{note: "a listed address mapped into v6", host: "::ffff:127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			c, err := p.Dial(context.Background(), tc.host, port)
			var r *refusal
			if refused := errors.As(err, &r); refused != tc.refused {
				t.Errorf("Dial(%s) = %v, refused %v, want %v", tc.host, err, refused, tc.refused)
			}
			if c != nil {
				c.Close()
			}
		})
	}
}

// TestR8ProxyServesHTTPAndConnect: on one client connection, two plain
// HTTP requests, a refused one that closes it; a CONNECT tunnel on
// another; every refusal logged with its host.
func TestR8ProxyServesHTTPAndConnect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path %s host %s proxy-auth %q", r.URL.Path, r.Host, r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	allow, _ := hostpattern.Parse([]string{"good.test:" + u.Port(), "127.0.0.1:" + u.Port()})
	var log strings.Builder
	p := &Proxy{Allow: allow, Log: slog.New(slog.NewTextHandler(&log, nil)),
		Resolve: resolver(map[string][]string{"good.test": {"127.0.0.1"}, "bad.test": {"127.0.0.1"}})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Serve(ctx, l)

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	get := func(target string) (*http.Response, string) {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n", target)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, path := range []string{"/one", "/two"} {
		resp, body := get("http://good.test:" + u.Port() + path)
		if resp.StatusCode != 200 || body != fmt.Sprintf("path %s host good.test:%s proxy-auth \"\"", path, u.Port()) {
			t.Errorf("GET %s: %d %q", path, resp.StatusCode, body)
		}
	}
	if resp, body := get("http://bad.test:" + u.Port() + "/"); resp.StatusCode != 403 || !strings.Contains(body, "bad.test:"+u.Port()+" is not in the sandbox's network allow list") {
		t.Errorf("a name not listed: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection stays open after a refusal: %v", err)
	}

	for _, tc := range []struct {
		note, authority string
		status          int
	}{
		{note: "a listed name", authority: "good.test:" + u.Port(), status: 200},
		{note: "a name not listed", authority: "bad.test:" + u.Port(), status: 403},
		{note: "an address not listed", authority: "127.0.0.1:1", status: 403},
		{note: "no port", authority: "good.test", status: 400},
	} {
		t.Run(tc.note, func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n", tc.authority)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("CONNECT %s: %v %v, want %d", tc.authority, resp, err, tc.status)
			}
			if tc.status != 200 {
				return
			}
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), "path /tunnel") {
				t.Errorf("through the tunnel: %q", b)
			}
		})
	}
	for _, host := range []string{"host=bad.test", "host=127.0.0.1 port=1"} {
		if !strings.Contains(log.String(), "refused a connection") || !strings.Contains(log.String(), host) {
			t.Errorf("the log lacks %s:\n%s", host, log.String())
		}
	}
}

func TestR8ProxyBadRequests(t *testing.T) {
	p := &Proxy{}
	for _, tc := range []struct{ note, req, want string }{
		{note: "origin form", req: "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", want: "400"},
		{note: "https in plain", req: "GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", want: "400"},
		{note: "not HTTP", req: "\x16\x03\x01 hello\r\n\r\n", want: "400"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			client, server := net.Pipe()
			go p.ServeConn(context.Background(), server)
			go io.WriteString(client, tc.req)
			b, _ := io.ReadAll(client)
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("got %q, want %q", b, tc.want)
			}
		})
	}
}

// holdServer accepts connections and keeps them until the client closes,
// sending send (if any) every gap count times; it drops what it is sent.
func holdServer(t *testing.T, send string, count int, gap time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				io.Copy(io.Discard, c)
				c.Close() // the client is gone
			}()
			go func() {
				for i := 0; send != "" && i < count; i++ {
					time.Sleep(gap)
					io.WriteString(c, send)
				}
			}()
		}
	}()
	return l.Addr().String()
}

// serveProxy serves p on a loopback port until the test ends.
func serveProxy(t *testing.T, p *Proxy) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go p.Serve(ctx, l)
	return l.Addr().String()
}

// TestR8ProxyIdleTimeout: a tunnel or request through which nothing moves
// either way for the idle time is closed (a request waiting on its
// upstream with a 504 and a sentence); a tunnel busy one way stays open.
func TestR8ProxyIdleTimeout(t *testing.T) {
	silent := holdServer(t, "", 0, 0)
	chatty := holdServer(t, "x", 60, 50*time.Millisecond)
	allow, _ := hostpattern.Parse([]string{silent, chatty})
	proxy := serveProxy(t, &Proxy{Allow: allow, Idle: 2 * time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	tests := []struct {
		note, request, want string
	}{
		{note: "an idle tunnel is closed", request: "CONNECT " + silent + " HTTP/1.1\r\nHost: " + silent + "\r\n\r\n", want: "HTTP/1.1 200 Connection established\r\n\r\n"},
		{note: "a tunnel busy one way stays open", request: "CONNECT " + chatty + " HTTP/1.1\r\nHost: " + chatty + "\r\n\r\n", want: "HTTP/1.1 200 Connection established\r\n\r\n" + strings.Repeat("x", 60)},
		{note: "a request whose upstream answers nothing", request: "GET http://" + silent + "/ HTTP/1.1\r\nHost: " + silent + "\r\n\r\n", want: "504 Gateway Timeout"},
		{note: "a connection that sends no request", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tc.request)
			got, err := io.ReadAll(c) // until the proxy closes it
			if err != nil || !strings.Contains(string(got), tc.want) || tc.want == "" && len(got) != 0 {
				t.Errorf("got %q (%v), want %q", got, err, tc.want)
			}
			if strings.Contains(tc.want, "504") && !strings.Contains(string(got), "sent nothing for 2s") {
				t.Errorf("the 504 does not say why: %q", got)
			}
		})
	}
}

// TestR8ProxyBoundsConnections: beyond MaxConns open at once, a connection
// is answered 503 with a sentence and closed, and logged; once one closes,
// another is served. A bound of 0 or below is the default.
func TestR8ProxyBoundsConnections(t *testing.T) {
	up := holdServer(t, "", 0, 0)
	allow, _ := hostpattern.Parse([]string{up})
	var log lockedbuf.Buffer
	p := &Proxy{Allow: allow, MaxConns: 2, Log: slog.New(slog.NewTextHandler(&log, nil))}
	proxy := serveProxy(t, p)
	var rest []byte
	tunnel := func() (net.Conn, string) {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", up)
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		if strings.Contains(line, "503") {
			rest, _ = io.ReadAll(br)
		}
		return c, line
	}
	tests := []struct {
		note, want string
	}{
		{note: "the first", want: "200"},
		{note: "the second", want: "200"},
		{note: "the third, beyond the bound", want: "503"},
	}
	var open []net.Conn
	for _, tc := range tests {
		c, line := tunnel()
		open = append(open, c)
		if !strings.Contains(line, tc.want) {
			t.Errorf("%s: %q, want %s", tc.note, line, tc.want)
		}
	}
	if !strings.Contains(string(rest), "already has 2 connections open through its proxy") {
		t.Errorf("the 503 does not say why: %q", rest)
	}
	open[0].Close()
	for { // the slot frees once the proxy sees the close
		c, line := tunnel()
		c.Close()
		if strings.Contains(line, "200") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	open[1].Close()
	if logs := log.String(); !strings.Contains(logs, "beyond its bound") {
		t.Errorf("the refusal is not logged:\n%s", logs)
	}
	for _, tc := range []struct {
		note string
		max  int
	}{{note: "zero", max: 0}, {note: "negative", max: -1}} {
		q := &Proxy{MaxConns: tc.max, Idle: -time.Second}
		if (&activity{idle: q.idle()}).idle != DefaultIdle {
			t.Errorf("%s: idle %v", tc.note, q.idle())
		}
		proxy := serveProxy(t, &Proxy{Allow: allow, MaxConns: tc.max})
		var cs []net.Conn
		for range 3 {
			c, err := net.Dial("tcp", proxy)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", up)
			if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.Contains(line, "200") {
				t.Errorf("%s: a bound of %d refused the third connection: %q", tc.note, tc.max, line)
			}
		}
		for _, c := range cs {
			c.Close()
		}
	}
}
