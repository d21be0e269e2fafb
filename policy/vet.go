package policy

import (
	"errors"
	"strings"

	"aimon.dev/gw/policy/allow"
)

// Vet returns every problem of a loaded policy that does not stop it from
// loading but that its authors should fix: the load's warnings (rules P7,
// P12) and a declared list that has nothing in common with the main agent's,
// so that every run on it would be refused (rule P11).
func Vet(g *Generation) []Diagnostic {
	ds := append([]Diagnostic(nil), g.Warnings...)
	for _, ref := range g.SurfaceRefs() {
		s := g.Surfaces[ref]
		if ref == "agent" || !s.Declared || len(s.Entries) == 0 {
			continue
		}
		if _, err := g.Effective([]string{"agent", ref}); errors.Is(err, allow.ErrNoTool) && !hasNoTool(ds, s) {
			ds = append(ds, Diagnostic{Pos: s.EntryPos[0], Code: "P11", Warning: true,
				Message: ref + " allowed-tools has no tool in common with the main agent's, so every run on it is refused; allow it a tool the agent may use."})
		}
	}
	sortDiagnostics(ds)
	return ds
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
