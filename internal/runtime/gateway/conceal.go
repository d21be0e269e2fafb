package gateway

import (
	"fmt"
	"os"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
)

// secret refuses a call whose client reads the path itself (Claude Code's
// Read and Grep under the hook) where that path is, or a search below it
// reads, a secret of the gateway's: the key that seals exec's tickets or
// approvals, a TLS key (rule R8). The built-ins refuse these when they
// open them; a client's own tools are refused here, whatever the lists
// allow.
func (g *Gateway) secret(p prepared, in map[string]any, d rule.Decision) rule.Decision {
	s := p.tool.Subject
	if g.opts.ClientTools == "" || s == nil || s.Kind != "path" || !d.Allowed && !d.Ask {
		return d
	}
	at, ok := in[s.Field].(string)
	if !ok {
		return d
	}
	real := sandbox.LandsAt(at)
	held := sandbox.Concealing(at, real)
	if held == "" && p.tool.SearchesElsewhere() && (p.Name == "Grep" || p.Name == "grep_search") {
		if st, err := os.Stat(real); err == nil && st.IsDir() {
			if held = sandbox.ConcealedBelow(real); held == "" {
				held = sandbox.ConcealedBelow(at)
			}
		}
	}
	if held == "" {
		return d
	}
	return rule.Refused(rule.R8, fmt.Sprintf("%s of %q was not run: %s is a secret of the gateway's (a key that seals its tickets or approvals), and no tool may read it (rule R8); give a path that does not hold it.", p.Name, at, held))
}
