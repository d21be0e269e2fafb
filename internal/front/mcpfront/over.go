package mcpfront

import (
	"context"
	"log/slog"

	"aimon.dev/gw/internal/runtime/gateway"
)

// Over returns the surfaces of gw, a gateway its caller runs and swaps
// itself (the public gateway package) rather than one Start starts: gw
// must seal approvals (gateway.Options.Approvals). A call is cancelled
// when calls is done. After each Swap of gw, Sync.
func Over(calls context.Context, gw *gateway.Gateway, log *slog.Logger, version string) *Surfaces {
	return &Surfaces{ctx: calls, log: log, version: version, gw: gw, sets: map[string]*toolSet{}}
}

// Sync makes every server's tools those of the generation now in force,
// as a reload's OnSwap does.
func (s *Surfaces) Sync() { s.sync(s.gw) }
