package gateway

import (
	"context"
	"encoding/json"
)

// ToolDef is a tool as offered to a model: its name, description and input
// JSON Schema (rule S1).
type ToolDef struct {
	Name        string
	Description string
	InputSchema json.RawMessage
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

func toolDefs(cur *Current, chain []string) ([]ToolDef, error) {
	eff, err := cur.Effective(chain)
	if err != nil {
		return nil, err
	}
	var defs []ToolDef
	for _, name := range listed(cur, eff) {
		t := cur.Tools[name]
		defs = append(defs, ToolDef{t.Name, t.Description, t.JSONSchema})
	}
	return defs, nil
}

// Call runs one call as a line of its own would, and returns its result
// text and error flag; input is the call's input as JSON, chain nil means
// the default chain.
func (g *Gateway) Call(ctx context.Context, chain []string, id, name string, input json.RawMessage) (string, bool) {
	if chain == nil {
		chain = g.opts.Chain
	}
	cur := g.enter()
	defer cur.Exit()
	r := g.batch(ctx, cur, chain, []call{{ID: id, Name: name, Input: input}})[0]
	return r.Content, r.IsError
}
