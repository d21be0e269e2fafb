package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// An Option changes how a policy loads.
type Option func(*options)

type options struct {
	workdir string
	timeout time.Duration
	ctx     context.Context
	prev    *Generation // reuse.go
	reuse   bool        // whether to keep what the load compiles for the next
}

// WithContext ends the wait for a load when ctx is done (SIGTERM during a
// load): the load is then rejected at once, as one past its time bound is.
func WithContext(ctx context.Context) Option { return func(o *options) { o.ctx = ctx } }

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
	// Unavailable, for an upstream tool, says why its server cannot be
	// started or reached; the tool is then withheld.
	Unavailable string
	// Hints are an upstream tool's MCP annotations; nil for none. They say
	// the tool's effect only where the server is trusted to
	// (trustAnnotations) and the policy does not say it.
	Hints *Hints
}

// Hints are the MCP tool annotations that bear on a side effect (P13).
type Hints struct {
	ReadOnly    bool
	Destructive *bool // nil: the MCP default, true
	Idempotent  bool
	OpenWorld   *bool // nil: the MCP default, true
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
	c := *g.comp
	c.errs, c.warnings, c.shipped = nil, nil, nil
	out := *g
	out.Tools, out.sorted = maps.Clone(g.Tools), new(sortedCache)
	for _, pt := range g.Pending() {
		d, ok := decls[pt.Name]
		if !ok {
			c.errs = append(c.errs, Diagnostic{Pos: pt.ImplPos, Code: "R4", Message: fmt.Sprintf("tool %s: its implementation declared nothing; this is a bug in the gateway.", pt.Name)})
			continue
		}
		t := *pt
		if c.declare(&t, d) && c.compileInput(&t) && c.checkSubject(&t) {
			t.pending, t.value = false, cue.Value{}
			t.Unpinned, t.Unavailable = d.Unpinned, d.Unavailable
			if code, why := t.Withheld(); why != "" {
				out.Warnings = append(slices.Clone(out.Warnings), Diagnostic{Pos: t.ImplPos, Code: code, Warning: true, Message: cmp.Or(d.Unpinned, why+".")})
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

// Expand returns a new generation with the tools that the servers exposing
// "*" list, by server: each tool the policy does not name becomes
// SERVER__TOOL, waiting for its declaration as a named one does, and the
// allow lists are compiled again to know them. g itself is not changed.
func (g *Generation) Expand(listed map[string][]string) (*Generation, error) {
	if len(listed) == 0 {
		return g, nil
	}
	c := *g.comp
	c.errs, c.warnings = nil, nil
	out := *g
	out.Tools, out.sorted = maps.Clone(g.Tools), new(sortedCache)
	out.Warnings = slices.Clone(g.Warnings)
	base := c.def.LookupPath(cue.MakePath(cue.Def("Tool")))
	for _, server := range slices.Sorted(maps.Keys(listed)) {
		w := g.Wildcards[server]
		if w == nil {
			return nil, fmt.Errorf("the server %s does not expose \"*\"", server)
		}
		for _, n := range listed[server] {
			name := server + "__" + n
			if _, ok := out.Tools[name]; ok {
				continue
			}
			if !tools.ValidName(name) {
				out.Warnings = append(out.Warnings, Diagnostic{Pos: w.ImplPos, Code: "C1", Warning: true,
					Message: fmt.Sprintf("the server %s lists a tool %q, whose name %s no model accepts; it is not offered.", server, n, name)})
				continue
			}
			if t := c.tool(name, base, g.Validation, Position{}); t != nil {
				out.Tools[name] = t
			}
		}
	}
	if len(c.errs) > 0 {
		sortDiagnostics(c.errs)
		return nil, c.errs
	}
	// The lists are compiled again, with a compiler of the new generation's own.
	out.comp, out.lists, out.chains = &c, newSurfaceLists(), &allow.Chains{}
	c.compileLists(&out)
	return &out, nil
}

// declare completes a plugin tool from what its plugin declares.
func (c *compiler) declare(t *Tool, d Declared) bool {
	fail := func(code rule.ID, format string, args ...any) bool {
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
	if unset(t.value, "concurrency") || d.Concurrency != "concurrent_safe" {
		t.Concurrency = d.Concurrency
	}
	if unset(t.value, "interrupt") {
		t.Interrupt = d.Interrupt
	}
	if h := d.Hints; h != nil && t.Upstream != nil && t.Upstream.TrustAnnotations {
		if unset(t.value, "effect") {
			switch {
			case h.ReadOnly:
				t.Effect = "read"
			case h.Destructive != nil && !*h.Destructive:
				t.Effect = "write"
			default:
				t.Effect = "destructive"
			}
		}
		if unset(t.value, "idempotent") {
			t.Idempotent = h.Idempotent
		}
		if unset(t.value, "openWorld") {
			t.OpenWorld = h.OpenWorld == nil || *h.OpenWorld
		}
	}
	return true
}

// unset reports whether the policy leaves field of tool v out, so that
// the default applies (fields.go).
func unset(v cue.Value, field string) bool {
	return !v.LookupPath(cue.MakePath(cue.Str(field))).Exists()
}

// unpinnedServers reports each upstream server held to pins (the default)
// that has none: its tools would be offered as it describes them, with
// nothing reviewed (rule S3).
func unpinnedServers(g *Generation) []Diagnostic {
	var ds []Diagnostic
	eachServer(g, func(t *Tool) {
		if u := t.Upstream; !u.NoPin && len(u.Pins) == 0 {
			ds = append(ds, Diagnostic{Pos: t.ImplPos, Code: "S3", Message: fmt.Sprintf("server %s has no pins, so its tools would be offered as it describes them, unreviewed; run aimon-gw pin on the policy directory, review pins.cue and commit it, or set servers.%s.pin: false.", u.Server, u.Server)})
		}
	})
	return ds
}

// missingCommands warns of each server whose command is not installed
// here: its tools would be withheld at every start (rule R4).
func missingCommands(g *Generation) []Diagnostic {
	var ds []Diagnostic
	eachServer(g, func(t *Tool) {
		u := t.Upstream
		if len(u.Command) == 0 {
			return
		}
		name := u.Command[0]
		var err error
		if strings.ContainsRune(name, filepath.Separator) {
			p := name
			if !filepath.IsAbs(p) && u.Cwd != "" {
				p = filepath.Join(u.Cwd, p)
			}
			var fi os.FileInfo
			if fi, err = os.Stat(p); err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
				err = errors.New("it is not an executable file")
			}
		} else {
			_, err = exec.LookPath(name)
		}
		if err != nil {
			ds = append(ds, Diagnostic{Pos: t.ImplPos, Code: "R4", Warning: true, Message: fmt.Sprintf(
				"server %s's command %s cannot be found here (%v), so its tools would be withheld; install it, or give its absolute path in servers.%s.command.", u.Server, name, err, u.Server)})
		}
	})
	return ds
}

// eachServer calls f once for each upstream server, with one of its tools.
func eachServer(g *Generation, f func(*Tool)) {
	seen := map[string]bool{}
	visit := func(t *Tool) {
		if t.Upstream != nil && !seen[t.Upstream.Server] {
			seen[t.Upstream.Server] = true
			f(t)
		}
	}
	for _, n := range g.Names() {
		visit(g.Tools[n])
	}
	for _, n := range slices.Sorted(maps.Keys(g.Wildcards)) {
		visit(g.Wildcards[n])
	}
}

// unknownServerTools reports each allowed-tools entry SERVER__TOOL, or
// mcp__SERVER__TOOL, of a pinned server whose pins list no TOOL and that
// the policy does not define: a typo that matches nothing, found without
// starting the server (rule S3).
func unknownServerTools(g *Generation) []Diagnostic {
	var ds []Diagnostic
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		for i, e := range s.Entries {
			name := entryName(strings.TrimSpace(e))
			mcpName, isMCP := strings.CutPrefix(name, "mcp__")
			server, tool, ok := strings.Cut(mcpName, "__")
			u := pinnedServer(g, server)
			if !ok || u == nil || defines(g, server+"__"+tool) {
				continue
			}
			if _, pinned := u.Pins[tool]; pinned {
				continue
			}
			known := u.PinnedTools()
			msg := fmt.Sprintf("%s allowed-tools entry %q names a tool that the pins of the server %s do not list", ref, e, server)
			prefix := server + "__"
			if isMCP {
				prefix = "mcp__" + prefix
			}
			if near := tools.Closest(tool, known); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", prefix+near)
			} else {
				msg += fmt.Sprintf("; its pinned tools are %s.", strings.Join(known, ", "))
			}
			ds = append(ds, Diagnostic{Pos: s.EntryPos[i], Code: "S3", Message: msg})
		}
	}
	return ds
}

// pinnedServer is the named upstream server of the policy when it has
// pins; nil otherwise.
func pinnedServer(g *Generation, server string) *Upstream {
	if w := g.Wildcards[server]; w != nil {
		if len(w.Upstream.Pins) > 0 {
			return w.Upstream
		}
		return nil
	}
	for _, n := range g.Names() {
		if u := g.Tools[n].Upstream; u != nil && u.Server == server && len(u.Pins) > 0 {
			return u
		}
	}
	return nil
}

// digestOnlyPins reports each server whose pins hold digests only (written
// before pins held definitions): vet and check then cannot decide its
// tools as serve does without starting it.
func digestOnlyPins(g *Generation) []Diagnostic {
	var ds []Diagnostic
	eachServer(g, func(t *Tool) {
		u := t.Upstream
		if u.NoPin {
			return
		}
		for _, tool := range u.PinnedTools() {
			if p := u.Pins[tool]; p.Definition == nil {
				ds = append(ds, Diagnostic{Pos: p.Pos, Code: "S3", Warning: true, Message: fmt.Sprintf("the pins of server %s hold only the digest of %s, not its definition, so vet, check and the hook cannot decide its calls as serve does; run aimon-gw pin again to write the definitions.", u.Server, tool)})
				return
			}
		}
	})
	return ds
}
