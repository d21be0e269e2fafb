package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
)

// versusSmall runs round on a large and a small policy's gateway in turn,
// the order swapped each round, and reports the median of the per-round
// ratios large/small of processor time as unit, and the large one's
// processor time per call (issue 32: the per-call rows on a policy's size,
// against the 10-entry or 10-tool policy, in one run).
func versusSmall(b *testing.B, unit string, calls int, small, large *Gateway, round func(g *Gateway)) {
	var ratios []float64
	var took time.Duration
	for i := 0; b.Loop(); i++ {
		var d [2]time.Duration
		for j := range 2 {
			k := (i + j) % 2
			g := []*Gateway{small, large}[k]
			c0 := cputime.Process()
			round(g)
			d[k] = cputime.Process() - c0
		}
		if d[0] > 0 {
			ratios = append(ratios, float64(d[1])/float64(d[0]))
		}
		took += d[1]
	}
	b.ReportMetric(cputime.Median(ratios), unit)
	b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*calls)/1e3, "large-cpu-µs/call")
}

// entriesPolicy is a policy whose agent lists n Bash and n Read entries.
func entriesPolicy(n int) string {
	var entries []string
	for i := range n {
		entries = append(entries, fmt.Sprintf("%q", fmt.Sprintf("Bash(tool%d:*)", i)), fmt.Sprintf("%q", fmt.Sprintf("Read(/srv/d%d/**)", i)))
	}
	return "tools: {Read: schema.#Read, Bash: schema.#Bash & {sandbox: mode: \"off\"}}\n" +
		"agent: \"allowed-tools\": [" + strings.Join(entries, ", ") + "]\n"
}

// BenchmarkP10EntriesPerCall decides Bash and Read calls, allowed and
// refused, through the gateway's whole decision (Check: the input read,
// the gate, the subject, the list) under one surface listing 1,000 Bash
// and 1,000 Read entries against the same under 10 (issue 32: a call ≤
// 1.2× the 10-entry policy). A round is 7,000 calls, long enough to hold
// several collections: at 700 a collection landed in one round of two,
// the per-round ratios fell into two heaps near 0.5× and 2.5×, and their
// median moved by 0.3 between runs.
func BenchmarkP10EntriesPerCall(b *testing.B) {
	small, _ := newGateway(b, entriesPolicy(10), nil)
	large, _ := newGateway(b, entriesPolicy(1000), nil)
	small.log, large.log = discardLog, discardLog
	calls := []struct {
		name, input string
		allowed     bool
	}{
		{"Bash", `{"command":"tool7 run --all 'Grüße.txt'"}`, true},
		{"Bash", `{"command":"rm -rf /tmp/x"}`, false},
		{"Bash", `{"command":"tool7x run"}`, false},
		{"Read", `{"file_path":"/srv/d7/src/Grüße.go"}`, true},
		{"Read", `{"file_path":"/srv/d7/../d8/x"}`, true},
		{"Read", `{"file_path":"/etc/passwd"}`, false},
		{"Read", `{"file_path":"/srv/d77x/y"}`, false},
	}
	round := func(g *Gateway) {
		for range 1000 {
			for _, c := range calls {
				if d := g.Check(nil, "c", c.name, json.RawMessage(c.input)); d.Allowed != c.allowed {
					b.Fatalf("%s %s: allowed %v, want %v: %s", c.name, c.input, d.Allowed, c.allowed, d.Reason)
				}
			}
		}
	}
	versusSmall(b, "1000/10:call-cpu", 1000*len(calls), small, large, round)
}

// toolsPolicy is a policy of n Echo tools, each allowed to the agent.
func toolsPolicy(n int) string {
	var s strings.Builder
	names := make([]string, n)
	s.WriteString("tools: {\n")
	for i := range n {
		fmt.Fprintf(&s, "\tTool%d: schema.#Echo\n", i)
		names[i] = fmt.Sprintf("%q", fmt.Sprintf("Tool%d", i))
	}
	s.WriteString("}\nvalidation: \"enforce\"\nagent: \"allowed-tools\": [" + strings.Join(names, ", ") + "]\n")
	return s.String()
}

// BenchmarkEchoPerCallTools serves Echo calls with realistic content to
// one tool of a policy of 1,000 tools against the same of a 10-tool
// policy (issue 32: a call ≤ 1.1×); bench/scale measures the start, the
// tool list and the memory.
func BenchmarkEchoPerCallTools(b *testing.B) {
	small, _ := newGateway(b, toolsPolicy(10), nil)
	large, _ := newGateway(b, toolsPolicy(1000), nil)
	small.log, large.log = discardLog, discardLog
	var in bytes.Buffer
	for i := range benchLines {
		c := benchContents[i%len(benchContents)]
		in.WriteString(`{"type":"tool_use","id":"c` + fmt.Sprint(i) + `","name":"Tool5","input":` + echoInput(c, i) + "}\n")
	}
	checkServed(b, small, []string{"10 tools"}, [][]byte{in.Bytes()})
	checkServed(b, large, []string{"1,000 tools"}, [][]byte{in.Bytes()})
	round := func(g *Gateway) {
		if err := g.Serve(b.Context(), bytes.NewReader(in.Bytes()), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	versusSmall(b, "1000/10:call-cpu", benchLines, small, large, round)
}
