package policy

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/hostpattern"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// compiler turns the unified policy value into a Generation, collecting
// every problem rather than stopping at the first.
type compiler struct {
	ctx       *cue.Context // the generation's own, for its policy's CUE
	lists     *cue.Context // for its allow lists, which outlive the policy's CUE (release)
	opts      options
	dir       string    // the policy directory; "" for an embedded policy
	def       cue.Value // the shipped schema package
	schemaDir string
	errs      Errors
	warnings  []Diagnostic
	shipped   map[string]*gate.Gate
	wildcard  map[string]bool           // servers that expose "*"
	data      []string                  // the policy's YAML and JSON files
	read      map[string]bool           // the .cue files read once and laid over for CUE
	src       sources                   // the bytes of the files laid over for CUE
	files     []*ast.File               // the policy's syntax, CUE and data files
	root      cue.Value                 // the policy value being compiled
	pinsOf    map[string]map[string]Pin // by server, as pins read them
	reuse     *reuser                   // while loading (reuse.go)
	decls     map[string]*toolDecl      // where each tool is declared (memo.go)
	elided    *elision                  // the tools CUE did not evaluate (elide.go)
	whole     bool                      // every tool evaluated: no elision
}

func (c *compiler) fail(v cue.Value, code rule.ID, format string, args ...any) {
	c.errs = append(c.errs, Diagnostic{Pos: c.pos(v, 0), Code: code, Message: fmt.Sprintf(format, args...)})
}

// pos is where the policy wrote v: of v's conjuncts, the first that lies
// outside the shipped schema (v.Pos alone may point into the schema).
func (c *compiler) pos(v cue.Value, depth int) Position {
	p := v.Pos()
	if p.IsValid() && !strings.HasPrefix(p.Filename(), c.schemaDir) && !strings.HasPrefix(p.Filename(), schemaRoot) {
		return position(p)
	}
	if depth < 8 {
		_, args := v.Expr()
		for _, a := range args {
			if s := c.pos(a, depth+1); s.IsValid() {
				return s
			}
		}
	}
	if depth > 0 {
		return Position{}
	}
	return position(p)
}

func (c *compiler) warn(pos Position, code rule.ID, format string, args ...any) {
	c.warnings = append(c.warnings, Diagnostic{Pos: pos, Code: code, Message: fmt.Sprintf(format, args...), Warning: true})
}

func (c *compiler) compile(g *Generation, v cue.Value) {
	g.Validation = rule.Mode(str(v.LookupPath(cue.ParsePath("validation"))))
	g.UnknownTools = str(v.LookupPath(cue.ParsePath("claudeCode.unknownTools")))
	g.ClientParameters = stringList(v.LookupPath(cue.ParsePath("mcp.clientParameters")))
	g.DescribeBounds = boolean(v.LookupPath(cue.ParsePath("mcp.describeBounds")))
	g.Parallel = Parallel{
		Enabled:        boolean(v.LookupPath(cue.ParsePath("parallel.enabled"))),
		MaxConcurrency: integer(v.LookupPath(cue.ParsePath("parallel.maxConcurrency"))),
		PerBatchMax:    integer(v.LookupPath(cue.ParsePath("parallel.perBatchMax"))),
	}
	g.Tools = map[string]*Tool{}
	c.root = v
	c.wildcards(v)
	for server := range c.wildcard {
		// What every tool of the server shares: how to start it, its
		// sandbox and timeout.
		if t := c.tool(server+"__*", c.def.LookupPath(cue.MakePath(cue.Def("Tool"))), g.Validation, Position{}); t != nil {
			t.Upstream.Tool = ""
			if g.Wildcards == nil {
				g.Wildcards = map[string]*Tool{}
			}
			g.Wildcards[server] = t
		}
	}
	decls := c.decls
	compiled := map[string]*Tool{} // by declaration (memo.go)
	from := map[string]*toolDecl{} // where each of compiled was declared
	iter, _ := v.LookupPath(cue.ParsePath("tools")).Fields()
	for iter.Next() {
		name, tv := iter.Selector().Unquoted(), iter.Value()
		d, share := shareable(decls, name)
		if share && compiled[d.shareKey()] != nil && d.alike(from[d.shareKey()]) {
			t := d.moved(compiled[d.shareKey()], from[d.shareKey()])
			t.Name, t.Pos, t.ImplPos = name, position(tv.Pos()), d.pos
			g.Tools[name] = t
			continue
		}
		var at Position
		var key string
		var spans []span
		keyed := false
		if share {
			at = d.pos
			if key, spans, keyed = c.reuse.key(name, d, g.Validation); keyed {
				if t := c.reuse.reused(key, spans); t != nil {
					t.Pos, t.ImplPos = position(tv.Pos()), d.pos
					g.Tools[name], compiled[d.shareKey()], from[d.shareKey()] = t, t, d
					continue
				}
			}
		}
		if evaluating != nil {
			evaluating(name)
		}
		if t := c.tool(name, tv, g.Validation, at); t != nil {
			g.Tools[t.Name] = t
			if !t.pending {
				t.typeNames = typeNameFindings("input", t.Input, 0)
			}
			if share && !t.pending {
				compiled[d.shareKey()], from[d.shareKey()] = t, d
			}
			if keyed && !t.pending {
				c.reuse.keep(key, spans, t)
			}
		}
	}
	c.completeElided(g, compiled, from)
	g.Surfaces = map[string]*Surface{}
	if a := v.LookupPath(cue.ParsePath("agent")); a.Exists() {
		g.Surfaces["agent"] = c.surface("agent", a)
	} else {
		g.Surfaces["agent"] = &Surface{Ref: "agent"}
	}
	for _, kind := range []string{"subagent", "skill", "command"} {
		iter, _ := v.LookupPath(cue.MakePath(cue.Str(kind + "s"))).Fields()
		for iter.Next() {
			ref := kind + ":" + iter.Selector().Unquoted()
			g.Surfaces[ref] = c.surface(ref, iter.Value())
		}
	}
	if from := v.LookupPath(cue.ParsePath("surfaces.from")); from.Exists() {
		var dirs []string
		_ = from.Decode(&dirs)
		lists, abs := c.markdownSurfaces(dirs)
		c.mergeMarkdown(g, lists)
		g.Dirs = abs
	}
	for _, ref := range g.SurfaceRefs() {
		c.checkList(g, g.Surfaces[ref])
	}
	c.provenance(g, v) // provenance.go (rule P18), which sessions reads
	c.sessions(g, v)   // labels.go (rule P18)
	c.compileLists(g)
	c.principals(g, v.LookupPath(cue.ParsePath("principals")))
	c.limits(g, v.LookupPath(cue.ParsePath("limits")))
	c.approvers(g, v.LookupPath(cue.ParsePath("approvers")))
	c.tests(g, v.LookupPath(cue.ParsePath("tests")))
}

// toolSpec is a tool as the policy writes it (#Tool), decoded at once: the
// plain fields as Go values, and as CUE values what is a schema or what an
// error sentence places.
type toolSpec struct {
	Builtin  string `json:"builtin"`
	External string `json:"external"`
	Plugin   *struct {
		Command cue.Value `json:"command"`
		SHA256  string    `json:"sha256"`
		Tool    string    `json:"tool"`
	} `json:"plugin"`
	Upstream *struct {
		Server string `json:"server"`
		Tool   string `json:"tool"`
	} `json:"upstream"`
	Title        string    `json:"title"`
	Description  string    `json:"description"`
	Effect       string    `json:"effect"`
	Idempotent   bool      `json:"idempotent"`
	OpenWorld    *bool     `json:"openWorld"`
	Input        cue.Value `json:"input"`
	Output       cue.Value `json:"output"`
	Concurrency  string    `json:"concurrency"`
	Interrupt    string    `json:"interrupt"`
	Subject      cue.Value `json:"subject"`
	Reads        string    `json:"reads"`
	Validation   rule.Mode `json:"validation"`
	Sandbox      cue.Value `json:"sandbox"`
	MaxFileBytes int64     `json:"maxFileBytes"`
	Timeout      cue.Value `json:"timeout"`
}

// The fields that say a tool's implementation, looked up before the tool
// is decoded: a built-in is first unified with its shipped declaration.
var implPaths = [...]cue.Path{cue.MakePath(cue.Str("builtin")), cue.MakePath(cue.Str("plugin")),
	cue.MakePath(cue.Str("external")), cue.MakePath(cue.Str("upstream"))}

// tool compiles one tool; implAt is where the policy names its
// implementation when the syntax shows it, found from v otherwise.
func (c *compiler) tool(name string, v cue.Value, mode rule.Mode, implAt Position) *Tool {
	if v.Validate() != nil {
		return nil // the policy-wide validation has reported it
	}
	if err := v.Err(); err != nil { // an incomplete value, such as an undefined reference
		c.errs = append(c.errs, fromCUE(err, c.schemaDir)...)
		return nil
	}
	n := 0
	for _, p := range implPaths {
		n += btoi(v.LookupPath(p).Exists())
	}
	srv, rest, wildcard := c.wildcardTool(name)
	wildcard = wildcard && n == 0 // a tool of a server that exposes "*", named to narrow it
	if n+btoi(wildcard) != 1 {
		c.fail(v, "C1", "tool %s needs exactly one implementation: builtin (such as schema.#Read), plugin: {command: [...]}, external (such as claudecode.#Bash), or a server's expose.", name)
		return nil
	}
	pos := position(v.Pos())
	if b := v.LookupPath(implPaths[0]); b.Exists() {
		builtin, ok := c.oneOf("tool "+name, v, builtinField)
		if !ok {
			return nil
		}
		if v = c.narrowed(name, builtin, v); !v.Exists() {
			return nil
		}
	}
	var s toolSpec
	_ = v.Decode(&s) // a field that is not concrete (an error here) stays zero
	if !c.defaults(name, v, &s) {
		return nil
	}
	var server, upTool string
	switch {
	case s.Upstream != nil: // set by a server's expose
		server, upTool = s.Upstream.Server, s.Upstream.Tool
	case wildcard:
		server, upTool = srv, rest
	}
	t := &Tool{Name: name, Pos: pos, Builtin: s.Builtin, External: s.External, Description: s.Description, Title: s.Title,
		Effect: s.Effect, Idempotent: s.Idempotent, OpenWorld: *s.OpenWorld, Input: s.Input, Concurrency: s.Concurrency,
		Interrupt: s.Interrupt, Reads: s.Reads, Validation: cmp.Or(s.Validation, mode), MaxFileBytes: s.MaxFileBytes, PolicyDir: c.dir}
	if !c.settings(t, &s) {
		return nil
	}
	switch {
	case server != "":
		return c.upstreamTool(t, v, server, upTool)
	case s.Plugin != nil:
		return c.pluginTool(t, v, &s)
	}
	if t.ImplPos = implAt; !implAt.IsValid() {
		t.ImplPos = c.pos(v, 0) // a walk of v's conjuncts: a quarter of a tool's compile
	}
	if !c.compileInput(t) || !c.checkSubject(t) {
		return nil
	}
	return t
}

// defaults checks the string fields of s that take a few values, and gives
// the fields the tool leaves out their defaults (see fields.go).
func (c *compiler) defaults(name string, v cue.Value, s *toolSpec) bool {
	owner, ok := "tool "+name, true
	for _, f := range []struct {
		dst *string
		e   enum
	}{{&s.Effect, effectField}, {&s.Concurrency, concurrencyField}, {&s.Interrupt, interruptField}, {(*string)(&s.Validation), validationField}, {&s.Reads, readsField}} {
		var good bool
		*f.dst, good = c.oneOf(owner, v, f.e)
		ok = ok && good
	}
	if s.Subject.Exists() {
		_, good := c.oneOf(owner, v, kindField)
		ok = ok && good
	}
	if s.OpenWorld == nil {
		open := defaultOpenWorld
		s.OpenWorld = &open
	}
	if s.MaxFileBytes == 0 && (s.Builtin == "Write" || s.Builtin == "Edit") {
		s.MaxFileBytes = defaultMaxFileBytes
	}
	return ok
}

// settings reads what of s needs more than a copy: the output schema, the
// sandbox, the timeout and the subject, reporting what cannot be used.
func (c *compiler) settings(t *Tool, s *toolSpec) bool {
	if s.Output.Exists() {
		js, err := gate.ExportJSONSchema(s.Output)
		if err != nil {
			c.fail(s.Output, rule.S1, "tool %s: its output cannot be exported as JSON Schema: %v.", t.Name, err)
			return false
		}
		t.OutputSchema = js
	}
	if s.Sandbox.Exists() && !c.sandbox(t, s.Sandbox) {
		return false
	}
	if d := s.Timeout; d.Exists() {
		var err error
		if t.Timeout, err = time.ParseDuration(str(d)); err != nil || t.Timeout <= 0 {
			c.fail(d, rule.R4, "tool %s: timeout %q is not a positive duration; write one such as \"30s\" or \"2m\".", t.Name, str(d))
			return false
		}
	}
	if s.Subject.Exists() {
		t.Subject = &Subject{}
		_ = s.Subject.Decode(t.Subject)
		t.subjectPos = c.pos(s.Subject, 0)
	}
	return true
}

// pluginTool completes t as an out-of-process tool, whose plugin declares
// its input (provisioning completes the tool).
func (c *compiler) pluginTool(t *Tool, v cue.Value, s *toolSpec) *Tool {
	t.Plugin = &Plugin{SHA256: s.Plugin.SHA256, Tool: cmp.Or(s.Plugin.Tool, t.Name)}
	_ = s.Plugin.Command.Decode(&t.Plugin.Command)
	if len(t.Plugin.Command) > 0 && c.dir != "" {
		// A relative binary is the policy repository's own.
		if bin := t.Plugin.Command[0]; strings.Contains(bin, "/") && !filepath.IsAbs(bin) {
			t.Plugin.Command[0] = filepath.Join(c.dir, bin)
		}
	}
	// Report at the command the policy wrote: the plugin struct itself is placed in the schema.
	t.ImplPos = c.pos(s.Plugin.Command, 0)
	t.value, t.pending = v, true
	return t
}

// narrowed is the tool v unified with the built-in it names: a policy may
// narrow a built-in, never widen it. It reports what widens it and returns
// the zero value then.
func (c *compiler) narrowed(name, builtin string, v cue.Value) cue.Value {
	canonical := c.def.LookupPath(cue.MakePath(cue.Def(builtin)))
	v = canonical.Unify(v)
	// CUE lets a closed struct gain optional and required fields, so
	// look for parameters the built-in does not declare here.
	if c.widened(name, builtin, canonical.LookupPath(inputPath), v.LookupPath(inputPath), "input") {
		return cue.Value{}
	}
	if err := v.Validate(); err != nil {
		before := len(c.errs)
		c.errs = append(c.errs, fromCUE(err, c.schemaDir)...)
		for i := before; i < len(c.errs); i++ {
			c.errs[i].Message = fmt.Sprintf("tool %s may narrow the built-in %s, not widen it: %s", name, builtin, c.errs[i].Message)
		}
		return cue.Value{}
	}
	return v
}

var inputPath = cue.MakePath(cue.Str("input"))

// upstreamTool completes t as a tool of an upstream MCP server, whose
// settings it shares where it has none of its own.
func (c *compiler) upstreamTool(t *Tool, v cue.Value, server, tool string) *Tool {
	spec, sv := c.upstreamSpec(server)
	spec.Tool = tool
	t.Upstream = spec
	if d := sv.LookupPath(cue.ParsePath("timeout")); d.Exists() && t.Timeout == 0 {
		t.Timeout, _ = time.ParseDuration(str(d))
	}
	if sb := sv.LookupPath(cue.ParsePath("sandbox")); sb.Exists() && t.Sandbox == nil {
		if !c.sandbox(t, sb) {
			return nil
		}
	}
	t.ImplPos = c.pos(sv.LookupPath(cue.ParsePath("command")), 0)
	if spec.URL != "" {
		t.ImplPos = c.pos(sv.LookupPath(cue.ParsePath("url")), 0)
	}
	// The server declares the input; provisioning completes the tool.
	t.value, t.pending = v, true
	return t
}

// upstreamSpec reads how to reach the server named in servers; sv is its
// value in the policy.
func (c *compiler) upstreamSpec(server string) (spec *Upstream, sv cue.Value) {
	sv = c.root.LookupPath(cue.MakePath(cue.Str("servers"), cue.Str(server)))
	spec = &Upstream{Server: server, Cwd: str(sv.LookupPath(cue.ParsePath("cwd")))}
	_ = sv.LookupPath(cue.ParsePath("command")).Decode(&spec.Command)
	_ = sv.LookupPath(cue.ParsePath("env")).Decode(&spec.Env)
	spec.URL = str(sv.LookupPath(cue.ParsePath("url")))
	spec.SHA256 = str(sv.LookupPath(cue.ParsePath("sha256")))
	_ = sv.LookupPath(cue.ParsePath("scripts")).Decode(&spec.Scripts)
	spec.Start = str(sv.LookupPath(cue.ParsePath("start")))
	_ = sv.LookupPath(cue.ParsePath("headers")).Decode(&spec.Headers)
	spec.Identity = identityOf(sv.LookupPath(cue.ParsePath("identity")))
	spec.NoPin = !boolean(sv.LookupPath(cue.ParsePath("pin")))
	spec.TrustAnnotations = boolean(sv.LookupPath(cue.ParsePath("trustAnnotations")))
	spec.Pins = c.pins(server)
	if len(spec.Command) > 0 && c.dir != "" {
		if bin := spec.Command[0]; strings.Contains(bin, "/") && !filepath.IsAbs(bin) {
			spec.Command[0] = filepath.Join(c.dir, bin)
		}
	}
	return spec, sv
}

// wildcardTool reports whether name is SERVER__TOOL of a server that
// exposes "*".
func (c *compiler) wildcardTool(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, "__")
	return server, tool, ok && tool != "" && c.wildcard[server]
}

// wildcards finds the servers that expose "*", and checks that each server
// is either started (command) or reached (url).
func (c *compiler) wildcards(v cue.Value) {
	c.wildcard = map[string]bool{}
	iter, _ := v.LookupPath(cue.ParsePath("servers")).Fields()
	for iter.Next() {
		sv, name := iter.Value(), iter.Selector().Unquoted()
		has := func(f string) bool { return sv.LookupPath(cue.ParsePath(f)).Exists() }
		switch {
		case has("command") == has("url"):
			c.fail(sv, rule.R4, "server %s needs exactly one of command (a server the gateway starts, over stdio) and url (a streamable-HTTP server it reaches).", name)
		case has("url") && (has("sandbox") || has("env") || has("cwd")):
			c.fail(sv.LookupPath(cue.ParsePath("url")), rule.R6, "server %s is reached at its url, so sandbox, env and cwd, which apply to a command the gateway starts, cannot hold; remove them or give a command.", name)
		case has("identity"):
			c.checkIdentity(name, sv)
		}
		if iter.Value().LookupPath(cue.ParsePath("expose")).IncompleteKind() == cue.StringKind {
			c.wildcard[iter.Selector().Unquoted()] = true
		}
	}
}

// sandbox reads a tool's sandbox block; a path that is relative or empty
// is an error (rule R6): it would say nothing certain about what is written.
func (c *compiler) sandbox(t *Tool, v cue.Value) bool {
	mode, ok := c.oneOf("tool "+t.Name, v, modeField)
	s := &SandboxSpec{Off: mode == "off"}
	ok = c.network(t, s, v.LookupPath(cue.ParsePath("network"))) && ok
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{"write", &s.Write}, {"hide", &s.Hide}, {"env", &s.Env}} {
		iter, _ := v.LookupPath(cue.ParsePath(f.name)).List()
		for iter.Next() {
			p := str(iter.Value())
			if f.name != "env" && !filepath.IsAbs(p) && !strings.HasPrefix(p, "~/") {
				c.fail(iter.Value(), rule.R6, "tool %s: sandbox.%s path %q is not absolute; write an absolute path (or ~/ for the gateway's home directory).", t.Name, f.name, p)
				ok = false
				continue
			}
			*f.dst = append(*f.dst, p)
		}
	}
	iter, _ := v.LookupPath(cue.ParsePath("exec")).List()
	for iter.Next() {
		p := str(iter.Value())
		if why := badExec(p); why != "" {
			c.fail(iter.Value(), rule.P16, "tool %s: sandbox.exec entry %q %s; write a directory's tree as DIR/** (./bin/**) or one file's path.", t.Name, p, why)
			ok = false
			continue
		}
		s.Exec = append(s.Exec, p)
		s.ExecPos = append(s.ExecPos, c.pos(iter.Value(), 0))
	}
	t.Sandbox = s
	return ok
}

// badExec says what is wrong with a sandbox.exec entry: "" when nothing.
// Landlock grants by file and directory, so a pattern is a tree or a path.
func badExec(p string) string {
	rest := strings.TrimSuffix(p, "/**")
	switch {
	case p == "" || rest == "" || rest == "." && p == ".":
		return "names no path"
	case strings.ContainsAny(rest, "*?[]{}"):
		return "has a wildcard that is not a whole tree's /** at its end"
	case rest == "/" || p == "/**":
		return "would let every program run, what commands wrote too"
	}
	return ""
}

// network reads sandbox.network: left out or false for no network, true
// for all of it, or {allow: [...]} for the hosts reached through the
// gateway's proxy (rule R8).
func (c *compiler) network(t *Tool, s *SandboxSpec, v cue.Value) bool {
	if !v.Exists() {
		return true
	}
	switch v.IncompleteKind() {
	case cue.BoolKind:
		s.Network = boolean(v)
		return true
	case cue.StructKind:
		ok := true
		iter, _ := v.Fields(cue.Optional(true))
		for iter.Next() {
			if name := iter.Selector().Unquoted(); name != "allow" {
				c.fail(iter.Value(), rule.R8, "tool %s: sandbox.network has no field %s, only allow (the hosts reached through the gateway's proxy); remove %s.", t.Name, name, name)
				ok = false
			}
		}
		if allow := v.LookupPath(cue.ParsePath("allow")); allow.Exists() && allow.IncompleteKind() != cue.ListKind {
			c.fail(allow, rule.R8, "tool %s: sandbox.network.allow must be a list of hosts, such as [\"api.github.com\"], not %v.", t.Name, allow)
			return false
		}
		return c.hosts(t, s, v.LookupPath(cue.ParsePath("allow"))) && ok
	}
	c.fail(v, rule.R8, "tool %s: sandbox.network must be true, false or {allow: [...]} (the hosts reached through the gateway's proxy), not %v; write one of them, or leave it out for false.", t.Name, v)
	return false
}

// hosts reads sandbox.network.allow, the hosts a command reaches through
// the gateway's proxy (rule R8); a pattern that is not a host is an error.
func (c *compiler) hosts(t *Tool, s *SandboxSpec, v cue.Value) bool {
	ok := true
	iter, _ := v.List()
	for iter.Next() {
		h := str(iter.Value())
		if _, err := hostpattern.ParsePattern(h); err != nil {
			c.fail(iter.Value(), rule.R8, "tool %s: sandbox.network.allow: %v.", t.Name, err)
			ok = false
			continue
		}
		s.Hosts = append(s.Hosts, h)
	}
	return ok
}

// tests reads the policy's unit tests; one that names a tool or surface
// the policy does not define is reported (vet), and still run (it fails).
func (c *compiler) tests(g *Generation, v cue.Value) {
	iter, err := v.Fields()
	if err != nil {
		return
	}
	for iter.Next() {
		tv := iter.Value()
		t := Test{Name: iter.Selector().Unquoted(), Pos: c.pos(tv, 0), Tool: str(tv.LookupPath(cue.ParsePath("tool"))),
			Workdir: str(tv.LookupPath(cue.ParsePath("workdir"))), Allowed: boolean(tv.LookupPath(cue.ParsePath("allowed"))),
			Ask:  boolean(tv.LookupPath(cue.ParsePath("ask"))),
			Rule: rule.ID(str(tv.LookupPath(cue.ParsePath("rule")))), Reason: str(tv.LookupPath(cue.ParsePath("reason")))}
		// A test that names no surface runs on the agent, or its principal's chain.
		sv := tv.LookupPath(cue.ParsePath("surface"))
		byDefault := !sv.Exists()
		t.Surface = []string{"agent"}
		if !byDefault {
			t.Surface = nil
			_ = sv.Decode(&t.Surface)
		}
		if pv := tv.LookupPath(cue.ParsePath("principal")); pv.Exists() {
			t.Principal = &Claims{Subject: str(pv.LookupPath(cue.ParsePath("subject"))), Client: str(pv.LookupPath(cue.ParsePath("client")))}
			_ = pv.LookupPath(cue.ParsePath("groups")).Decode(&t.Principal.Groups)
			if byDefault {
				t.Surface = nil // the principal's chain
			}
		}
		if in, err := tv.LookupPath(cue.ParsePath("input")).MarshalJSON(); err == nil {
			t.Input = in
		} else {
			c.warn(t.Pos, "test", "test %q: its input is not concrete JSON (%v); write the input's values out.", t.Name, err)
		}
		if _, ok := g.Tools[t.Tool]; !ok && !IsMCPEntry(t.Tool) {
			msg := fmt.Sprintf("test %q calls %s, a tool the policy does not define.", t.Name, t.Tool)
			if near := tools.Closest(t.Tool, g.Names()); near != "" {
				msg = fmt.Sprintf("test %q calls %s, a tool the policy does not define; did you mean %q?", t.Name, t.Tool, near)
			}
			c.warn(c.pos(tv.LookupPath(cue.ParsePath("tool")), 0), "test", "%s", msg)
		}
		for _, ref := range t.Surface {
			if _, ok := g.Surfaces[ref]; !ok {
				c.warn(c.pos(sv, 0), "test", "test %q runs on %s, a surface the policy does not declare; declared are %s.", t.Name, ref, joinNames(g.SurfaceRefs()))
			}
		}
		t.Session = c.testSession(g, t.Name, tv.LookupPath(cue.ParsePath("session"))) // provenance.go
		if t.Reason != "" {
			if _, err := regexp.Compile(t.Reason); err != nil {
				c.warn(c.pos(tv.LookupPath(cue.ParsePath("reason")), 0), "test", "test %q: reason is not a valid regular expression: %v.", t.Name, err)
			}
		}
		g.Tests = append(g.Tests, t)
	}
}

// checkSubject reports a subject field that is not a parameter (rule P2).
func (c *compiler) checkSubject(t *Tool) bool {
	if t.Subject == nil {
		return true
	}
	if _, ok := fields(t.Input)[t.Subject.Field]; !ok {
		c.errs = append(c.errs, Diagnostic{Pos: t.subjectPos, Code: "P2", Message: fmt.Sprintf("tool %s: the subject field %q is not a parameter of its input; name one of its fields.", t.Name, t.Subject.Field)})
		return false
	}
	return true
}

// compileInput derives the tool's gate (rule S4), which exports its JSON
// Schema when a list first asks (rule S1). c.shipped holds, for one load,
// the gate of each built-in's input as shipped: most policies offer
// built-ins unchanged, often many times under several names.
func (c *compiler) compileInput(t *Tool) bool {
	shipped := t.Builtin != "" && !c.pos(t.Input, 1).IsValid()
	if shipped {
		if g, ok := c.shipped[t.Builtin]; ok {
			t.Gate = g
			return true
		}
	}
	if !shipped && !c.boundsMeetKinds(t.Name, t.Input, "") {
		return false
	}
	g, err := gate.Compile(t.Input)
	if err != nil {
		c.fail(t.Input, "S4", "tool %s: %v; declare input as a struct definition such as #%sInput.", t.Name, err, t.Name)
		return false
	}
	t.Gate = g
	if shipped {
		if c.shipped == nil {
			c.shipped = map[string]*gate.Gate{}
		}
		c.shipped[t.Builtin] = g
	}
	return true
}

// boundsMeetKinds fails, and returns false for, a bound that no value of
// its field's type can meet (timeout?: <="120000" on an integer): CUE
// leaves it unresolved until a call sets the field, and every call that
// does would be refused (rule S4).
func (c *compiler) boundsMeetKinds(tool string, v cue.Value, path string) bool {
	ok := true
	for _, name := range slices.Sorted(maps.Keys(fields(v))) {
		f := fields(v)[name]
		kind := f.IncompleteKind()
		if kind&cue.StructKind != 0 {
			ok = c.boundsMeetKinds(tool, f, path+name+".") && ok
		}
		if kind != cue.BottomKind {
			continue // the kinds agree
		}
		// The field's type is what its conjuncts other than bounds allow.
		kind = cue.TopKind
		var bounds []cue.Value
		for _, b := range conjuncts(f) {
			switch op, args := b.Expr(); {
			case len(args) == 1 && (op == cue.LessThanOp || op == cue.LessThanEqualOp || op == cue.GreaterThanOp || op == cue.GreaterThanEqualOp):
				bounds = append(bounds, b)
			default:
				kind &= b.IncompleteKind()
			}
		}
		for _, b := range bounds {
			_, args := b.Expr()
			bk := args[0].Kind()
			if bk == cue.StringKind && kind&cue.StringKind == 0 || bk&cue.NumberKind != 0 && kind&cue.NumberKind == 0 {
				c.errs = append(c.errs, Diagnostic{Pos: position(b.Pos()), Code: rule.S4, Message: fmt.Sprintf(
					"tool %s: input field %s is %s, and its bound %s compares it with a %s, which no %s meets: every call that sets it would be refused; write the bound as %s.",
					tool, path+name, kind, bound(b), bk, kind, unquoted(b))})
				ok = false
			}
		}
	}
	return ok
}

// conjuncts is v's conjuncts: v itself when it is not a conjunction.
func conjuncts(v cue.Value) []cue.Value {
	op, args := v.Expr()
	if op != cue.AndOp {
		return []cue.Value{v}
	}
	var out []cue.Value
	for _, a := range args {
		out = append(out, conjuncts(a)...)
	}
	return out
}

// bound is a bound as CUE writes it.
func bound(b cue.Value) string {
	src, err := format.Node(b.Syntax())
	if err != nil {
		return fmt.Sprint(b)
	}
	return string(src)
}

// unquoted is a string bound with its string unquoted: <=120000 for
// <="120000".
func unquoted(b cue.Value) string {
	return strings.ReplaceAll(bound(b), `"`, "")
}

// widened reports, and returns true for, the fields of got that want does
// not declare, at any depth.
func (c *compiler) widened(tool, builtin string, want, got cue.Value, path string) bool {
	declared := fields(want)
	found := false
	iter, err := got.Fields(cue.Optional(true))
	if err != nil {
		return false
	}
	for iter.Next() {
		name := iter.Selector().Unquoted()
		w, ok := declared[name]
		if !ok {
			c.fail(iter.Value(), "S2", "tool %s: %s is not a parameter of the built-in %s; a policy may narrow a built-in, never widen it: remove %q.", tool, path+"."+name, builtin, name)
			found = true
			continue
		}
		if w.IncompleteKind() == cue.StructKind {
			found = c.widened(tool, builtin, w, iter.Value(), path+"."+name) || found
		}
	}
	return found
}

// fields maps the names a struct declares, optional and required ones too,
// to their values. (LookupPath with an optional selector finds any name.)
func fields(v cue.Value) map[string]cue.Value {
	m := map[string]cue.Value{}
	iter, err := v.Fields(cue.Optional(true))
	if err != nil {
		return m
	}
	for iter.Next() {
		m[iter.Selector().Unquoted()] = iter.Value()
	}
	return m
}

func (c *compiler) surface(ref string, v cue.Value) *Surface {
	s := &Surface{Ref: ref}
	if effect, _ := c.oneOf(ref, v, maxEffectField); effect != "" {
		s.MaxEffect, s.MaxEffectPos = effect, position(v.LookupPath(cue.MakePath(cue.Str("max-effect"))).Pos())
	}
	// A list may hold thousands of entries in a few files: each file's
	// name is made relative once.
	files := map[string]string{}
	place := func(p token.Pos) Position {
		if !p.IsValid() {
			return Position{}
		}
		f, ok := files[p.Filename()]
		if !ok {
			f = relative(p.Filename())
			files[p.Filename()] = f
		}
		return Position{File: f, Line: p.Line(), Col: p.Column()}
	}
	entries := func(key string, es *[]string, pos *[]Position) bool {
		list := v.LookupPath(cue.MakePath(cue.Str(key)))
		iter, err := list.List()
		for err == nil && iter.Next() {
			*es = append(*es, str(iter.Value()))
			*pos = append(*pos, place(iter.Value().Pos()))
		}
		return list.Exists()
	}
	s.Declared = entries("allowed-tools", &s.Entries, &s.EntryPos)
	if s.Declared && len(s.Entries) == 0 {
		// A walk of the list's conjuncts, which built an expression of
		// each entry: a twentieth of a 1,000-tool start (issue 49).
		s.ListPos = c.pos(v.LookupPath(cue.MakePath(cue.Str("allowed-tools"))), 0)
	}
	entries(allow.DeniedTools, &s.Denied, &s.DeniedPos)
	entries(allow.AskTools, &s.Asked, &s.AskedPos)
	return s
}

// checkList reports entries that name no tool, and a list that leaves no
// tool at all (rule P12); deny and ask entries that name no tool too (rule
// P14): they would deny or ask for nothing.
func (c *compiler) checkList(g *Generation, s *Surface) {
	c.namesTools(g, s, allow.DeniedTools, s.Denied, s.DeniedPos, rule.P14)
	c.namesTools(g, s, allow.AskTools, s.Asked, s.AskedPos, rule.P14)
	if !s.Declared {
		return
	}
	known := c.namesTools(g, s, "allowed-tools", s.Entries, s.EntryPos, "P12")
	if known == 0 {
		pos := s.ListPos
		if len(s.EntryPos) > 0 {
			pos = s.EntryPos[0]
		}
		c.warn(pos, "P12", "%s allowed-tools leaves no tool at all, so every call on it is refused; %s", s.Ref, oneOf(g.Names()))
	}
}

// namesTools reports each entry of a list that names no tool the policy
// defines, and returns how many do name one. Of allowed-tools it is a
// warning (P12: the entry allows nothing, which only narrows); of
// denied-tools and ask-tools an error (P14): an entry meant to forbid
// something must never silently forbid nothing.
func (c *compiler) namesTools(g *Generation, s *Surface, key string, entries []string, pos []Position, code rule.ID) (known int) {
	for i, e := range entries {
		name := strings.TrimSpace(entryName(e))
		wildName := strings.ContainsAny(name, "*?[]{}")
		if _, _, wild := c.wildcardTool(name); !wildName && (defines(g, name) || IsMCPEntry(name) || wild) {
			// mcp__SERVER and mcp__SERVER__TOOL name Claude Code's MCP
			// tools, which the hook decides without a definition; the
			// tools of a server that exposes "*" are known once it runs.
			known++
			continue
		}
		msg := fmt.Sprintf("%s %s entry %q names no tool the policy defines", s.Ref, key, e)
		if wildName {
			// A tool name is matched whole: Rea?, Echo* and * name no tool.
			msg = fmt.Sprintf("%s %s entry %q names no tool: a tool name takes no wildcard, each entry names one tool", s.Ref, key, e)
		}
		switch server, _, _ := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__"); {
		case IsMCPEntry(name) && server != "" && !strings.ContainsAny(server, "*?[]{}"):
			msg += fmt.Sprintf("; did you mean %q? It names every tool of the server %s.", "mcp__"+server, server)
		case tools.Closest(name, g.Names()) != "":
			msg += fmt.Sprintf("; did you mean %q?", tools.Closest(name, g.Names()))
		default:
			msg += "; " + theTools(g.Names())
		}
		if code == rule.P14 {
			if name == "*" {
				msg += " To keep every tool but a few, list those in allowed-tools."
			}
			c.errs = append(c.errs, Diagnostic{Pos: pos[i], Code: code, Message: msg + fmt.Sprintf(" An entry of %s that names no tool would %s nothing; correct the name or remove the entry.", key, map[bool]string{true: "deny", false: "ask for"}[key == allow.DeniedTools])})
			continue
		}
		c.warn(pos[i], code, "%s", msg)
	}
	return known
}

// oneOf asks for one of names, or says there is none to name.
func oneOf(names []string) string {
	if len(names) == 0 {
		return "the policy defines no tool yet: define one under tools (or servers), then name it."
	}
	return "name at least one of " + joinNames(names) + "."
}

// theTools lists names, or says there are none.
func theTools(names []string) string {
	if len(names) == 0 {
		return "the policy defines no tool: define it under tools (or servers)."
	}
	return "the tools are " + joinNames(names) + "."
}

func defines(g *Generation, name string) bool { _, ok := g.Tools[name]; return ok }

// IsMCPEntry reports whether an entry's name is Claude Code's name of an MCP
// server (mcp__github) or of one of its tools (mcp__github__create_issue).
func IsMCPEntry(name string) bool { return allow.IsMCPName(name) }

// entryName is the tool name of an allowed-tools entry: Name or Name(pattern).
func entryName(e string) string {
	for i, r := range e {
		if r == '(' {
			return e[:i]
		}
	}
	return e
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func str(v cue.Value) string {
	if d, ok := v.Default(); ok {
		v = d
	}
	s, _ := v.String()
	return s
}

func integer(v cue.Value) int {
	if d, ok := v.Default(); ok {
		v = d
	}
	n, _ := v.Int64()
	return int(n)
}

func boolean(v cue.Value) bool {
	if d, ok := v.Default(); ok {
		v = d
	}
	b, _ := v.Bool()
	return b
}

func stringList(v cue.Value) []string {
	var out []string
	iter, _ := v.List()
	for iter.Next() {
		if s, err := iter.Value().String(); err == nil {
			out = append(out, s)
		}
	}
	return out
}
