package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/front/httpfront"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/testkit/policydir"
)

// traceparent adds a W3C trace context and a bearer token to each request.
type traceparent struct{ value, token string }

func (tp traceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", tp.value)
	r.Header.Set("Authorization", "Bearer "+tp.token)
	return http.DefaultTransport.RoundTrip(r)
}

// An MCP call over streamable HTTP (httpfront, the SDK's handler, the MCP
// front end) is traced in the trace its request's traceparent names: the
// request's span is the traceparent's child, and the call and its steps
// are under it; /metrics served beside it counts the call.
func TestR7TracesAnMCPCallOverHTTP(t *testing.T) {
	tr, exp := tracing(t)
	m := NewMetrics()
	dir := policydir.Write(t, map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo"]
principals: alice: {subject: "alice", surface: ["agent"]}
`})
	sum := sha256.Sum256([]byte("tok-alice"))
	tokens := filepath.Join(t.TempDir(), "tokens")
	writeTestFile(t, tokens, "sha256:"+hex.EncodeToString(sum[:])+" alice\n")
	verifier, err := authn.StaticTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		served <- httpfront.Serve(ctx, httpfront.Options{Listener: ln, Verifier: verifier, Drain: time.Second,
			Reload: reload.Options{Dir: dir, Gateway: gateway.Options{Workdir: t.TempDir(), Chain: []string{"agent"},
				Decisions: m.Decisions(nil), Trace: tr.Tracer()}},
			Middleware: tr.Middleware, Handlers: map[string]http.Handler{"GET /metrics": m.Handler()},
			OnReady: func(gw *gateway.Gateway) { m.Follow(func() *gateway.Gateway { return gw }); close(ready) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("httpfront.Serve: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-served:
		t.Fatalf("httpfront.Serve returned before a policy was in force: %v", err)
	}
	base := "http://" + ln.Addr().String()
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	hc := &http.Client{Transport: traceparent{"00-" + traceID + "-" + parentID + "-01", "tok-alice"}}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + httpfront.MCPPath, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exp.Reset()
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || r.IsError {
		t.Fatalf("Echo: %v %+v", err, r)
	}
	// The request's span ends after its response reached the client:
	// wait until the span the call's names as parent has been exported.
	spans := requestSpansEnded(t, exp)
	byID := map[string]string{}
	var call, steps int
	for _, sp := range spans {
		byID[sp.SpanContext.SpanID().String()] = sp.Name
	}
	for _, sp := range spans {
		if sp.SpanContext.TraceID().String() != traceID {
			t.Errorf("span %q is in trace %s, not the request's %s", sp.Name, sp.SpanContext.TraceID(), traceID)
		}
		parent := byID[sp.Parent.SpanID().String()]
		switch sp.Name {
		case "POST " + httpfront.MCPPath:
			if sp.Parent.SpanID().String() != parentID {
				t.Errorf("the request's span has parent %s, want the traceparent's %s", sp.Parent.SpanID(), parentID)
			}
		case "call Echo":
			call++
			if parent != "POST "+httpfront.MCPPath {
				t.Errorf("the call's span is under %q, want the request's", parent)
			}
		case "decode", "decide", "run":
			steps++
			if parent != "call Echo" {
				t.Errorf("step %s is under %q, want the call's", sp.Name, parent)
			}
		}
	}
	if call != 1 || steps != 3 {
		t.Errorf("spans %v: want one call Echo with decode, decide and run under it", byID)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams := scrapeBody(t, resp)
	if n, _ := value(fams, "aimon_gw_calls_total", map[string]string{"tool": "Echo", "rule": "P6", "verdict": VerdictAllow}); n != 1 {
		t.Errorf("/metrics counts %v allowed Echo calls, want 1", n)
	}
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// requestSpansEnded returns the exported spans once every span's parent
// within the request's trace has ended too (the server ends the request's
// span after the client has read its answer).
func requestSpansEnded(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStubs {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		spans := exp.GetSpans()
		ids := map[string]bool{}
		for _, sp := range spans {
			ids[sp.SpanContext.SpanID().String()] = true
		}
		missing := false
		for _, sp := range spans {
			if sp.Name == "call Echo" && !ids[sp.Parent.SpanID().String()] {
				missing = true
			}
		}
		if !missing || time.Now().After(deadline) {
			return spans
		}
	}
}
