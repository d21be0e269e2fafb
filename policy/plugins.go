package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/gate"
)

// An Option changes how a policy loads.
type Option func(*options)

type options struct {
	workdir string
	timeout time.Duration
}

// WithTimeout bounds how long a load may take; a load past it is rejected
// (rule R5). 0, the default, is no bound.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithWorkdir is the working directory that path patterns written relative
// to it ("./src/**", ".") resolve against. Without it they match nothing.
func WithWorkdir(dir string) Option { return func(o *options) { o.workdir = dir } }

// Declared is what an implementation says of one of its tools: a plugin's
// (rules C1, K1). InputSchema is JSON Schema as declared (rule S3).
type Declared struct {
	Description            string
	InputSchema            []byte
	Concurrency, Interrupt string
	// Unpinned, for an upstream tool, says how its definition differs from
	// its pin; the tool is then withheld.
	Unpinned string
}

// Pending returns the tools whose implementation must declare their input
// before the generation can serve, sorted by name.
func (g *Generation) Pending() []*Tool {
	var out []*Tool
	for _, n := range g.Names() {
		if t := g.Tools[n]; t.pending {
			out = append(out, t)
		}
	}
	return out
}

// Complete returns a new generation whose pending tools are completed from
// what their implementations declared, by tool name: each declared schema is
// imported with rules S3, S7 and S8, and the policy's input narrows it. g
// itself is not changed. A tool left out of decls, or whose declaration
// cannot be used, is an error at the place the policy names it.
func (g *Generation) Complete(decls map[string]Declared) (*Generation, error) {
	if g.comp == nil {
		return nil, errors.New("a restored generation cannot be completed; load the policy")
	}
	c := *g.comp
	c.errs, c.warnings, c.shipped = nil, nil, nil
	out := *g
	out.Tools = maps.Clone(g.Tools)
	for _, pt := range g.Pending() {
		d, ok := decls[pt.Name]
		if !ok {
			c.errs = append(c.errs, Diagnostic{Pos: pt.ImplPos, Code: "R4", Message: fmt.Sprintf("tool %s: its implementation declared nothing; this is a bug in the gateway.", pt.Name)})
			continue
		}
		t := *pt
		if c.declare(&t, d) && c.compileInput(&t) && c.checkSubject(&t) {
			t.pending, t.value = false, cue.Value{}
			t.Unpinned = d.Unpinned
			if d.Unpinned != "" {
				out.Warnings = append(slices.Clone(out.Warnings), Diagnostic{Pos: t.ImplPos, Code: "S3", Warning: true, Message: d.Unpinned})
			}
			out.Tools[t.Name] = &t
		}
	}
	if len(c.errs) > 0 {
		sortDiagnostics(c.errs)
		return nil, c.errs
	}
	return &out, nil
}

// declare completes a plugin tool from what its plugin declares.
func (c *compiler) declare(t *Tool, d Declared) bool {
	fail := func(code, format string, args ...any) bool {
		c.errs = append(c.errs, Diagnostic{Pos: t.ImplPos, Code: code, Message: fmt.Sprintf(format, args...)})
		return false
	}
	declared, err := gate.ImportJSONSchema(c.ctx, d.InputSchema)
	if err != nil {
		return fail("S3", "tool %s: its implementation declares an input schema that cannot be used: %v.", t.Name, err)
	}
	if !c.pos(t.Input, 1).IsValid() {
		// Not narrowed: models see the schema as the plugin declared it,
		// range keywords included (the gate does not enforce those, rule S7).
		t.declared = json.RawMessage(d.InputSchema)
	}
	t.Input = declared.Unify(t.Input)
	if err := t.Input.Validate(); err != nil {
		for _, dg := range fromCUE(err, c.schemaDir) {
			dg.Message = fmt.Sprintf("tool %s: the policy's input does not narrow the plugin's schema: %s", t.Name, dg.Message)
			c.errs = append(c.errs, dg)
		}
		return false
	}
	if t.Description == "" {
		t.Description = d.Description
	}
	// The policy may narrow the plugin's declarations, never widen them.
	if isDefault(t.value.LookupPath(cue.ParsePath("concurrency"))) || d.Concurrency != "concurrent_safe" {
		t.Concurrency = d.Concurrency
	}
	if isDefault(t.value.LookupPath(cue.ParsePath("interrupt"))) {
		t.Interrupt = d.Interrupt
	}
	return true
}

// isDefault reports whether v holds only the default the schema gave it.
func isDefault(v cue.Value) bool {
	_, ok := v.Default()
	return ok
}
