package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// execOutsideWritable warns of a sandbox.exec entry that lies outside
// every path a surface's commands may write (rule P16): programs there run
// already, so it changes nothing and likely names the wrong place. A
// warning, not an error: what is writable is decided per call, by the
// chain's Write and Edit entries. A relative entry lies in the working
// directory, known only when the gateway runs, and is not checked.
func execOutsideWritable(g *Generation) []Diagnostic {
	var writable []string
	all := false
	chains := [][]string{{"agent"}}
	for _, ref := range g.SurfaceRefs() {
		if ref != "agent" {
			chains = append(chains, []string{"agent", ref})
		}
	}
	for _, chain := range chains {
		eff, err := g.Effective(chain)
		if err != nil {
			continue
		}
		for _, name := range g.Names() {
			if t := g.Tools[name]; t == nil || !t.WritesFiles() || !eff.Listed(name) {
				continue
			}
			dirs, a := eff.Prefixes(name)
			all = all || a
			writable = append(writable, dirs...)
		}
	}
	var ds []Diagnostic
	for _, name := range g.Names() {
		t := g.Tools[name]
		if all || t == nil || t.Sandbox == nil {
			continue
		}
		ws := slices.Concat(writable, t.Sandbox.Write)
		for i, e := range t.Sandbox.Exec {
			root := strings.TrimSuffix(e, "/**")
			if !filepath.IsAbs(root) && !strings.HasPrefix(root, "~/") {
				continue
			}
			if slices.ContainsFunc(ws, func(w string) bool {
				w = strings.TrimSuffix(w, "/")
				return w == "" || root == w || strings.HasPrefix(root, w+"/")
			}) {
				continue
			}
			ds = append(ds, Diagnostic{Pos: t.Sandbox.ExecPos[i], Code: "P16", Warning: true, Message: fmt.Sprintf(
				"tool %s: sandbox.exec entry %q lies outside every path its commands may write (its sandbox.write and the directories of the Write and Edit entries), where programs run already, so it changes nothing; remove it, or name a directory the commands write.", name, e)})
		}
	}
	return ds
}
