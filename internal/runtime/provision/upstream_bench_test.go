package provision

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/mcptest"
	"aimon.dev/gw/tools"
)

// BenchmarkUpstreamBinding: one read_file call to the in-test Go server
// through the upstream binding alone (no front end, gate or decision),
// against the same call made directly with the SDK's client, in one loop.
// binding/direct is what the binding adds over the SDK client it wraps, so
// it sits near 1 by construction; issue 29's figure for a whole front end
// is BenchmarkUpstreamFrontEnds in cmd/aimon-gw.
func BenchmarkUpstreamBinding(b *testing.B) {
	dir := b.TempDir()
	bin := fsServer(b)
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("hello"), 0o644)
	up := &Upstreams{}
	defer up.Close()
	bind, err := up.Bind(context.Background(), &policy.Tool{Name: "fs__read_file", Upstream: &policy.Upstream{Server: "fs", Tool: "read_file", Command: []string{bin}, NoPin: true}})
	if err != nil {
		b.Fatal(err)
	}
	defer bind.Release()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	in := tools.Input{"path": file}
	var viaGW, viaSDK time.Duration
	for b.Loop() {
		t0 := time.Now()
		if r := bind.Tool.Run(context.Background(), nil, in); r.IsError {
			b.Fatal(r.Text)
		}
		t1 := time.Now()
		if _, err := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: in}); err != nil {
			b.Fatal(err)
		}
		viaGW += t1.Sub(t0)
		viaSDK += time.Since(t1)
	}
	b.ReportMetric(float64(viaGW)/float64(viaSDK), "binding/direct")
}

// BenchmarkUpstreamMemory: what the gateway itself holds per upstream
// server it keeps a session with (the SDK client session, its goroutines,
// the tool definitions), the server's own process aside: the live heap
// after a GC with 8 servers bound, less the heap before, per server.
// Run it with -benchtime=3x; each iteration starts 8 servers.
func BenchmarkUpstreamMemory(b *testing.B) {
	bin := fsServer(b)
	const servers = 8
	var heap, goroutines float64
	for b.Loop() {
		up := &Upstreams{}
		before, g0 := liveHeap(), runtime.NumGoroutine()
		var binds []Binding
		for i := range servers {
			// Another environment is another server.
			bt, err := up.Bind(context.Background(), &policy.Tool{Name: "fs__read_file", Upstream: &policy.Upstream{Server: "fs", Tool: "read_file", Command: []string{bin}, Env: map[string]string{"N": fmt.Sprint(i)}, NoPin: true}})
			if err != nil {
				b.Fatal(err)
			}
			binds = append(binds, bt)
		}
		heap += float64(liveHeap()-before) / servers
		goroutines += float64(runtime.NumGoroutine()-g0) / servers
		for _, bt := range binds {
			bt.Release()
		}
		up.Close()
	}
	b.ReportMetric(heap/float64(b.N), "heap-B/server")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/server")
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkUpstreamHTTPBinding: one echo call to a streamable-HTTP server
// (the SDK's, in this process, answering in event streams) through the
// binding on the relay and on the SDK's client, against the same call
// made directly with the SDK's client, interleaved in one loop, each
// round starting at the next path (medians of the per-round ratios):
// relay/direct and sdk/direct are what each path of the binding costs
// over the direct call (issue 49).
func BenchmarkUpstreamHTTPBinding(b *testing.B) {
	web := mcptest.NewEcho(b, "tok")
	tool := &policy.Tool{Name: "web__echo", Upstream: &policy.Upstream{Server: "web", Tool: "echo", URL: web.URL, Headers: map[string]string{"Authorization": "Bearer tok"}, NoPin: true}}
	run := map[bool]func(){}
	for _, sdk := range []bool{false, true} {
		up := &Upstreams{sdkCalls: sdk}
		defer up.Close()
		bind, err := up.Bind(context.Background(), tool)
		if err != nil {
			b.Fatal(err)
		}
		defer bind.Release()
		run[sdk] = func() {
			if r := bind.Tool.Run(context.Background(), nil, tools.Input{"text": "hello"}); r.IsError {
				b.Fatal(r.Text)
			}
		}
	}
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: web.URL,
		HTTPClient: &http.Client{Transport: headerTransport{h: http.Header{"Authorization": {"Bearer tok"}}, next: http.DefaultTransport}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	paths := []func(){
		func() {
			if _, err := direct.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}); err != nil {
				b.Fatal(err)
			}
		},
		run[false],
		run[true],
	}
	// Each round starts at the next path, so that none is always the one
	// after another; the ratios are medians of the per-round ratios.
	took := make([][]time.Duration, len(paths))
	round := 0
	for b.Loop() {
		for i := range paths {
			k := (round + i) % len(paths)
			t0 := time.Now()
			paths[k]()
			took[k] = append(took[k], time.Since(t0))
		}
		round++
	}
	ratio := func(k int) float64 {
		rs := make([]float64, len(took[0]))
		for i := range rs {
			rs[i] = float64(took[k][i]) / float64(took[0][i])
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	b.ReportMetric(ratio(1), "relay/direct")
	b.ReportMetric(ratio(2), "sdk/direct")
}
