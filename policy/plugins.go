package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"aimon.dev/gw/gateway/gate"
	"aimon.dev/gw/plugin/host"
)

// Plugins describes out-of-process tools; *host.Host is one.
type Plugins interface {
	Describe(ctx context.Context, s host.Spec) ([]host.ToolInfo, error)
}

// An Option changes how a policy loads.
type Option func(*options)

type options struct {
	plugins         Plugins
	describeTimeout time.Duration
	workdir         string
}

// WithWorkdir is the working directory that path patterns written relative
// to it ("./src/**", ".") resolve against. Without it they match nothing.
func WithWorkdir(dir string) Option { return func(o *options) { o.workdir = dir } }

// WithPlugins lets the load start the policy's plugins to learn their
// tools' schemas. Without it, a policy with a plugin tool does not load.
func WithPlugins(p Plugins) Option { return func(o *options) { o.plugins = p } }

// plugin completes a plugin tool from what its plugin declares: the schema
// is imported with rules S3, S7 and S8, and the policy's input narrows it.
func (c *compiler) plugin(t *Tool, v cue.Value) bool {
	// Report at the command the policy wrote: the plugin struct itself is placed in the schema.
	p := v.LookupPath(cue.ParsePath("plugin.command"))
	if c.opts.plugins == nil {
		c.fail(p, "R4", "tool %s is served by a plugin, which cannot be started here; load this policy from a directory with aimon-gw serve or vet.", t.Name)
		return false
	}
	if len(t.Plugin.Command) > 0 && c.dir != "" {
		// A relative binary is the policy repository's own.
		if bin := t.Plugin.Command[0]; strings.Contains(bin, "/") && !filepath.IsAbs(bin) {
			t.Plugin.Command[0] = filepath.Join(c.dir, bin)
		}
	}
	t.Plugin.Spec = host.Spec{Command: t.Plugin.Command, SHA256: t.Plugin.SHA256}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.describeTimeout)
	defer cancel()
	infos, err := c.opts.plugins.Describe(ctx, t.Plugin.Spec)
	if err != nil {
		c.fail(p, "R4", "tool %s: %v", t.Name, err)
		return false
	}
	var info *host.ToolInfo
	var names []string
	for i := range infos {
		names = append(names, infos[i].Name)
		if infos[i].Name == t.Plugin.Tool {
			info = &infos[i]
		}
	}
	if info == nil {
		c.fail(p, "R4", "tool %s: the plugin %s serves %s, not %q; set plugin.tool to one of them.", t.Name, t.Plugin.Spec, joinNames(names), t.Plugin.Tool)
		return false
	}
	declared, err := gate.ImportJSONSchema(c.ctx, info.InputSchema)
	if err != nil {
		c.fail(p, "S3", "tool %s: the plugin %s declares an input schema that cannot be used: %v.", t.Name, t.Plugin.Spec, err)
		return false
	}
	if c.pos(t.Input, 1) == "" {
		// Not narrowed: models see the schema as the plugin declared it,
		// range keywords included (the gate does not enforce those, rule S7).
		t.Plugin.declared = json.RawMessage(info.InputSchema)
	}
	t.Input = declared.Unify(t.Input)
	if err := t.Input.Validate(); err != nil {
		for _, d := range fromCUE(err, c.schemaDir) {
			d.Message = fmt.Sprintf("tool %s: the policy's input does not narrow the plugin's schema: %s", t.Name, d.Message)
			c.errs = append(c.errs, d)
		}
		return false
	}
	if t.Description == "" {
		t.Description = info.Description
	}
	// The policy may narrow the plugin's declarations, never widen them.
	if isDefault(v.LookupPath(cue.ParsePath("concurrency"))) || info.Concurrency != "concurrent_safe" {
		t.Concurrency = info.Concurrency
	}
	if isDefault(v.LookupPath(cue.ParsePath("interrupt"))) {
		t.Interrupt = info.Interrupt
	}
	return true
}

// isDefault reports whether v holds only the default the schema gave it.
func isDefault(v cue.Value) bool {
	_, ok := v.Default()
	return ok
}

// Specs returns the plugins the generation uses, for a host to keep.
func (g *Generation) Specs() []host.Spec {
	var specs []host.Spec
	for _, n := range g.Names() {
		if p := g.Tools[n].Plugin; p != nil {
			specs = append(specs, p.Spec)
		}
	}
	return specs
}
