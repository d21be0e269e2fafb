package gateway

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
)

// reach keeps a search the gateway does not run (Claude Code's Grep and
// Glob) to what was decided (rules P4, P14, R7). Such a program reads the
// whole tree below its directory, where the built-ins visit only what the
// lists admit: a directory that holds a path a deny, ask or narrower allow
// entry withholds is refused (asked, when only ask entries withhold it),
// here and where a link leads, and so is a Glob pattern that leaves its
// directory. A path that is not a directory has no tree.
func (g *Gateway) reach(p prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.tool.Subject
	if !p.tool.SearchesElsewhere() || s == nil || s.Kind != "path" || !d.Allowed && !d.Ask {
		return d
	}
	dir, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	if pattern, _ := in["pattern"].(string); p.Name == "Glob" && leavesDir(pattern) {
		d.Allowed, d.Ask, d.Rule, d.Entries = false, false, rule.P4, nil
		d.Reason = fmt.Sprintf("Glob pattern %q may leave its directory %q (an absolute pattern or a '..'), where the decision was made; give the directory as path and a pattern relative to it.", pattern, dir)
		return d
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return d
	}
	for _, at := range slices.Compact([]string{dir, sandbox.RealPath(dir)}) {
		by, id, ask := p.eff.TreeWithheld(p.Name, at)
		if by == nil || ask && d.Ask {
			continue
		}
		shown, text := allow.Named(by, ", ")
		d.Allowed, d.Ask, d.Rule, d.Entries = false, ask, id, shown
		verdict := "is refused"
		if ask {
			verdict = "needs approval"
		}
		d.Reason = fmt.Sprintf("%s of %q %s: Claude Code searches everything below it, and on this surface some of that is withheld by %s; give as path a directory below it that holds none of that, or a file.", p.Name, at, verdict, text)
		return d
	}
	return d
}

// leavesDir reports whether a glob pattern may name a path outside the
// directory it is matched in: an absolute alternative or a '..' segment,
// braces read on the safe side.
func leavesDir(pattern string) bool {
	if strings.HasPrefix(pattern, "/") || strings.Contains(pattern, "{/") || strings.Contains(pattern, ",/") {
		return true
	}
	return slices.Contains(strings.FieldsFunc(pattern, func(r rune) bool { return strings.ContainsRune("/{},", r) }), "..")
}
