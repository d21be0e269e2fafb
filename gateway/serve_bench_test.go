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

// BenchmarkServeForms is the same Echo calls in each line form of the
// protocol: a lone tool_use, an Anthropic message, the same as a whole
// Messages API response, a Chat Completions message and a Responses
// function_call item.
func BenchmarkServeForms(b *testing.B) {
	g, _ := newGateway(b, "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\n", nil)
	g.log = discardLog
	forms := []struct {
		name string
		line func(i int, times string) string
	}{
		{"tool_use", func(i int, times string) string {
			return fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":"Echo","input":{"message":"m%d","times":%s}}`, i, i, times)
		}},
		{"message", func(i int, times string) string {
			return fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"c%d","name":"Echo","input":{"message":"m%d","times":%s}}]}`, i, i, times)
		}},
		{"api-response", func(i int, times string) string {
			return fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"c%d","name":"Echo","input":{"message":"m%d","times":%s}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`, i, i, i, times)
		}},
		{"chat", func(i int, times string) string {
			return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"Echo","arguments":%q}}]}`, i, fmt.Sprintf(`{"message":"m%d","times":%s}`, i, times))
		}},
		{"responses", func(i int, times string) string {
			return fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"Echo","arguments":%q}`, i, fmt.Sprintf(`{"message":"m%d","times":%s}`, i, times))
		}},
	}
	for _, f := range forms {
		var in bytes.Buffer
		for i := range 1000 {
			times := "2"
			if i%10 == 9 {
				times = `"2"`
			}
			in.WriteString(f.line(i, times) + "\n")
		}
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := g.Serve(b.Context(), bytes.NewReader(in.Bytes()), io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000)/1000, "µs/call")
		})
	}
}
