package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"
	"strings"

	"aimon.dev/gw/gateway/gate"
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
	// refusal is set when the call cannot run; its sentence is the result,
	// and rule the rule that refused it.
	refusal *result
	rule    string
}

func refuse(c call, format string, args ...any) *result {
	return &result{Type: "tool_result", ToolUseID: c.ID, Content: fmt.Sprintf(format, args...), IsError: true}
}

// prepare finds the tool and checks that the surface lists it (rule P9).
func (g *Gateway) prepare(cur *Current, chain []string, c call) prepared {
	p := prepared{call: c}
	eff, err := cur.Effective(chain)
	if err != nil {
		p.refusal, p.rule = refuse(c, "%s", err), "P11"
		return p
	}
	t, ok := cur.Tools[c.Name]
	if !ok {
		p.refusal, p.rule = refuse(c, "%s", unknownTool(c.Name, cur, eff)), "P9"
		return p
	}
	p.tool = t
	if !eff.Listed(c.Name) {
		// Not allowed, a different sentence from unknown (rule P9).
		p.refusal, p.rule = refuse(c, "%s", eff.Decide(c.Name, nil, "").Reason), "P9"
		return p
	}
	if len(c.Input) == 0 {
		p.refusal, p.rule = refuse(c, "The call to '%s' has no input; send \"input\": a JSON object of parameters. The tool was not executed.", c.Name), "R2"
		return p
	}
	in, err := gate.Decode(c.Input, gate.DefaultLimits)
	if err != nil {
		p.refusal, p.rule = refuse(c, "The input of '%s' cannot be used: %s. The tool was not executed.", c.Name, strings.TrimSuffix(err.Error(), ".")), "S4"
		return p
	}
	p.input = in
	return p
}

func unknownTool(name string, cur *Current, eff listedSet) string {
	names := listed(cur, eff)
	msg := fmt.Sprintf("Unknown tool '%s'.", name)
	if near := tools.Closest(name, names); near != "" {
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

// Verdict is what the gateway decides about a call before running it.
type Verdict struct {
	Allowed bool     `json:"allowed"`
	Reason  string   `json:"reason"`
	Rule    string   `json:"rule,omitempty"`
	Entries []string `json:"entries,omitempty"`
	// Effective is every entry along the chain that bears on the tool;
	// absent when no list limits the chain.
	Effective []string `json:"effective,omitempty"`
	// Violations are the gate's sentences, whatever the validation mode.
	Violations []string `json:"violations,omitempty"`
	// Mode is the tool's validation mode (rule S9).
	Mode string `json:"validation,omitempty"`
}

// decide gates a prepared call's input and decides its permission.
func (g *Gateway) decide(cur *Current, chain []string, p prepared) Verdict {
	if p.refusal != nil {
		return Verdict{Reason: p.refusal.Content, Rule: p.rule}
	}
	v := Verdict{Mode: p.tool.Validation}
	// The gate (rules S4, S9).
	var vs []tools.Violation
	if p.tool.Validation != "off" {
		vs = p.tool.Gate.Check(p.input)
		for _, x := range vs {
			v.Violations = append(v.Violations, x.Sentence)
		}
	}
	if len(vs) > 0 && p.tool.Validation == "enforce" {
		v.Reason, v.Rule = tools.Sentences(vs, false), "S9"
		return v
	}
	// Permission (rules P2–P11).
	eff, _ := cur.Effective(chain)
	d := eff.Decide(p.Name, subjectInput(p), g.opts.Workdir)
	v.Allowed, v.Reason, v.Rule, v.Entries, v.Effective = d.Allowed, d.Reason, d.Rule, d.Entries, eff.Entries(p.Name)
	return v
}

// subjectInput is the input permission is decided on: where the call leaves
// out its subject field and the tool declares what that means (Glob and
// Grep search the working directory), the declared default stands in, so
// the decision is about what the tool will do (rule P2).
func subjectInput(p prepared) map[string]any {
	s := p.tool.Subject
	if s == nil || s.Default == "" || p.input[s.Field] != nil {
		return p.input
	}
	in := maps.Clone(p.input)
	in[s.Field] = s.Default
	return in
}

// Check decides a call as serving it would, without running it; input is
// the call's input as JSON.
func (g *Gateway) Check(chain []string, id, name string, input json.RawMessage) Verdict {
	cur := g.Current()
	if chain == nil {
		chain = g.opts.Chain
	}
	c := call{ID: id, Name: name, Input: input}
	v := g.decide(cur, chain, g.prepare(cur, chain, c))
	if eff, err := cur.Effective(chain); err == nil && v.Effective == nil {
		v.Effective = eff.Entries(name)
	}
	return v
}

// run decides and executes a prepared call.
func (g *Gateway) run(ctx context.Context, cur *Current, chain []string, p prepared) result {
	log := g.log.With("tool", p.Name, "id", p.ID)
	v := g.decide(cur, chain, p)
	if len(v.Violations) > 0 && v.Rule != "S9" {
		log.Warn("input breaks the schema; running it (validation: warn)", "violations", strings.Join(v.Violations, " "))
	}
	if !v.Allowed {
		log.Warn("call refused", "rule", v.Rule, "reason", v.Reason)
		return *refuse(p.call, "%s", v.Reason)
	}
	impl, ok := g.impl(p.tool)
	if !ok {
		log.Error("tool has no implementation", "builtin", p.tool.Builtin)
		return *refuse(p.call, "Tool '%s' has no implementation in this gateway; tell the operator. The tool was not executed.", p.Name)
	}
	log.Debug("running", "input", p.input)
	r := safeRun(ctx, impl, g.env(p.ID, chain), p.input)
	// Built-ins log their own failures at the level rule C7 gives; the
	// gateway logs a panic, and the cause of another tool's failure.
	var pe *panicError
	switch {
	case r.IsError && r.Cause != nil && (p.tool.Builtin == "" || errors.As(r.Cause, &pe)):
		log.Error("tool failed", "error", r.Text, "cause", r.Cause)
	case r.IsError:
		log.Debug("tool returned an error", "error", r.Text)
	default:
		log.Debug("tool returned", "bytes", len(r.Text))
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

// panicError is the cause of a result that a panic produced.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.value, e.stack) }

// safeRun runs a tool so that nothing it does escapes (rule C2).
func safeRun(ctx context.Context, t tools.Tool, env *tools.Env, in tools.Input) (r tools.Result) {
	defer func() {
		if p := recover(); p != nil {
			r = tools.Failure(&panicError{p, debug.Stack()},
				"The tool failed unexpectedly and did not finish; the operator has the details in the gateway's log. Try another approach.")
		}
	}()
	return t.Run(ctx, env, in)
}
