package gateway

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/state"
)

// limitBenchPolicy limits Echo far above what a benchmark calls, so that
// every call is taken and none refused: what is measured is the check.
const limitBenchPolicy = "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\nagent: \"allowed-tools\": [\"Echo\"]\n"

// BenchmarkP19LimitedCall is one Echo call (the MCP front end's path,
// CallApproved) with no limit, and under a limit kept in memory, taken
// in turn in one loop, each with a decision log that keeps nothing (as
// mcp --listen has its metrics; AIMON_GW_BENCH_NO_LOG=1 for none, as serve
// without --decision-log); x:memory is their ratio (goal ≤ 1.05). With
// AIMON_GW_BENCH_REDIS=HOST:PORT the same limit is kept in that Redis
// too, and p50-added-µs and p99-added-µs are what it adds to a call.
func BenchmarkP19LimitedCall(b *testing.B) {
	limits := "limits: echo: {tool: \"Echo\", rate: \"100000/s\", burst: 1000000000}\n"
	none, _ := newGateway(b, limitBenchPolicy, nil)
	mem, _ := newGateway(b, limitBenchPolicy+limits, nil)
	none.log, mem.log = discardLog, discardLog
	none.opts.Limits = state.NewMemory(nil) // a limiter, and no limit to take
	mem.opts.Limits = state.NewMemory(nil)
	if os.Getenv("AIMON_GW_BENCH_NO_LOG") == "" {
		// As mcp --listen runs, its metrics a decision log: the call's
		// start is read once, and the limit takes that time.
		none.opts.Decisions, mem.opts.Decisions = nopLog{}, nopLog{}
	}
	gws := []*Gateway{none, mem}
	if addr := os.Getenv("AIMON_GW_BENCH_REDIS"); addr != "" {
		st, err := state.Open("redis://"+addr, "")
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		red, _ := newGateway(b, limitBenchPolicy+limits, nil)
		red.log, red.opts.Limits, red.opts.Decisions = discardLog, state.LimiterOf(st), none.opts.Decisions
		gws = append(gws, red)
	}
	ctx := context.Background()
	input := json.RawMessage(`{"message":"hi"}`)
	call := func(g *Gateway, i int) {
		r := g.CallApproved(ctx, nil, Call{ID: "c" + strconv.Itoa(i), Name: "Echo", Input: input})
		if r.IsError {
			b.Fatalf("a benchmark call was refused: %s", r.Text)
		}
	}
	for k, g := range gws { // warm each
		for i := range 100 {
			call(g, k*100+i)
		}
	}
	took := make([][]time.Duration, len(gws))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range gws {
			k := (i + j) % len(gws) // each first in turn: no order's favour
			start := time.Now()
			call(gws[k], i)
			took[k] = append(took[k], time.Since(start))
		}
	}
	// Medians: a shared machine's spikes move a mean, not a median.
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))])
	}
	b.ReportMetric(pct(took[0], .5), "p50-ns/none")
	b.ReportMetric(pct(took[1], .5), "p50-ns/memory")
	b.ReportMetric(pct(took[1], .5)/pct(took[0], .5), "x:memory")
	if len(gws) == 3 {
		b.ReportMetric((pct(took[2], .5)-pct(took[0], .5))/1e3, "p50-added-µs")
		b.ReportMetric((pct(took[2], .99)-pct(took[0], .99))/1e3, "p99-added-µs")
	}
}

// nopLog is a decision log that keeps nothing.
type nopLog struct{}

func (nopLog) Log(decisionlog.Record) error { return nil }
func (nopLog) Err() error                   { return nil }
