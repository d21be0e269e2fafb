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

	"aimon.dev/gw/internal/core/hostpattern"
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
