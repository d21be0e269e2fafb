// Package mcptest serves small MCP servers, on the official Go SDK, for
// tests of the gateway's upstream tools.
package mcptest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An Echo server answers its tool echo with "echo " and the text it was
// given (and repeat with its text repeated), over streamable HTTP, and only
// to requests that carry its bearer token.
type Echo struct {
	// URL is the server's endpoint.
	URL string

	mu  sync.Mutex
	got []string
}

// NewEcho starts an Echo server that accepts token, stopped when t ends.
func NewEcho(t testing.TB, token string) *Echo { return NewEchoAt(t, token, "127.0.0.1:0") }

// NewEchoAt is NewEcho listening at addr (host:port): a test can start the
// server where a gateway found none.
func NewEchoAt(t testing.TB, token, addr string) *Echo {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &Echo{}
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "v1"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes its text."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		e.mu.Lock()
		e.got = append(e.got, in.Text)
		e.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo " + in.Text}}}, nil, nil
	})
	type repeatIn struct {
		Text  string `json:"text"`
		Times int    `json:"times"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "repeat", Description: "Answers with its text, times times: a big answer to a small call."}, func(_ context.Context, _ *mcp.CallToolRequest, in repeatIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(in.Text, in.Times)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	e.URL = srv.URL + "/mcp"
	return e
}

// Got returns the texts the server echoed, in order.
func (e *Echo) Got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}
