package main

import (
	"os"
	"path/filepath"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/ticket"
)

// hookWrap and the HTTP hook's sealer stay beside mcp --listen, which
// hands them to its HTTP hook, until that front end answers through the
// public gateway as the command hook does (issue 47).

// hookWrap is how the hook hands Claude Code an allowed Bash command
// (cache is its --cache, passed on when it names a directory of its own):
// through this binary's exec under the policy, in its sandbox; nil when
// the binary cannot find itself or serves the embedded policy.
// Its decision log (decisions) is passed on too, for exec to protect.
func hookWrap(policyDir, cache string, decisions gateway.DecisionLog) *cchook.Wrap {
	bin, err := os.Executable()
	if err != nil || policyDir == "" {
		return nil
	}
	pol, err := filepath.Abs(policyDir)
	if err != nil {
		return nil
	}
	w := &cchook.Wrap{Binary: bin, Policy: pol, Seal: ticket.SealOnFirstUse()}
	if cache != "" && cache != "off" {
		w.Cache, _ = filepath.Abs(cache)
	}
	if l, ok := decisions.(interface{ Path() string }); ok {
		w.Log, _ = filepath.Abs(l.Path())
	}
	return w
}
