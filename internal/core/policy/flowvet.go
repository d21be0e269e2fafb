package policy

import (
	"fmt"
	"strings"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/rule"
)

// unusedFlowEntries are the entries of a surface's flows (rule P18) that
// name a tool the surface cannot use: its lists, along the chain from the
// main agent, do not allow it or deny it whole already, and no run
// started from it can have it either (a child is bound by its caller,
// P10), so the entry decides nothing while the session holds the label.
func unusedFlowEntries(g *Generation) []Diagnostic {
	if g.Session == nil {
		return nil
	}
	var ds []Diagnostic
	for _, f := range g.Session.Flows {
		eff, err := g.Effective([]string{f.Surface})
		if err != nil {
			continue // the chain itself is reported
		}
		check := func(key string, entries []string, pos []Position) {
			for i, e := range entries {
				name := strings.TrimSpace(entryName(e))
				if !defines(g, name) || eff.Listed(name) || i >= len(pos) {
					continue // an unknown tool is the load's error
				}
				ds = append(ds, Diagnostic{Pos: pos[i], Code: rule.P18, Warning: true, Message: fmt.Sprintf(
					"%s when %s %s entry %q names %s, which %s cannot use (its lists, from the main agent, do not allow it or deny it already), nor can a run started from it, so the entry decides nothing; allow %s there, or remove the entry.",
					f.Surface, f.Label, key, e, name, f.Surface, name)})
			}
		}
		check(allow.DeniedTools, f.Denied, f.DeniedPos)
		check(allow.AskTools, f.Asked, f.AskedPos)
	}
	return ds
}
