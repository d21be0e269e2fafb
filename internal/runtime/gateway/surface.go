package gateway

import (
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
)

// LineChain is the surface chain a line runs on (rule R5): the process
// chain, or the line's own, which must begin with the whole process chain
// and may only go deeper. surface nil means the line gave none.
func (g *Gateway) LineChain(surface []string) ([]string, error) {
	return decide.LineChain(g.opts.Chain, surface)
}

// refuseLine answers, and records, every call of a line whose surface chain
// the gateway's own does not admit (rule R5).
func (g *Gateway) refuseLine(cur *provision.Generation, surface []string, calls []Call, err error) []result {
	out := make([]result, len(calls))
	for i, c := range calls {
		d := decide.Refuse(rule.R5, err.Error())
		g.unrecorded(g.record(cur, surface, g.unprepared(cur, c), d, time.Now(), decisionlog.Decided, nil))
		out[i] = errorResult(c.ID, d.Reason)
	}
	return out
}
