package gateway

import (
	"context"
	"sync"

	"aimon.dev/gw/tools"
)

// batch runs the calls of one model response and returns their results in
// call order (rule K4).
func (g *Gateway) batch(ctx context.Context, cur *Current, chain []string, calls []call) []result {
	ps := make([]prepared, len(calls))
	seen := map[string]bool{}
	for i, c := range calls {
		switch {
		case c.ID == "":
			ps[i] = prepared{call: c, rule: "R2", refusal: refuse(c, "The tool_use block has no id; give every call a unique id. The tool was not executed.")}
		case seen[c.ID]:
			ps[i] = prepared{call: c, rule: "R2", refusal: refuse(c, "The id '%s' is used by an earlier call of this batch; give every call a unique id. The tool was not executed.", c.ID)}
		default:
			ps[i] = g.prepare(cur, chain, c)
		}
		seen[c.ID] = true
	}
	out := make([]result, len(ps))
	if !parallel(cur, ps) {
		for i, p := range ps {
			if ctx.Err() != nil {
				out[i] = *refuse(p.call, "The batch was cancelled before this call ran. The tool was not executed.")
				continue
			}
			out[i] = g.run(ctx, cur, chain, p)
		}
		return out
	}
	g.log.Debug("running batch in parallel", "calls", len(ps))
	perBatch := make(chan struct{}, max(1, cur.Parallel.PerBatchMax))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !acquire(ctx, perBatch) {
				out[i] = *refuse(p.call, "The batch was cancelled before this call ran. The tool was not executed.")
				return
			}
			defer func() { <-perBatch }()
			if !g.pool.acquire(ctx) {
				out[i] = *refuse(p.call, "The batch was cancelled before this call ran. The tool was not executed.")
				return
			}
			defer g.pool.release()
			out[i] = g.run(ctx, cur, chain, p)
		}()
	}
	wg.Wait()
	return out
}

func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// parallel reports whether a batch may run in parallel (rule K2): two or
// more calls, parallel execution enabled, and every call a known, allowed
// tool that is concurrent-safe and may be interrupted safely (rule K1).
func parallel(cur *Current, ps []prepared) bool {
	if len(ps) < 2 || !cur.Parallel.Enabled {
		return false
	}
	for _, p := range ps {
		if p.refusal != nil || !tools.MayRunInParallel(p.tool.Concurrency, p.tool.Interrupt) {
			return false
		}
	}
	return true
}
