package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestR2HTTPCancelledCallStopsItsTool: over stateless HTTP, as Codex and
// Gemini CLI call (protocol 2025-06-18), a tools/call that the client
// cancels with notifications/cancelled (a request of its own), or whose
// connection the client closes, stops its tool as over stdio: the
// command is gone, not left to run to its end.
func TestR2HTTPCancelledCallStopsItsTool(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens))
	post := func(ctx context.Context, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer tok-alice")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		return http.DefaultClient.Do(req)
	}
	call := func(ctx context.Context, id int, command string) chan error {
		done := make(chan error, 1)
		go func() {
			resp, err := post(ctx, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"Bash","arguments":{"command":%q}}}`, id, command))
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		for len(marked(command)) == 0 {
			select {
			case err := <-done:
				t.Fatalf("the call %q ended before it ran: %v\n%s", command, err, g.logs())
			case <-time.After(10 * time.Millisecond):
			}
		}
		return done
	}
	t.Run("notification", func(t *testing.T) {
		// Another caller's cancellation of the same id cancels nothing.
		call(context.Background(), 7, "sleep 61.25")
		cancelled := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`
		code, _, body := g.post("/mcp", "tok-rita", cancelled)
		if code/100 != 2 {
			t.Fatalf("another caller's cancellation: %d %s", code, body)
		}
		// The cancellation is handled before its answer: the call is
		// still running after it.
		if len(marked("sleep 61.25")) == 0 {
			t.Fatalf("another caller's cancellation stopped alice's call")
		}
		resp, err := post(context.Background(), cancelled)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		waitGone(t, "sleep 61.25")
	})
	t.Run("connection closed", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := call(ctx, 8, "sleep 62.25")
		cancel()
		<-done
		waitGone(t, "sleep 62.25")
	})
}
