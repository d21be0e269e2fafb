package gateway

import (
	"context"

	"aimon.dev/gw/internal/core/rule"
)

// Steps of a call, as Options.Trace sees them.
const (
	StepCall   = "call"   // the whole call (or line), parent of the others
	StepDecode = "decode" // the tool found and its input read
	StepDecide = "decide" // gate, canonical form and permission
	StepRun    = "run"    // the tool's execution (allowed calls only)
)

// A Tracer starts a step of a call to tool ("" for a line of several
// calls) and returns the context the step runs in, and end, which ends
// it with what the step found.
type Tracer func(ctx context.Context, step, tool string) (context.Context, func(Outcome))

// Outcome is what a step found: the decision when there is one, and after
// run whether the result is an error. Small and by value, so that an
// untraced call allocates nothing for it.
type Outcome struct {
	Decided, Allowed, Ask bool
	Rule                  rule.ID
	IsError               bool
}

func outcome(d *rule.Decision, isError bool) Outcome {
	if d == nil {
		return Outcome{IsError: isError}
	}
	return Outcome{Decided: true, Allowed: d.Allowed, Ask: d.Ask, Rule: d.Rule, IsError: isError}
}

func noEnd(Outcome) {}

// step starts a step when the gateway is traced.
func (g *Gateway) step(ctx context.Context, step, tool string) (context.Context, func(Outcome)) {
	if g.opts.Trace == nil {
		return ctx, noEnd
	}
	return g.opts.Trace(ctx, step, tool)
}
