package provision

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/authntest"
	"aimon.dev/gw/tools"
)

// BenchmarkR5ExchangedTokenCached: one call of an HTTP MCP server reached
// with the caller's identity by RFC 8693 token exchange, its exchanged
// token cached, against the same call of the same server reached with a
// header of the gateway's, through the upstream binding, in one loop.
// exchanged/plain is what the caller's identity adds once its token is
// cached (goal: no round trip, so near 1); exchanges is how many the
// issuer granted in the whole run (1: the first call's).
func BenchmarkR5ExchangedTokenCached(b *testing.B) {
	iss := authntest.New(b)
	s := mcp.NewServer(&mcp.Implementation{Name: "whoami", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		auth := req.Extra.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "Bearer ") {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no bearer token"}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer srv.Close()
	up := &Upstreams{}
	defer up.Close()
	ctx := context.Background()
	bindOf := func(server string, id *policy.Identity, headers map[string]string) Binding {
		bt, err := up.Bind(ctx, &policy.Tool{Name: server + "__whoami", Upstream: &policy.Upstream{Server: server, Tool: "whoami",
			URL: srv.URL, Headers: headers, Identity: id, NoPin: true}})
		if why := unavailable(bt, err); why != "" {
			b.Fatal(why)
		}
		b.Cleanup(bt.Release)
		return bt
	}
	plain := bindOf("plain", nil, map[string]string{"Authorization": "Bearer the-gateways-own"})
	exchanged := bindOf("api", &policy.Identity{Header: "Authorization", Prefix: "Bearer ", Exchange: &policy.Exchange{
		TokenURL: iss.URL + "/token", Audience: "https://api.test", ClientID: authntest.ClientID, ClientSecret: authntest.ClientSecret}}, nil)
	caller := WithCaller(ctx, &policy.Claims{Subject: "alice", Token: iss.Token(b, iss.Claims("alice", "http://gw.test/mcp"))}, nil)
	run := func(bt Binding, ctx context.Context) {
		if r := bt.Tool.Run(ctx, nil, tools.Input{}); r.IsError {
			b.Fatal(r.Text)
		}
	}
	for range 20 { // warm both: sessions made, the token exchanged
		run(plain, ctx)
		run(exchanged, caller)
	}
	var tookPlain, tookExchanged time.Duration
	i := 0
	for b.Loop() {
		// Each first in turn: no order's favour.
		for j := range 2 {
			t0 := time.Now()
			if (i+j)%2 == 0 {
				run(plain, ctx)
				tookPlain += time.Since(t0)
			} else {
				run(exchanged, caller)
				tookExchanged += time.Since(t0)
			}
		}
		i++
	}
	b.ReportMetric(float64(tookPlain)/float64(b.N), "plain-ns/call")
	b.ReportMetric(float64(tookExchanged)/float64(tookPlain), "exchanged/plain")
	b.ReportMetric(float64(iss.Exchanges.Load()), "exchanges")
}
