package gateway

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

// gauge counts the calls running at once and the most that ever did.
type gauge struct {
	now, peak atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// barrier is a tool that returns only once n calls have entered it, or
// fails when its context ends first: a batch of n barrier calls completes
// only if all n ran at the same time.
func barrier(n int64, g *gauge) tools.Tool {
	var arrived atomic.Int64
	var once sync.Once
	all := make(chan struct{})
	return tools.Func(func(ctx context.Context, _ *tools.Env, _ tools.Input) tools.Result {
		g.enter()
		defer g.leave()
		if arrived.Add(1) >= n {
			once.Do(func() { close(all) })
		}
		select {
		case <-all:
			return tools.OK("met")
		case <-ctx.Done():
			return tools.Errorf("cancelled before %d calls met", n)
		}
	})
}

// tracked is a tool that records overlap and yields, so that calls that
// may overlap get the chance to.
func tracked(g *gauge) tools.Tool {
	return tools.Func(func(ctx context.Context, _ *tools.Env, _ tools.Input) tools.Result {
		g.enter()
		defer g.leave()
		for range 50 {
			time.Sleep(100 * time.Microsecond)
		}
		return tools.OK("done")
	})
}

func batchLine(names ...string) string {
	var blocks []string
	for i, n := range names {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":%q,"input":{"i":%d}}`, i, n, i))
	}
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}

func contents(t *testing.T, r map[string]any) []string {
	t.Helper()
	var out []string
	for _, b := range r["content"].([]any) {
		m := b.(map[string]any)
		out = append(out, fmt.Sprintf("%s:%v:%v", m["tool_use_id"], m["is_error"], m["content"]))
	}
	return out
}

const parallelPolicy = `
tools: Echo: schema.#Echo
tools: Par: plugin: command: ["par"]
tools: SeqTool: plugin: command: ["seq"]
parallel: {enabled: true, maxConcurrency: 8}
`

func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestK2BatchRunsInParallel(t *testing.T) {
	var g gauge
	gw, _ := newGateway(t, parallelPolicy, fakePlugins{"Par": barrier(4, &g), "SeqTool": tracked(&g)})
	r := gw.Handle(withTimeout(t), []byte(batchLine("Par", "Par", "Par", "Par")))
	if strings.Count(string(r), `"content":"met"`) != 4 {
		t.Fatalf("four concurrent-safe calls must all run at once: %s", r)
	}
}

func TestK2OneSequentialCallMakesTheBatchSequential(t *testing.T) {
	var g gauge
	gw, _ := newGateway(t, parallelPolicy, fakePlugins{"Par": tracked(&g), "SeqTool": tracked(&g)})
	gw.Handle(withTimeout(t), []byte(batchLine("Par", "Par", "SeqTool", "Par")))
	if p := g.peak.Load(); p != 1 {
		t.Errorf("%d calls overlapped in a batch with a sequential tool", p)
	}
}

func TestK2UnknownOrDisabledIsSequential(t *testing.T) {
	tests := []struct{ name, policy, line string }{
		{"unknown tool", parallelPolicy, batchLine("Par", "Nope", "Par")},
		{"not allowed", parallelPolicy + `agent: "allowed-tools": ["Par", "SeqTool"]` + "\n", batchLine("Par", "Echo", "Par")},
		{"disabled", strings.Replace(parallelPolicy, "enabled: true", "enabled: false", 1), batchLine("Par", "Par", "Par")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g gauge
			gw, _ := newGateway(t, tt.policy, fakePlugins{"Par": tracked(&g), "SeqTool": tracked(&g)})
			gw.Handle(withTimeout(t), []byte(tt.line))
			if p := g.peak.Load(); p != 1 {
				t.Errorf("%d calls overlapped", p)
			}
		})
	}
}

func TestK3PerBatchMax(t *testing.T) {
	var g gauge
	policy := strings.Replace(parallelPolicy, "maxConcurrency: 8", "maxConcurrency: 8, perBatchMax: 2", 1)
	gw, _ := newGateway(t, policy, fakePlugins{"Par": barrier(2, &g), "SeqTool": tracked(&g)})
	r := gw.Handle(withTimeout(t), []byte(batchLine("Par", "Par", "Par", "Par", "Par", "Par")))
	if strings.Count(string(r), `"content":"met"`) != 6 || g.peak.Load() != 2 {
		t.Errorf("peak %d, want exactly perBatchMax 2; reply %s", g.peak.Load(), r)
	}
}

func TestK3GlobalPoolSharedByBatches(t *testing.T) {
	var g gauge
	policy := strings.Replace(parallelPolicy, "maxConcurrency: 8", "maxConcurrency: 3", 1)
	plugins := fakePlugins{"Par": tracked(&g), "SeqTool": tracked(&g)}
	gw, _ := newGateway(t, policy, plugins)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw.Handle(withTimeout(t), []byte(batchLine("Par", "Par", "Par")))
		}()
	}
	wg.Wait()
	if p := g.peak.Load(); p > 3 {
		t.Errorf("%d calls ran at once across batches; the pool is 3", p)
	}
}

func TestK4ResultsInCallOrder(t *testing.T) {
	// Call i finishes only after call i+1 has: completion is in reverse order.
	const n = 5
	done := make([]chan struct{}, n+1)
	for i := range done {
		done[i] = make(chan struct{})
	}
	close(done[n])
	rev := tools.Func(func(ctx context.Context, _ *tools.Env, in tools.Input) tools.Result {
		var i int
		fmt.Sscan(fmt.Sprint(in["i"]), &i)
		select {
		case <-done[i+1]:
		case <-ctx.Done():
			return tools.Errorf("cancelled")
		}
		close(done[i])
		return tools.OK(fmt.Sprint(i))
	})
	gw, _ := newGateway(t, parallelPolicy, fakePlugins{"Par": rev, "SeqTool": rev})
	r := handle(t, gw, batchLine("Par", "Par", "Par", "Par", "Par"))
	got := strings.Join(contents(t, r), " ")
	if got != "c0:false:0 c1:false:1 c2:false:2 c3:false:3 c4:false:4" {
		t.Errorf("results %s, want call order", got)
	}
}

func TestBatchCancelStopsCooperativeTools(t *testing.T) {
	var g gauge
	gw, _ := newGateway(t, parallelPolicy, fakePlugins{"Par": barrier(100, &g), "SeqTool": tracked(&g)})
	ctx, cancel := context.WithCancel(context.Background())
	reply := make(chan []byte)
	go func() { reply <- gw.Handle(ctx, []byte(batchLine("Par", "Par", "Par"))) }()
	for g.now.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case r := <-reply:
		if strings.Count(string(r), "cancelled before") != 3 {
			t.Errorf("every cooperative call must stop with its own result: %s", r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the batch did not stop after cancellation")
	}
}

// BenchmarkParallelBatch runs a batch of 8 calls that each take 5ms with
// maxConcurrency 8, and reports its wall time as a ratio to one call
// (target ≤ 1.25).
func BenchmarkParallelBatch(b *testing.B) {
	const d = 5 * time.Millisecond
	sleep := tools.Func(func(ctx context.Context, _ *tools.Env, _ tools.Input) tools.Result {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		return tools.OK("")
	})
	gw, _ := newGateway(b, parallelPolicy, fakePlugins{"Par": sleep, "SeqTool": sleep})
	one := []byte(batchLine("Par"))
	eight := []byte(batchLine("Par", "Par", "Par", "Par", "Par", "Par", "Par", "Par"))
	ctx := context.Background()
	var single, batch time.Duration
	for b.Loop() {
		t0 := time.Now()
		gw.Handle(ctx, one)
		t1 := time.Now()
		gw.Handle(ctx, eight)
		single += t1.Sub(t0)
		batch += time.Since(t1)
	}
	b.ReportMetric(float64(batch)/float64(single), "batch/call")
}

// TestK3OnePoolAcrossReloads: batches under an old and a new generation
// share one pool; a reload resizes it instead of adding a second.
func TestK3OnePoolAcrossReloads(t *testing.T) {
	var g gauge
	policy := strings.Replace(parallelPolicy, "maxConcurrency: 8", "maxConcurrency: 2", 1)
	plugins := fakePlugins{"Par": tracked(&g), "SeqTool": tracked(&g)}
	gw, _ := newGateway(t, policy, plugins)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw.Handle(withTimeout(t), []byte(batchLine("Par", "Par", "Par")))
		}()
		if i == 2 {
			gw.Swap(provisioned(t, gw.Current().Generation, plugins)) // a reload mid-flight
		}
	}
	wg.Wait()
	if p := g.peak.Load(); p > 2 {
		t.Errorf("%d calls ran at once across a reload; the pool is 2", p)
	}
}

func TestPoolResizeWakesWaiters(t *testing.T) {
	p := newPool(1)
	if !p.acquire(context.Background()) {
		t.Fatal("first acquire")
	}
	got := make(chan bool)
	go func() { got <- p.acquire(withTimeout(t)) }()
	p.resize(2)
	if !<-got {
		t.Error("a waiter must get the slot a resize adds")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p.acquire(ctx) {
		t.Error("acquire on a full pool with a cancelled context must fail")
	}
}

// BenchmarkK2InstantBatch: a batch of 8 quick calls with parallel
// execution on, against the same batch with it off (issue 21). "read" is 8
// Reads of a 4 KiB file, concurrent-safe and not instant, so it takes the
// parallel path (asserted from the gateway's log before timing: issue 32
// found the Echo-only batch never did); "echo" is 8 Echo calls, which the
// gateway runs in order on purpose (asserted too). parallel/sequential is
// the ratio; for "echo" it must not be above 1.
func BenchmarkK2InstantBatch(b *testing.B) {
	const policy = "tools: {Echo: schema.#Echo, Read: schema.#Read}\n"
	for _, c := range []struct {
		name, tool, input string
		parallel          bool
	}{
		{"read", "Read", `{"file_path":"f%d.txt"}`, true},
		{"echo", "Echo", `{"message":"m%d"}`, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			on, onLog := newGateway(b, policy+"parallel: {enabled: true, maxConcurrency: 8}\n", nil)
			off, offLog := newGateway(b, policy, nil)
			var blocks []string
			for i := range 8 {
				for _, g := range []*Gateway{on, off} {
					os.WriteFile(filepath.Join(g.opts.Workdir, fmt.Sprintf("f%d.txt", i)), bytes.Repeat([]byte("a line of some text\n"), 205), 0o644)
				}
				blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"e%d","name":%q,"input":`+c.input+`}`, i, c.tool, i))
			}
			line := []byte(`{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`)
			for _, g := range []*Gateway{on, off} {
				if out := g.Handle(b.Context(), line); bytes.Contains(out, []byte(`"is_error":true`)) {
					b.Fatalf("the batch failed: %s", out)
				}
			}
			const ran = "running batch in parallel"
			if got := strings.Contains(onLog.String(), ran); got != c.parallel {
				b.Fatalf("with parallel on, the %s batch ran in parallel = %v, want %v", c.name, got, c.parallel)
			}
			if strings.Contains(offLog.String(), ran) {
				b.Fatal("with parallel off, the batch ran in parallel")
			}
			on.log, off.log = discardLog, discardLog
			var par, seq time.Duration
			for b.Loop() {
				t0 := time.Now()
				on.Handle(b.Context(), line)
				t1 := time.Now()
				off.Handle(b.Context(), line)
				par += t1.Sub(t0)
				seq += time.Since(t1)
			}
			b.ReportMetric(float64(par)/float64(seq), "parallel/sequential")
		})
	}
}
