package gateway

import (
	"context"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// batch runs the calls of one model response and appends their results to
// out in call order (rule K4).
func (g *Gateway) batch(ctx context.Context, cur *provision.Generation, chain []string, calls []Call, out []result) []result {
	var one [1]prepared // a lone call's, on the stack
	ps := one[:0]
	if len(calls) > len(one) {
		ps = make([]prepared, 0, len(calls))
	}
	ps = ps[:len(calls)]
	seen := map[string]bool{}
	eff, chainErr := cur.Effective(chain) // once per batch
	ceil := decide.CeilingOf(cur.Generation, chain)
	for i, c := range calls {
		switch {
		case c.ID == "":
			ps[i] = g.unprepared(cur, c)
			ps[i].Settle(rule.Refused(rule.R2, noID()))
		case seen[c.ID]:
			ps[i] = g.unprepared(cur, c)
			ps[i].Settle(rule.Refused(rule.R2, duplicateID(c.ID)))
		default:
			_, end := g.step(ctx, StepDecode, c.Name)
			ps[i] = g.prepare(cur, chain, eff, ceil, chainErr, c)
			end(outcome(ps[i].Settled, false))
		}
		seen[c.ID] = true
	}
	if !parallel(cur, ps) {
		for _, p := range ps {
			if ctx.Err() != nil {
				out = append(out, g.cancelled(cur, chain, p))
				continue
			}
			out = append(out, g.run(ctx, cur, chain, p))
		}
		return out
	}
	return append(out, g.runParallel(ctx, cur, chain, ps)...)
}

// runParallel runs the calls of a batch at once, within the batch's and the
// gateway's bounds (rule K2).
func (g *Gateway) runParallel(ctx context.Context, cur *provision.Generation, chain []string, ps []prepared) []result {
	out := make([]result, len(ps))
	g.log.Debug("running batch in parallel", "calls", len(ps))
	perBatch := make(chan struct{}, max(1, cur.Parallel.PerBatchMax))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !acquire(ctx, perBatch) {
				out[i] = g.cancelled(cur, chain, p)
				return
			}
			defer func() { <-perBatch }()
			if !g.pool.acquire(ctx) {
				out[i] = g.cancelled(cur, chain, p)
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
func parallel(cur *provision.Generation, ps []prepared) bool {
	if len(ps) < 2 || !cur.Parallel.Enabled {
		return false
	}
	instant := true
	for _, p := range ps {
		if p.Settled != nil || !tools.MayRunInParallel(p.Tool.Concurrency, p.Tool.Interrupt) {
			return false
		}
		impl, _ := cur.Impl(p.Name)
		i, ok := impl.(tools.Instant)
		instant = instant && ok && i.Instant()
	}
	// Calls that finish in microseconds (Echo) run faster one after another
	// than handed to goroutines: a parallel batch is never slower than the
	// same batch run in order.
	return !instant
}

// cancelled answers, and records, a call whose batch was cancelled before
// it ran: decided, but not run (rules R2, R7).
func (g *Gateway) cancelled(cur *provision.Generation, chain []string, p prepared) result {
	d := rule.Refused(rule.R2, cancelledBeforeRun())
	g.unrecorded(g.record(cur, chain, p, d, time.Now(), decisionlog.Decided, nil))
	return errorResult(p.ID, d.Reason)
}
