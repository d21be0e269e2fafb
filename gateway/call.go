package gateway

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
	"aimon.dev/gw/tools/builtin"
)

// prepared is a call whose tool, permission list and input are settled
// enough to tell whether it may join a parallel batch.
type prepared struct {
	call
	tool  *policy.Tool
	input tools.Input
	// refusal is set when the call cannot run; its sentence is the result.
	refusal *result
}

func refuse(c call, format string, args ...any) *result {
	return &result{Type: "tool_result", ToolUseID: c.ID, Content: fmt.Sprintf(format, args...), IsError: true}
}

// prepare finds the tool and checks that the surface lists it (rule P9).
func (g *Gateway) prepare(cur *Current, chain []string, c call) prepared {
	p := prepared{call: c}
	eff, err := cur.Effective(chain)
	if err != nil {
		p.refusal = refuse(c, "%s", err)
		return p
	}
	t, ok := cur.Tools[c.Name]
	if !ok {
		p.refusal = refuse(c, "%s", unknownTool(c.Name, cur, eff))
		return p
	}
	p.tool = t
	if !eff.Listed(c.Name) {
		// Not allowed, a different sentence from unknown (rule P9).
		p.refusal = refuse(c, "%s", eff.Decide(c.Name, nil, "").Reason)
		return p
	}
	in, ok := c.Input.(map[string]any)
	if !ok {
		p.refusal = refuse(c, "The input of '%s' must be a JSON object of parameters, got %s. The tool was not executed.", c.Name, tools.Describe(c.Input))
		return p
	}
	p.input = in
	return p
}

func unknownTool(name string, cur *Current, eff listedSet) string {
	names := listed(cur, eff)
	msg := fmt.Sprintf("Unknown tool '%s'.", name)
	if near := policy.Closest(name, names); near != "" {
		msg += fmt.Sprintf(" Did you mean '%s'?", near)
	}
	return msg + fmt.Sprintf(" Available tools: %s.", strings.Join(names, ", "))
}

type listedSet interface{ Listed(string) bool }

// listed is the names of the tools the surface may use, sorted.
func listed(cur *Current, eff listedSet) []string {
	var names []string
	for _, n := range cur.Names() {
		if eff.Listed(n) {
			names = append(names, n)
		}
	}
	return names
}

// run gates, decides and executes a prepared call.
func (g *Gateway) run(ctx context.Context, cur *Current, chain []string, p prepared) result {
	if p.refusal != nil {
		g.log.Warn("call refused", "tool", p.Name, "id", p.ID, "reason", p.refusal.Content)
		return *p.refusal
	}
	log := g.log.With("tool", p.Name, "id", p.ID)
	// The gate (rules S4, S9).
	if p.tool.Validation != "off" {
		if vs := p.tool.Gate.Check(p.input); len(vs) > 0 {
			if p.tool.Validation == "enforce" {
				text := tools.Sentences(vs, false)
				log.Warn("input refused by the gate", "violations", text)
				return *refuse(p.call, "%s", text)
			}
			log.Warn("input breaks the schema; running it (validation: warn)", "violations", tools.Sentences(vs, true))
		}
	}
	// Permission (rules P2–P11).
	eff, _ := cur.Effective(chain)
	if d := eff.Decide(p.Name, p.input, g.opts.Workdir); !d.Allowed {
		log.Warn("call denied", "rule", d.Rule, "reason", d.Reason)
		return *refuse(p.call, "%s", d.Reason)
	}
	impl, ok := g.impl(p.tool)
	if !ok {
		log.Error("tool has no implementation", "builtin", p.tool.Builtin)
		return *refuse(p.call, "Tool '%s' has no implementation in this gateway; tell the operator. The tool was not executed.", p.Name)
	}
	log.Debug("running", "input", p.input)
	r := safeRun(ctx, impl, g.env(p.ID, chain), p.input)
	switch {
	case r.IsError && r.Cause != nil:
		log.Error("tool failed", "error", r.Text, "cause", r.Cause)
	case r.IsError:
		log.Warn("tool returned an error", "error", r.Text)
	}
	return result{Type: "tool_result", ToolUseID: p.ID, Content: r.Text, IsError: r.IsError}
}

func (g *Gateway) impl(t *policy.Tool) (tools.Tool, bool) {
	if t.Builtin != "" {
		return builtin.Lookup(t.Builtin)
	}
	if g.opts.Runner != nil {
		return g.opts.Runner.Tool(t)
	}
	return nil, false
}

// safeRun runs a tool so that nothing it does escapes (rule C2).
func safeRun(ctx context.Context, t tools.Tool, env *tools.Env, in tools.Input) (r tools.Result) {
	defer func() {
		if p := recover(); p != nil {
			r = tools.Failure(fmt.Errorf("panic: %v\n%s", p, debug.Stack()),
				"The tool failed unexpectedly and did not finish; the operator has the details in the gateway's log. Try another approach.")
		}
	}()
	return t.Run(ctx, env, in)
}
