package gateway

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"testing"
)

// BenchmarkServeEcho is serve's whole line path on Echo calls, about 10% of
// them refused by the gate (times as a string), as bench/serve.sh feeds it.
func BenchmarkServeEcho(b *testing.B) {
	g, _ := newGateway(b, "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\n", nil)
	g.log = discardLog
	var in bytes.Buffer
	for i := range 1000 {
		times := "2"
		if i%10 == 9 {
			times = `"2"`
		}
		fmt.Fprintf(&in, `{"type":"tool_use","id":"c%d","name":"Echo","input":{"message":"m%d","times":%s}}`+"\n", i, i, times)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := g.Serve(b.Context(), bytes.NewReader(in.Bytes()), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000)/1000, "µs/call")
}

var discardLog = newDiscardLogger()

func newDiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
