package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listenCounter counts the subscriptions/listen requests a client sends.
type listenCounter struct {
	base http.RoundTripper
	n    atomic.Int32
}

func (c *listenCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"subscriptions/listen"`)) {
			c.n.Add(1)
		}
	}
	return c.base.RoundTrip(r)
}

// TestR10HTTPSlowRequestsAreCutOff: through the binary, with --read-timeout
// 1s, a client that sends a request's headers and half its body (to /mcp
// with and without a token, to the HTTP hook, to an approval page), or
// half its headers, has its connection closed, while the gateway serves
// another caller's calls; a subscriptions/listen stream opened before them
// outlives the bound on that one request and still carries the
// tools/list_changed of a reload, and a call that runs longer than the
// bound is answered (rule R10: every wait is bounded; the probe's V7).
func TestR10HTTPSlowRequestsAreCutOff(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--read-timeout", "1s")

	// The stream, opened first: it is older than the bound by the time
	// the slow connections are cut off.
	changed := make(chan struct{}, 8)
	counter := &listenCounter{base: bearer{"tok-rita", nil}}
	stream, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp", HTTPClient: &http.Client{Transport: counter}}, nil)
	if err != nil {
		t.Fatalf("connecting: %v\n%s", err, g.logs())
	}
	defer stream.Close()
	if n := counter.n.Load(); n != 1 {
		t.Fatalf("the client opened %d subscriptions/listen streams, want 1", n)
	}

	host := strings.TrimPrefix(g.base, "http://")
	head := func(path, auth string) string {
		h := "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 200\r\n"
		if auth != "" {
			h += "Authorization: Bearer " + auth + "\r\n"
		}
		return h + "\r\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"` // half of 200 bytes
	}
	slow := []struct{ note, send string }{
		{"half a body to /mcp", head("/mcp", "tok-alice")},
		{"half a body to /mcp without a token", head("/mcp", "")},
		{"half a body to the HTTP hook", head("/hooks/claude-code", "tok-alice")},
		{"half a body to an approval page", head("/approvals/0123456789abcdef", "")},
		{"half the headers", "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 200\r\n"},
	}
	conns := make([]net.Conn, len(slow))
	for i, s := range slow {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, s.send); err != nil {
			t.Fatalf("%s: %v", s.note, err)
		}
		conns[i] = c
	}

	// Another caller is served while they hold their connections.
	other := g.session("tok-alice", "", nil)
	echo := func(when string) {
		res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil || res.IsError || resultText(res) != "hi" {
			t.Errorf("an Echo %s: %v %+v\n%s", when, err, res, g.logs())
		}
	}
	echo("while slow clients hold their connections")

	// Each slow connection is closed: a read ends with EOF or a reset, not
	// with this test's own deadline, which is generous. They are read side
	// by side, so that one left open does not use up the others' time.
	deadline := time.Now().Add(time.Minute)
	ended := make([]chan error, len(conns))
	for i, c := range conns {
		c.SetReadDeadline(deadline)
		ended[i] = make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, c)
			ended[i] <- err
		}()
	}
	for i := range conns {
		if err := <-ended[i]; errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: the connection is still open a minute on", slow[i].note)
		}
	}
	echo("once the slow clients are cut off")

	// A call that runs longer than the bound is answered.
	res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "sleep 2"}})
	if err != nil || res.IsError {
		t.Errorf("a call of 2 s under a 1 s bound on reading requests: %v %+v\n%s", err, res, g.logs())
	}

	// The stream, older than the bound, still carries the reload's news,
	// and was not opened again.
	writeFile(t, filepath.Join(dir, "policy.cue"), strings.Replace(httpPolicy, `"allowed-tools": ["Read(./**)"]`, `"allowed-tools": ["Read(./**)", "Glob(./**)"]`, 1))
	select {
	case <-changed:
	case <-time.After(60 * time.Second):
		t.Fatalf("no tools/list_changed on the stream: %s", g.logs())
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("the client opened %d subscriptions/listen streams, want 1: the first was cut off", n)
	}
	if got := toolNames(t, stream); got != "Glob,Read" {
		t.Errorf("tools after the reload %s", got)
	}
}

// TestR10HTTPReadTimeoutFlag: --read-timeout must be a positive duration,
// and is for --listen only.
func TestR10HTTPReadTimeoutFlag(t *testing.T) {
	t.Parallel()
	tokens := tokensFile(t, staticTokens)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--listen", "127.0.0.1:0", "--tokens", tokens, "--read-timeout", "0s"}, "--read-timeout 0s is not a positive duration"},
		{[]string{"--read-timeout", "5s"}, "--read-timeout is for serving over HTTP"},
	} {
		cmd := exec.Command(gatewayBinary(t), append([]string{"mcp"}, tc.args...)...)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.says) {
			t.Errorf("%v: exit %d: %s; want 2 saying %q", tc.args, code, out, tc.says)
		}
	}
}
