package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"aimon.dev/gw/internal/testkit/cputime"
)

// benchLines is how many calls each input of the serve benchmarks holds.
const benchLines = 200

// content is one kind of message an agent sends, with the JSON string
// encoder of the program that wrote the line; the first is the plain ASCII
// anchor the others are measured against (issue 32: short ASCII messages
// never reach the escape paths). An escaped content names the content of
// the same text without escapes, its own anchor (issue 32: a line with
// \u escapes ≤ 1.1× the same line without).
type content struct {
	name string
	msg  func(i int) string
	enc  func(s string) string
	same string
}

var (
	worldly  = func(i int) string { return fmt.Sprintf("Grüße, 世界 — naïve café 🙂 #%d", i) }
	operated = func(i int) string { return fmt.Sprintf("if a < b && c > d { return } #%d", i) }
)

var benchContents = []content{
	{"ascii", func(i int) string { return fmt.Sprintf("m%d", i) }, rawJSON, ""},
	{"non-ascii", worldly, rawJSON, ""},
	{"shell", func(i int) string {
		return fmt.Sprintf(`cd "$HOME" && ls -la | grep '*.go' > /tmp/o; echo $(date) `+"`id`"+` \ #%d`, i)
	}, rawJSON, ""},
	{"operators", operated, rawJSON, ""},
	{"python", worldly, pythonJSON, "non-ascii"},
	{"go", operated, goJSON, "operators"},
}

// rawJSON is a JSON string with only what must be escaped escaped, UTF-8
// kept as it is (as Anthropic's and most SDKs' encoders write it).
func rawJSON(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// goJSON is a JSON string as Go's json.Marshal writes it: \u003c, \u003e,
// \u0026 for < > &.
func goJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pythonJSON is a JSON string as Python's json.dumps writes it by default
// (ensure_ascii): every non-ASCII character as \uXXXX, those beyond the
// BMP as a surrogate pair.
func pythonJSON(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSuffix(strings.TrimPrefix(rawJSON(s), `"`), `"`) {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, hi, lo)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return `"` + b.String() + `"`
}

// echoInput is an Echo call's input in the content's encoding; one call in
// ten gives times as a string, which the gate refuses.
func echoInput(c content, i int) string {
	times := "2"
	if i%10 == 9 {
		times = c.enc("2")
	}
	return `{"message":` + c.enc(c.msg(i)) + `,"times":` + times + `}`
}

// checkServed fails the benchmark unless every input is answered line for
// line with exactly its one call in ten refused, so that no input is timed
// on a path that only reports a malformed line.
func checkServed(b *testing.B, g *Gateway, names []string, inputs [][]byte) {
	for k, in := range inputs {
		var out bytes.Buffer
		if err := g.Serve(b.Context(), bytes.NewReader(in), &out); err != nil {
			b.Fatal(err)
		}
		lines, refused := bytes.Count(out.Bytes(), []byte("\n")), bytes.Count(out.Bytes(), []byte("must be an integer"))
		if lines != benchLines || refused != benchLines/10 {
			b.Fatalf("input %s: %d answers with %d refused, want %d with %d; first answers:\n%.600s", names[k], lines, refused, benchLines, benchLines/10, out.String())
		}
	}
}

// benchServe serves each input once per round, in a new order each round,
// and reports for each input the median over rounds of its processor time
// per call (µs/call, the whole process's: the machine is shared) and of
// its ratio to its anchor's in the same round, in processor time (x:) and
// in wall time (wall-x:); anchor[k] is input k's anchor, -1 for none.
func benchServe(b *testing.B, g *Gateway, names []string, inputs [][]byte, anchor []int) {
	checkServed(b, g, names, inputs)
	cpu, wall := make([]time.Duration, len(inputs)), make([]time.Duration, len(inputs))
	perCall := make([][]float64, len(inputs))
	x, wallX := make([][]float64, len(inputs)), make([][]float64, len(inputs))
	b.ReportAllocs()
	for round := 0; b.Loop(); round++ {
		for j := range inputs {
			k := (j + round) % len(inputs)
			c0, t0 := cputime.Process(), time.Now()
			if err := g.Serve(b.Context(), bytes.NewReader(inputs[k]), io.Discard); err != nil {
				b.Fatal(err)
			}
			cpu[k], wall[k] = cputime.Process()-c0, time.Since(t0)
		}
		for k := range inputs {
			perCall[k] = append(perCall[k], float64(cpu[k].Nanoseconds())/benchLines/1000)
			if a := anchor[k]; a >= 0 && cpu[a] > 0 {
				x[k] = append(x[k], float64(cpu[k])/float64(cpu[a]))
				wallX[k] = append(wallX[k], float64(wall[k])/float64(wall[a]))
			}
		}
	}
	for k, name := range names {
		b.ReportMetric(cputime.Median(perCall[k]), "µs/call:"+name)
		if anchor[k] >= 0 {
			b.ReportMetric(cputime.Median(x[k]), "x:"+name)
			b.ReportMetric(cputime.Median(wallX[k]), "wall-x:"+name)
		}
	}
}

// BenchmarkServeEcho is serve's whole line path on lone tool_use Echo
// calls, about 10% of them refused by the gate, as bench/serve.sh feeds it:
// plain ASCII messages and, in the same loop, each realistic content
// (non-ASCII, shell metacharacters, Python- and Go-encoded lines) and a
// mix of all; x:<content> is its ratio to the plain ASCII input, for an
// escaped content to the same text unescaped.
func BenchmarkServeEcho(b *testing.B) {
	g, _ := newGateway(b, "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\n", nil)
	g.log = discardLog
	line := func(c content, i int) string {
		return `{"type":"tool_use","id":"c` + strconv.Itoa(i) + `","name":"Echo","input":` + echoInput(c, i) + "}\n"
	}
	var names []string
	var inputs [][]byte
	var anchor []int
	for _, c := range benchContents {
		var in bytes.Buffer
		for i := range benchLines {
			in.WriteString(line(c, i))
		}
		names, inputs = append(names, c.name), append(inputs, in.Bytes())
		anchor = append(anchor, contentAnchor(c, 0))
	}
	anchor[0] = -1
	var mix bytes.Buffer
	for i := range benchLines {
		mix.WriteString(line(benchContents[i%len(benchContents)], i))
	}
	names, inputs, anchor = append(names, "mix"), append(inputs, mix.Bytes()), append(anchor, 0)
	benchServe(b, g, names, inputs, anchor)
}

// contentAnchor is the index among benchContents, counted from first, of
// c's anchor: the content of the same text without escapes, or the
// plain ASCII one (first itself).
func contentAnchor(c content, first int) int {
	for k, o := range benchContents {
		if c.same != "" && o.name == c.same {
			return first + k
		}
	}
	return first
}

var discardLog = newDiscardLogger()

func newDiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// BenchmarkServeForms is the same Echo calls in each line form of the
// protocol (a lone tool_use, an Anthropic message, the same as a whole
// Messages API response, a Chat Completions message and a Responses
// function_call item), each with each content, every input served once
// per round of one loop. x:<form>/<content> is its ratio to the lone
// tool_use lines of the same content (issue 32: a Chat message ≤ 1.3×),
// for an escaped content to the same form of the same text unescaped
// (≤ 1.1×), for tool_use to the plain ASCII tool_use lines. An OpenAI
// call's arguments, JSON in a string, are encoded twice by the same
// encoder, as the program writing them would.
func BenchmarkServeForms(b *testing.B) {
	g, _ := newGateway(b, "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\n", nil)
	g.log = discardLog
	forms := []struct {
		name string
		line func(c content, i int) string
	}{
		{"tool_use", func(c content, i int) string {
			return fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":"Echo","input":%s}`, i, echoInput(c, i))
		}},
		{"message", func(c content, i int) string {
			return fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"c%d","name":"Echo","input":%s}]}`, i, echoInput(c, i))
		}},
		{"api-response", func(c content, i int) string {
			return fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"c%d","name":"Echo","input":%s}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`, i, i, echoInput(c, i))
		}},
		{"chat", func(c content, i int) string {
			return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"Echo","arguments":%s}}]}`, i, c.enc(echoInput(c, i)))
		}},
		{"responses", func(c content, i int) string {
			return fmt.Sprintf(`{"type":"function_call","call_id":"c%d","name":"Echo","arguments":%s}`, i, c.enc(echoInput(c, i)))
		}},
	}
	var names []string
	var inputs [][]byte
	var anchor []int
	for fi, f := range forms {
		first := fi * len(benchContents)
		for ci, c := range benchContents {
			var in bytes.Buffer
			for i := range benchLines {
				in.WriteString(f.line(c, i) + "\n")
			}
			names, inputs = append(names, f.name+"/"+c.name), append(inputs, in.Bytes())
			switch {
			case c.same != "":
				anchor = append(anchor, contentAnchor(c, first))
			case fi > 0:
				anchor = append(anchor, ci)
			default:
				anchor = append(anchor, 0)
			}
		}
	}
	anchor[0] = -1
	benchServe(b, g, names, inputs, anchor)
}
