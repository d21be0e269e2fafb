package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/front/mcpfront"
	"aimon.dev/gw/internal/testkit/policydir"
)

// BenchmarkUpstreamFrontEnds: one Echo call to the in-test go-sdk server
// (its own process, over stdio) made directly with the SDK's client, as a
// tool_use line through serve, and as a tools/call through mcp, the whole
// front end each time (reading, deciding, the gate, the upstream call,
// the answer written), in one interleaved loop. serve/direct and
// mcp/direct are the ratios issue 29 sets at 1.15 at most. Each front end
// runs in this process over pipes, as a harness or an MCP client would
// drive it over the binary's standard input and output. proxy/direct is
// the floor of an MCP front end built on the SDK at both ends: an SDK
// server on pipes whose Echo calls the same server through an SDK client
// and nothing else (no gate, no decision), timed in the same loop;
// relay/direct is the physical floor of any front end, a client whose
// frames are copied as bytes to the server's pipes and back, and
// mcp-sdk/direct is mcp with every tools/call left to the SDK's server
// (issue 49). Each ratio is the median of the per-round ratios.
func BenchmarkUpstreamFrontEnds(b *testing.B) {
	bin := fsServer(b)
	dir := b.TempDir()
	policydir.WriteIn(b, dir, map[string]string{"policy.cue": fmt.Sprintf(`package policy

servers: fs: {command: [%q], expose: ["echo"], pin: false}
agent: "allowed-tools": ["fs__echo"]
`, bin)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	direct, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := serve(ctx, serveParams{Policy: dir, Surface: "agent", Workdir: dir, Stdin: inR, Stdout: outW, Log: discard, MaxLineBytes: 1 << 20, LoadTimeout: time.Minute})
		served <- err
		inR.CloseWithError(fmt.Errorf("serve has returned: %v", err)) // a write fails, never waits
		outW.Close()
	}()
	replies := bufio.NewReader(outR)
	line := []byte(`{"type":"tool_use","id":"1","name":"fs__echo","input":{"text":"hello"}}` + "\n")
	viaServe := func() {
		if _, err := inW.Write(line); err != nil {
			b.Fatal(err)
		}
		reply, err := replies.ReadString('\n')
		if err != nil || !strings.Contains(reply, `"is_error":false`) {
			b.Fatalf("serve: %v %s", err, reply)
		}
	}

	// The second has every tools/call answered by the SDK's server, as
	// before the guard answered them (issue 49).
	viaMCP := mcpClient(b, mcpParams{Policy: dir, Surface: "agent", Workdir: dir, LoadTimeout: time.Minute})
	viaMCPSDK := mcpClientIn(b, mcpfront.WithSDKCalls(context.Background()), mcpParams{Policy: dir, Surface: "agent", Workdir: dir, LoadTimeout: time.Minute}, nil)

	proxied, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer proxied.Close()
	proxy := mcp.NewServer(&mcp.Implementation{Name: "proxy"}, nil)
	proxy.AddTool(&mcp.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return proxied.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: req.Params.Arguments})
	})
	pInR, pInW := io.Pipe()
	pOutR, pOutW := io.Pipe()
	go func() {
		proxy.Run(ctx, &mcp.IOTransport{Reader: pInR, Writer: pOutW})
		pOutW.Close()
	}()
	viaProxy, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.IOTransport{Reader: pOutR, Writer: pInW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer viaProxy.Close()

	viaRelay := byteRelay(b, ctx, bin)
	defer viaRelay.Close()

	call := func(s *mcp.ClientSession, name string) {
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "hello"}})
		if err != nil || r.IsError {
			b.Fatalf("%s: %v %v", name, err, r)
		}
	}
	paths := []func(){
		func() { call(direct, "echo") },
		viaServe,
		func() { call(viaMCP, "fs__echo") },
		func() { call(viaProxy, "echo") },
		func() { call(viaRelay, "echo") },
		func() { call(viaMCPSDK, "fs__echo") },
	}
	// Warm each path: the servers are started, the first calls made.
	for range 20 {
		for _, path := range paths {
			path()
		}
	}
	// Each round starts at the next path, so that none is always the one
	// after another (whose server has just run, whose garbage is fresh).
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
	// Medians of the per-round ratios: a shared machine's spikes move a
	// mean, not a median.
	ratio := func(k int) float64 {
		rs := make([]float64, len(took[0]))
		for i := range rs {
			rs[i] = float64(took[k][i]) / float64(took[0][i])
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	med := slices.Clone(took[0])
	slices.Sort(med)
	b.ReportMetric(float64(med[len(med)/2]), "direct-ns/call")
	b.ReportMetric(ratio(1), "serve/direct")
	b.ReportMetric(ratio(2), "mcp/direct")
	b.ReportMetric(ratio(3), "proxy/direct")
	b.ReportMetric(ratio(4), "relay/direct")
	b.ReportMetric(ratio(5), "mcp-sdk/direct")
	inW.Close()
}

// byteRelay is a client session with the server bin through a relay that
// copies bytes between the client's pipes and the server's, and reads
// nothing: the floor of a front end between the two.
func byteRelay(b *testing.B, ctx context.Context, bin string) *mcp.ClientSession {
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { io.Copy(stdin, inR); stdin.Close() }()
	go func() { io.Copy(outW, stdout); outW.Close() }()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
