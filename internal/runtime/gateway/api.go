package gateway

import (
	"context"
	"encoding/json"

	"aimon.dev/gw/internal/core/decide"

	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// ToolDef is a tool as offered to a model: its name, description and input
// JSON Schema (rule S1).
type ToolDef struct {
	Name, Title string
	Description string
	InputSchema json.RawMessage
	// Effect is the tool's side effect (rule P13); Idempotent and
	// OpenWorld its declared hints, for MCP annotations.
	Effect                string
	Idempotent, OpenWorld bool
	// OutputSchema is the JSON Schema of its structured result; nil for none.
	OutputSchema json.RawMessage
	// DescribeBounds ends the MCP description with the bounds of the
	// input schema (the policy's mcp.describeBounds).
	DescribeBounds bool
}

// Tools returns the tools the surface chain may use (rule P9), sorted by
// name, from the generation in force; chain nil means the default chain.
func (g *Gateway) Tools(chain []string) ([]ToolDef, error) {
	if chain == nil {
		chain = g.opts.Chain
	}
	cur := g.enter()
	defer cur.Exit()
	return toolDefs(cur, chain)
}

// CheckChain reports why chain (nil: the gateway's own) cannot run under
// the policy in force, as Tools would, without building any tool's JSON
// Schema: a front end that lists tools only when asked checks this at start.
func (g *Gateway) CheckChain(chain []string) error {
	if chain == nil {
		chain = g.opts.Chain
	}
	cur := g.enter()
	defer cur.Exit()
	_, err := cur.Effective(chain)
	return err
}

func toolDefs(cur *provision.Generation, chain []string) ([]ToolDef, error) {
	eff, err := cur.Effective(chain)
	if err != nil {
		return nil, err
	}
	var defs []ToolDef
	for _, name := range decide.Listed(cur.Generation, eff, decide.CeilingOf(cur.Generation, chain)) {
		t := cur.Tools[name]
		in, err := t.JSONSchema()
		if err != nil {
			return nil, err
		}
		defs = append(defs, ToolDef{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: in,
			Effect: t.Effect, Idempotent: t.Idempotent, OpenWorld: t.OpenWorld, OutputSchema: t.OutputSchema, DescribeBounds: cur.DescribeBounds})
	}
	return defs, nil
}

// CallResult is the result of one call, for front ends other than the line
// protocol: its text, error flag, and structured result when the tool gave
// one (successful calls only).
type CallResult struct {
	Text       string
	IsError    bool
	Structured any
	// Approval is set when the call needs a person's approval (rule P15):
	// the token that CallApproved takes once the person has given it.
	Approval string
	// RetryAfter is set when a limit refused the call (rule P19): when it
	// may be tried again, in seconds.
	RetryAfter float64
	// Asked is what the asked call was decided on, with Approval.
	Asked *Asked
}

// Asked is an asked call as it was decided, for a front end that has a
// person other than its client approve it: what it shows that person is
// what the approval token binds (rule P15).
type Asked struct {
	// Input is the canonical input (rule R7).
	Input tools.Input
	// Entries are the ask entries that asked, as written.
	Entries []string
	// Revision is the policy's the decision was made under.
	Revision string
	// Reason is the decision's sentence.
	Reason string
}

// Call runs one call as a line of its own would; input is the call's input
// as JSON, chain nil means the default chain.
func (g *Gateway) Call(ctx context.Context, chain []string, id, name string, input json.RawMessage) CallResult {
	return g.CallApproved(ctx, chain, Call{ID: id, Name: name, Input: input})
}

// CallApproved is Call with the approvals a person gave (c.Approvals).
func (g *Gateway) CallApproved(ctx context.Context, chain []string, c Call) CallResult {
	if chain == nil {
		chain = g.opts.Chain
	}
	g.Await(ctx, c.Name)
	cur := g.enter()
	defer cur.Exit()
	ctx, end := g.step(ctx, StepCall, c.Name)
	defer end(Outcome{})
	r := g.batch(ctx, cur, chain, []Call{c}, nil)[0]
	return CallResult{Text: r.Content, IsError: r.IsError, Structured: r.structured, Approval: r.approval, RetryAfter: r.retryAfter, Asked: r.asked}
}
