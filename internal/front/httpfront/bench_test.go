package httpfront

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/testkit/cputime"
)

// BenchmarkListenCall is an Echo call through mcp --listen (bearer token,
// principal, the one decision, the gate) against the anchor of issue 49:
// the go-sdk's own stateful streamable-HTTP server with the same tool, one
// session, both on loopback in this process, called by the go-sdk's
// client. The gateway is called at the client's own protocol (2026-07-28,
// stateless) and at 2025-11-25, the one the anchor's stateful session
// speaks. Each round times the same sequential calls on each in turn;
// x:… are medians of the per-round ratios gateway/anchor, wall and
// processor time (the process's, the client's included).
func BenchmarkListenCall(b *testing.B) {
	ctx := b.Context()
	base := benchFront(b)
	anchor := benchAnchor(b)
	connect := func(endpoint, version string) *mcp.ClientSession {
		hc := &http.Client{Transport: bearerRT{"t-alice"}}
		s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	sessions := []*mcp.ClientSession{connect(anchor, ""), connect(base+MCPPath, ""), connect(base+MCPPath, "2025-11-25")}
	const calls = 100
	round := func(s *mcp.ClientSession) {
		for i := range calls {
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": fmt.Sprintf("m%d", i)}})
			if err != nil || r.IsError {
				b.Fatalf("Echo: %v %+v", err, r)
			}
		}
	}
	for _, s := range sessions {
		round(s) // warm: connections, the policy's first calls
	}
	var wall, cpu [2][]float64
	for i := 0; b.Loop(); i++ {
		var w, c [3]time.Duration
		for j := range sessions {
			k := (i + j) % len(sessions)
			t0, c0 := time.Now(), cputime.Process()
			round(sessions[k])
			w[k], c[k] = time.Since(t0), cputime.Process()-c0
		}
		for k := range 2 {
			wall[k] = append(wall[k], float64(w[k+1])/float64(w[0]))
			cpu[k] = append(cpu[k], float64(c[k+1])/float64(c[0]))
		}
	}
	b.ReportMetric(cputime.Median(wall[0]), "x:wall")
	b.ReportMetric(cputime.Median(cpu[0]), "x:cpu")
	b.ReportMetric(cputime.Median(wall[1]), "x:wall-2025-11-25")
	b.ReportMetric(cputime.Median(cpu[1]), "x:cpu-2025-11-25")
}

type bearerRT struct{ token string }

func (t bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// benchFront serves an Echo policy to alice until the benchmark ends and
// returns its base URL.
func benchFront(b *testing.B) string {
	pol := "tools: {Echo: {builtin: Echo}}\nvalidation: enforce\nagent: {allowed-tools: [Echo]}\nprincipals: {alice: {subject: alice, surface: [agent]}}\n"
	base, _, _ := serveFront(b, pol)
	return base
}

// serveFront serves policy (YAML) from a directory of its own until the
// test ends, to callers with the tokens t-alice, t-bob and t-rita; it
// returns the base URL, the gateway and the policy directory.
func serveFront(tb testing.TB, pol string, opts ...func(*Options)) (string, *gateway.Gateway, string) {
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(pol), 0o644); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *gateway.Gateway, 1)
	done := make(chan error, 1)
	o := Options{Listener: ln, Verifier: staticVerifier, Version: "test",
		Reload: reload.Options{Dir: dir, Debounce: 20 * time.Millisecond, Gateway: gateway.Options{Workdir: dir, Logger: slog.New(slog.DiscardHandler),
			Limits: gateway.LimitsIn(nil)}},
		OnReady: func(g *gateway.Gateway) { ready <- g }}
	for _, opt := range opts {
		opt(&o)
	}
	go func() { done <- Serve(ctx, o) }()
	tb.Cleanup(func() { cancel(); <-done })
	select {
	case g := <-ready:
		// OnReady is told the gateway just before the front serves it.
		base := "http://" + ln.Addr().String()
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			resp, err := http.Get(base + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(end) {
				tb.Fatalf("/readyz never answered 200: %v", err)
			}
		}
		return base, g, dir
	case err := <-done:
		tb.Fatalf("Serve: %v", err)
	}
	return "", nil, ""
}

func staticVerifier(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sub, ok := map[string]string{"t-alice": "alice", "t-bob": "bob", "t-rita": "rita"}[token]
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: sub, Extra: map[string]any{"aimon-gw/claims": policy.Claims{Subject: sub}}}, nil
}

// benchAnchor serves the go-sdk's stateful streamable-HTTP Echo server and
// returns its endpoint.
func benchAnchor(b *testing.B) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "anchor", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{Name: "Echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
