package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/policydir"
)

// BenchmarkMCPCall is an Echo call through aimon-gw mcp (the guard, the
// receiving middleware, the one decision, the gate) against the anchor of
// issue 26: the go-sdk alone serving an Echo tool over its own stdio
// transport, both on pipes, in process, called by the go-sdk's client.
// Each round times the same calls on both, in turn, sequentially and 8 at
// a time; x:seq and x:par8 are the gateway's time over the anchor's.
func BenchmarkMCPCall(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := policydir.Write(b, map[string]string{
		"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\nvalidation: \"enforce\"\nagent: \"allowed-tools\": [\"Echo\"]\n",
	})
	gw := benchClient(b, ctx, func(in io.Reader, out io.Writer) {
		if err := serveMCP(ctx, mcpParams{Surface: "agent", Policy: dir, Workdir: dir, Stdin: in, Stdout: out, Log: discard}); err != nil {
			b.Error(err)
		}
	})
	anchor := benchClient(b, ctx, func(in io.Reader, out io.Writer) {
		s := mcp.NewServer(&mcp.Implementation{Name: "anchor", Version: "v0"}, nil)
		s.AddTool(&mcp.Tool{Name: "Echo", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
		if err := s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}); err != nil && ctx.Err() == nil {
			b.Error(err)
		}
	})
	const calls = 50
	call := func(s *mcp.ClientSession, i int) {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": fmt.Sprintf("m%d", i)}})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	seq := func(s *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		for i := range calls {
			call(s, i)
		}
		return time.Since(t0)
	}
	par := func(s *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < calls; i += 8 {
					call(s, i)
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	var gwSeq, anSeq, gwPar, anPar time.Duration
	for b.Loop() {
		anSeq += seq(anchor)
		gwSeq += seq(gw)
		anPar += par(anchor)
		gwPar += par(gw)
	}
	n := float64(b.N * calls)
	b.ReportMetric(float64(gwSeq.Microseconds())/n, "µs/call:gw-seq")
	b.ReportMetric(float64(anSeq.Microseconds())/n, "µs/call:sdk-seq")
	b.ReportMetric(float64(gwSeq)/float64(anSeq), "x:seq")
	b.ReportMetric(float64(gwPar)/float64(anPar), "x:par8")
}

// benchClient connects the go-sdk's client to a server that serve runs
// on a pair of pipes.
func benchClient(b *testing.B, ctx context.Context, serve func(in io.Reader, out io.Writer)) *mcp.ClientSession {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		serve(inR, outW)
		outW.Close()
	}()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); inW.Close() })
	return s
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
