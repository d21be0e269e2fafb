package httpfront

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
)

// TestR5FrontEndpoints: a deployment's own handlers are served beside the
// gateway's without a token, its middleware sees every request, /healthz
// and /readyz answer, and the MCP endpoint wants a token of a caller the
// policy maps; Serve returns once its context is done.
func TestR5FrontEndpoints(t *testing.T) {
	dir := t.TempDir()
	pol := "tools: {Echo: {builtin: Echo}}\nagent: {allowed-tools: [Echo]}\nprincipals: {alice: {subject: alice, surface: [agent]}}\n"
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	verifier := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if token != "t-alice" && token != "t-eve" {
			return nil, auth.ErrInvalidToken
		}
		sub := strings.TrimPrefix(token, "t-")
		return &auth.TokenInfo{UserID: sub, Extra: map[string]any{"aimon-gw/claims": policy.Claims{Subject: sub}}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{Listener: ln, Verifier: verifier, Version: "test",
			Reload:   reload.Options{Dir: dir, Gateway: gateway.Options{Workdir: dir, Logger: slog.New(slog.DiscardHandler)}},
			Handlers: map[string]http.Handler{"GET /metrics": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "calls 0\n") })},
			Middleware: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen.Add(1); next.ServeHTTP(w, r) })
			},
		})
	}()
	base := "http://" + ln.Addr().String()
	get := func(path, token, body string) (int, string) {
		method := http.MethodGet
		if body != "" {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for ready := false; !ready; {
		select {
		case err := <-done:
			t.Fatalf("Serve returned before it was ready: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == 200
		}
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	tests := []struct {
		note, path, token, body string
		status                  int
		says                    string
	}{
		{"health", "/healthz", "", "", 200, "ok"},
		{"ready", "/readyz", "", "", 200, "ready: generation 1"},
		{"a handler of the deployment's own", "/metrics", "", "", 200, "calls 0"},
		{"MCP without a token", "/mcp", "", list, 401, "no bearer token"},
		{"MCP with a token the verifier refuses", "/mcp", "t-mallory", list, 401, "invalid token"},
		{"MCP as a caller the policy does not map", "/mcp", "t-eve", list, 403, `The caller with subject "eve" may not call`},
		{"MCP as alice", "/mcp", "t-alice", list, 200, `"name":"Echo"`},
		{"nothing else", "/admin", "", "", 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			if code, body := get(tc.path, tc.token, tc.body); code != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("%d %q, want %d saying %q", code, body, tc.status, tc.says)
			}
		})
	}
	if seen.Load() < int64(len(tests)) {
		t.Errorf("the middleware saw %d requests", seen.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
