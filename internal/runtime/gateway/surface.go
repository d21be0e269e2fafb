package gateway

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
)

// Bounds on a line's surface chain: chains come from callers, and each
// distinct one is remembered by the generation (issue 11).
const (
	MaxChainRefs  = 16
	MaxChainBytes = 4096
)

// rooted is chain with the main agent as its root.
func rooted(chain []string) []string {
	if len(chain) == 0 || chain[0] != "agent" {
		return append([]string{"agent"}, chain...)
	}
	return chain
}

// LineChain is the surface chain a line runs on (rule R5): the process
// chain, or the line's own, which must begin with the whole process chain
// and may only go deeper. surface nil means the line gave none.
func (g *Gateway) LineChain(surface []string) ([]string, error) {
	if surface == nil {
		return g.opts.Chain, nil
	}
	size := 0
	for _, r := range surface {
		size += len(r)
	}
	if len(surface) > MaxChainRefs || size > MaxChainBytes {
		return nil, fmt.Errorf("The line's surface chain has %d references (%d bytes); at most %d references and %d bytes are accepted. Send the chain of the run that made the call.", len(surface), size, MaxChainRefs, MaxChainBytes)
	}
	line := rooted(surface)
	if !Extends(g.opts.Chain, surface) {
		return nil, fmt.Errorf("The call's surface chain %s does not begin with this gateway's chain %s, which a call may only extend; send a chain that starts with it, or none.", show(line), show(g.opts.Chain))
	}
	return line, nil
}

// Extends reports whether chain, rooted as a line's, begins with ceiling:
// whether a gateway of chain ceiling decides it, or refuses it (R5).
func Extends(ceiling, chain []string) bool {
	line := rooted(chain)
	return len(line) >= len(ceiling) && slices.Equal(line[:len(ceiling)], ceiling)
}

func show(chain []string) string { return "[" + strings.Join(chain, ", ") + "]" }

// refuseLine answers, and records, every call of a line whose surface chain
// the gateway's own does not admit (rule R5).
func (g *Gateway) refuseLine(cur *provision.Generation, surface []string, calls []call, err error) []result {
	out := make([]result, len(calls))
	for i, c := range calls {
		d := rule.Refused(rule.R5, notExecuted(err.Error()))
		g.unrecorded(g.record(cur, surface, prepared{call: c, cur: cur}, d, time.Now(), decisionlog.Decided, nil))
		out[i] = errorResult(c.ID, d.Reason)
	}
	return out
}
