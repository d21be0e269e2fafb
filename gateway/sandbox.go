package gateway

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"aimon.dev/gw/internal/rule"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/policy/allow"
	"aimon.dev/gw/tools"
)

// sandbox derives the sandbox of one call of t from the policy (rule R6):
// writable are the literal directory prefixes of the call's effective
// entries for the tools that write files (the built-ins Write and Edit,
// whatever the policy names them), and the tool's own sandbox.write; the
// policy directory and the binaries the gateway runs stay read-only.
func (g *Gateway) sandbox(cur *Current, eff *allow.Effective, t *policy.Tool) *tools.Sandbox {
	spec := t.Sandbox
	sb := &tools.Sandbox{Off: spec.Off, Network: spec.Network, Env: slices.Clone(spec.Env)}
	for _, name := range cur.Names() {
		wt := cur.Tools[name]
		if wt.Builtin != "Write" && wt.Builtin != "Edit" || !eff.Listed(name) {
			continue
		}
		dirs, all := eff.Prefixes(name)
		if all {
			dirs = []string{"/"}
		}
		sb.Writable = append(sb.Writable, dirs...)
	}
	for _, w := range spec.Write {
		sb.Writable = append(sb.Writable, home(w))
	}
	slices.Sort(sb.Writable)
	sb.Writable = slices.Compact(sb.Writable)
	if sb.Writable == nil {
		sb.Writable = []string{}
	}
	if cur.Dir != "" {
		sb.ReadOnly = append(sb.ReadOnly, cur.Dir)
	}
	if exe, err := os.Executable(); err == nil {
		sb.ReadOnly = append(sb.ReadOnly, exe)
	}
	for _, name := range cur.Names() {
		if p := cur.Tools[name].Plugin; p != nil && len(p.Command) > 0 && filepath.IsAbs(p.Command[0]) {
			sb.ReadOnly = append(sb.ReadOnly, p.Command[0])
		}
	}
	for _, h := range spec.Hide {
		sb.Hidden = append(sb.Hidden, home(h))
	}
	return sb
}

// home expands a leading ~/ to the gateway's home directory.
func home(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// scope is what an allowed call of a path tool may touch (rule R6): the
// deepest literal directory of the entries that allowed it, where its opens
// are anchored, and the same patterns for the files a search visits. Nil
// for a tool without a path subject.
func (g *Gateway) scope(p prepared, d rule.Decision) *tools.Scope {
	s := p.tool.Subject
	if s == nil || s.Kind != "path" {
		return nil
	}
	anchor := "/"
	for _, raw := range d.Entries {
		e, err := allow.ParseEntry(raw)
		if err != nil || !e.HasPattern {
			continue
		}
		dir := allow.LiteralDir(e.Pattern)
		if dir == path.Clean(e.Pattern) && dir != "/" {
			dir = path.Dir(dir) // a pattern without a glob names a file: anchor at its directory
		}
		if len(dir) > len(anchor) {
			anchor = dir
		}
	}
	if anchor == "/" && p.eff.Unlimited() {
		return &tools.Scope{Anchor: "/"}
	}
	eff, name, field, wd := p.eff, p.Name, s.Field, g.opts.Workdir
	return &tools.Scope{Anchor: anchor, Allows: func(path string) bool {
		return eff.Decide(name, map[string]any{field: path}, wd).Allowed
	}}
}
