package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
)

// Vet returns every problem of a loaded policy that does not stop it from
// loading but that its authors should fix: the load's warnings (rules P7,
// P12) and a declared list that has nothing in common with the main agent's,
// so that every run on it would be refused (rule P11), a server held to
// pins that has none, and an entry naming a tool its server's pins do not
// list (rule S3).
func Vet(g *Generation) []Diagnostic {
	return OnePerPlace(append(append([]Diagnostic(nil), g.Warnings...), vetChecks(g, g.Warnings)...))
}

// vetChecks are vet's findings beyond the load's warnings. They run on
// what compiled, also beside errors, so that one run reports every problem.
func vetChecks(g *Generation, warnings []Diagnostic) []Diagnostic {
	ds := emptiedByCeiling(g)
	ds = append(ds, g.inputNotes...)
	ds = append(ds, coveredByDeny(g)...)
	ds = append(ds, unhiddenReadDeny(g)...)
	ds = append(ds, unboundMCPReaders(g)...)
	ds = append(ds, unpinnedServers(g)...)
	ds = append(ds, missingCommands(g)...)
	ds = append(ds, unknownServerTools(g)...)
	ds = append(ds, digestOnlyPins(g)...)
	ds = append(ds, execOutsideWritable(g)...)
	ds = append(ds, unusedFlowEntries(g)...) // flowvet.go (rule P18)
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		if ref == "agent" || !s.Declared || len(s.Entries) == 0 {
			continue
		}
		if _, err := g.Effective([]string{"agent", ref}); errors.Is(err, allow.ErrNoTool) && !hasNoTool(warnings, s) {
			ds = append(ds, Diagnostic{Pos: s.EntryPos[0], Code: "P11", Warning: true,
				Message: ref + " allowed-tools has no tool in common with the main agent's, so every run on it is refused; allow it a tool the agent may use."})
			continue
		}
		ds = append(ds, disjointCommands(g, s)...)
	}
	return ds
}

// OnePerPlace sorts diagnostics by place and keeps one per place: one
// mistake (a misspelt tool) is reported once, not again for each of its
// consequences (the list it empties, the pattern it cannot check). An
// error wins over a warning; otherwise the first found, the most direct.
func OnePerPlace(ds []Diagnostic) []Diagnostic {
	sortDiagnostics(ds)
	out := ds[:0:0]
	for _, d := range ds {
		if n := len(out); n > 0 && d.Pos.IsValid() && out[n-1].Pos == d.Pos {
			if out[n-1].Warning && !d.Warning {
				out[n-1] = d
			}
			continue
		}
		out = append(out, d)
	}
	return out
}

// hasNoTool reports whether P12 already said that s leaves no tool at all.
func hasNoTool(ds []Diagnostic, s *Surface) bool {
	for _, d := range ds {
		if d.Code == "P12" && strings.HasPrefix(d.Message, s.Ref+" allowed-tools leaves no tool") {
			return true
		}
	}
	return false
}

// disjointCommands reports the command tools a child surface allows only by
// patterns that meet none of the main agent's patterns for the tool: every
// such call on the child is refused (rule P10).
func disjointCommands(g *Generation, child *Surface) []Diagnostic {
	agent := g.Surfaces["agent"]
	if !agent.Declared {
		return nil
	}
	patterns := func(s *Surface, tool string) (ps []string, pos Position, nameOnly bool) {
		for i, e := range s.Entries {
			ent, err := allow.ParseEntry(e)
			if err != nil || ent.Tool != tool {
				continue
			}
			if !ent.HasPattern {
				return nil, Position{}, true
			}
			if !pos.IsValid() {
				pos = s.EntryPos[i]
			}
			ps = append(ps, ent.Pattern)
		}
		return ps, pos, false
	}
	var ds []Diagnostic
	for _, name := range g.Names() {
		t := g.Tools[name]
		if t.Subject == nil || t.Subject.Kind != "command" {
			continue
		}
		mine, pos, free := patterns(child, name)
		theirs, _, theirsFree := patterns(&Surface{Entries: agent.Entries, EntryPos: agent.EntryPos}, name)
		if free || theirsFree || len(mine) == 0 || len(theirs) == 0 {
			continue
		}
		meet := false
		for _, a := range theirs {
			for _, b := range mine {
				meet = meet || allow.CommandPatternsMeet(a, b)
			}
		}
		if !meet {
			ds = append(ds, Diagnostic{Pos: pos, Code: "P10", Warning: true, Message: fmt.Sprintf(
				"%s allows %s only as %s, which has nothing in common with the main agent's %s, so every %s call on it is refused; give it a pattern within the agent's.",
				child.Ref, name, entries(name, mine), entries(name, theirs), name)})
		}
	}
	return ds
}

func entries(tool string, patterns []string) string {
	out := make([]string, len(patterns))
	for i, p := range patterns {
		out[i] = tool + "(" + p + ")"
	}
	return strings.Join(out, ", ")
}

// emptiedByCeiling reports a surface whose side-effect ceiling leaves none
// of the tools its list (or, with no list, the policy) names: every call on
// it is refused (rules P12, P13).
func emptiedByCeiling(g *Generation) []Diagnostic {
	var ds []Diagnostic
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		if s.MaxEffect == "" {
			continue
		}
		chain := []string{"agent", ref}
		ceil, _ := g.Ceiling(chain)
		names := g.Names()
		if s.Declared {
			names = nil
			for _, e := range s.Entries {
				if _, ok := g.Tools[entryName(e)]; ok {
					names = append(names, entryName(e))
				}
			}
		}
		if len(names) == 0 {
			continue // P12 has said the list leaves no tool
		}
		left := false
		for _, n := range names {
			left = left || !Above(g.Tools[n].Effect, ceil)
		}
		if !left {
			ds = append(ds, Diagnostic{Pos: s.MaxEffectPos, Code: "P12", Warning: true, Message: fmt.Sprintf(
				"%s max-effect %q leaves none of its tools (%s), so every call on it is refused; raise the ceiling or allow a tool within it.", ref, s.MaxEffect, joinNames(names))})
		}
	}
	return ds
}

// coveredByDeny reports each allow entry that a deny entry along its
// surface's chain (the main agent's and the surface's own) covers whole,
// so that it allows nothing (rule P14).
func coveredByDeny(g *Generation) []Diagnostic {
	subjects := listSubjects(g)
	agent := g.Surfaces["agent"]
	var ds []Diagnostic
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		denied := chainOf(ref, agent.Denied, s.Denied)
		if len(denied) == 0 || !s.Declared {
			continue
		}
		denies := parsed(g.comp.resolveEntries(denied, subjects))
		for i, raw := range g.comp.resolveEntries(s.Entries, subjects) {
			a, err := allow.ParseEntry(raw)
			if err != nil {
				continue
			}
			for j, d := range denies {
				if allow.Covers(subjects[a.Tool].Kind, d, a) {
					ds = append(ds, Diagnostic{Pos: s.EntryPos[i], Code: "P14", Warning: true, Message: fmt.Sprintf(
						"%s allowed-tools entry %q is covered whole by the denied-tools entry %q, so it allows nothing; remove it, or narrow the deny entry.", ref, s.Entries[i], denied[j])})
					break
				}
			}
		}
	}
	return ds
}

// unhiddenReadDeny reports a denied-tools or ask-tools entry of a Read
// tool whose pattern has no literal directory (Read(**/.env)): it binds
// Grep and Glob whole (rule P17), but a command's sandbox can hide only
// the files it names that exist under the working directory when the
// command starts, not one the command makes itself nor one elsewhere.
func unhiddenReadDeny(g *Generation) []Diagnostic {
	subjects := listSubjects(g)
	var ds []Diagnostic
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		for _, key := range []struct {
			name string
			own  []string
			pos  []Position
		}{{"denied-tools", s.Denied, s.DeniedPos}, {"ask-tools", s.Asked, s.AskedPos}} {
			for i, e := range parsed(g.comp.resolveEntries(key.own, subjects)) {
				if !e.HasPattern || g.Tools[e.Tool] == nil || g.Tools[e.Tool].ReadsAs() != "file" || i >= len(key.pos) {
					continue
				}
				if d := allow.LiteralDir(e.Pattern); d != "/" && path.IsAbs(d) {
					continue
				}
				ds = append(ds, Diagnostic{Pos: key.pos[i], Code: "P17", Warning: true, Message: fmt.Sprintf(
					"%s %s entry %q has no directory of its own, so a command's sandbox hides only the files it names that exist under the working directory when the command starts, not one the command creates itself nor one elsewhere; give it a literal directory (%s(/srv/secret/**)), or list such files in the command tool's sandbox.hide.",
					ref, key.name, key.own[i], e.Tool)})
			}
		}
	}
	return ds
}

// unboundMCPReaders are allowed-tools entries of a client's MCP tools the
// policy does not declare (mcp__fs, under a runtime's hook) beside a Read
// deny or ask entry with a pattern: such a tool is decided by name, with
// no path to judge, so the entry cannot bind what it reads (rule P17).
func unboundMCPReaders(g *Generation) []Diagnostic {
	var binding string
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		for _, e := range parsed(slices.Concat(s.Denied, s.Asked)) {
			if t := g.Tools[e.Tool]; binding == "" && e.HasPattern && t != nil && t.ReadsAs() != "" {
				binding = e.Raw
			}
		}
	}
	if binding == "" {
		return nil
	}
	var ds []Diagnostic
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		for i, raw := range s.Entries {
			name := strings.TrimSpace(raw)
			if !IsMCPEntry(name) || !clientMCP(g, name) || i >= len(s.EntryPos) {
				continue
			}
			server, _, _ := strings.Cut(strings.TrimPrefix(name, "mcp__"), "__")
			ds = append(ds, Diagnostic{Pos: s.EntryPos[i], Code: "P17", Warning: true, Message: fmt.Sprintf(
				"%s allowed-tools entry %q allows MCP tools the policy does not declare, so they are decided by name and %q cannot bind what they read; declare each tool of the server that reads a path, with its subject and effect (tools: mcp__%s__read_file: claudecode.#Tool & {effect: \"read\", subject: {field: \"path\", kind: \"path\"}, input: path!: string}), and allow them one by one, or leave the server off the list.",
				ref, raw, binding, server)})
		}
	}
	return ds
}

// clientMCP reports whether an MCP entry names tools of a server the
// gateway does not know, which the client runs and the policy decides by
// name: an undeclared mcp__S__T, or mcp__S with no upstream tool S__*.
func clientMCP(g *Generation, name string) bool {
	rest := strings.TrimPrefix(name, "mcp__")
	if strings.Contains(rest, "__") {
		return !defines(g, name) && !defines(g, rest)
	}
	for t := range g.Tools {
		if strings.HasPrefix(t, rest+"__") {
			return false
		}
	}
	return true
}

// chainOf is a surface's entries of one kind with the main agent's before
// them, which bind every run started from it.
func chainOf(ref string, agent, own []string) []string {
	if ref == "agent" {
		return own
	}
	return append(slices.Clip(agent), own...)
}

// parsed are the entries that can be read; one that cannot is left as a
// zero Entry, which P7 reports.
func parsed(raws []string) []allow.Entry {
	es := make([]allow.Entry, len(raws))
	for i, raw := range raws {
		if e, err := allow.ParseEntry(raw); err == nil {
			es[i] = e
		}
	}
	return es
}

// typeNames are the names a YAML or JSON author writes for a type, which
// CUE reads as a string value.
var typeNames = map[string]bool{"string": true, "int": true, "integer": true, "number": true, "float": true,
	"bool": true, "boolean": true, "object": true, "array": true, "null": true}

// inputTypeNames are the typeNames of every tool's input, each input
// once: tools that share a gate share their input. A tool that waits for
// its implementation has them found now, the others when compiled.
func inputTypeNames(g *Generation) []Diagnostic {
	var ds []Diagnostic
	seen := map[*gate.Gate]bool{}
	for _, name := range g.Names() {
		t := g.Tools[name]
		if t.Gate != nil {
			if seen[t.Gate] {
				continue
			}
			seen[t.Gate] = true
		}
		found := t.typeNames
		if t.pending {
			found = typeNameFindings("input", t.Input, 0)
		}
		for _, f := range found {
			ds = append(ds, Diagnostic{Pos: f.pos, Code: "input", Warning: true, Message: fmt.Sprintf(
				"tool %s: %s admits only the string %q, so every other value is refused; a type written in YAML or JSON is a string: write the input as JSON Schema (type: object, properties: {%s: {type: %s}}), or this field in a .cue file beside it (%[4]s: %[6]s).",
				name, f.path, f.s, f.path[strings.LastIndex(f.path, ".")+1:], jsonType(f.s), cueType(f.s))})
		}
	}
	return ds
}

// A typeName is a field of a tool's input whose only value is the name of
// a type: in YAML, message: string is the string "string", so the tool
// would accept that word alone.
type typeName struct {
	pos     Position
	path, s string
}

// typeNameFindings finds the typeNames of v, at path.
func typeNameFindings(path string, v cue.Value, depth int) []typeName {
	if !v.Exists() || depth > 8 {
		return nil
	}
	if s, err := v.String(); err == nil && v.IsConcrete() && typeNames[s] {
		return []typeName{{position(v.Pos()), path, s}}
	}
	if v.IncompleteKind() != cue.StructKind {
		return nil
	}
	var out []typeName
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	for it.Next() {
		out = append(out, typeNameFindings(path+"."+it.Selector().Unquoted(), it.Value(), depth+1)...)
	}
	return out
}

// jsonType is JSON Schema's spelling of a type name.
func jsonType(name string) string {
	switch name {
	case "int":
		return "integer"
	case "float":
		return "number"
	case "bool":
		return "boolean"
	}
	return name
}

// cueType is CUE's spelling of a type name.
func cueType(name string) string {
	switch name {
	case "integer":
		return "int"
	case "boolean":
		return "bool"
	case "object":
		return "{...}"
	case "array":
		return "[...]"
	}
	return name
}
