package reload

import (
	"context"
	"log/slog"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/runtime/provision"
)

// OnceLoaded is Once for a policy loaded already (the public packages
// load it first, and provision it where it is used): upstream tools from
// their pins, else from their started servers; offline, from the pins
// alone, as OnceCached. kinds, when not nil, changes the registry before
// it binds (the tools a Go program registers in process).
func OnceLoaded(ctx context.Context, pg *policy.Generation, offline bool, timeout time.Duration, log *slog.Logger, kinds func(provision.Registry)) (gen *provision.Generation, close func(), err error) {
	h := pluginhost.New(log)
	up := &provision.Upstreams{Log: log, PinsFirst: !offline, Offline: offline, Wait: timeout}
	reg := Registry(h, up)
	if kinds != nil {
		kinds(reg)
	}
	return provisionOnce(ctx, h, up, reg, pg)
}

// provisionOnce binds pg through reg; close retires the generation and
// stops what h and up started. On error nothing stays started.
func provisionOnce(ctx context.Context, h *pluginhost.Host, up *provision.Upstreams, reg provision.Registry, pg *policy.Generation) (*provision.Generation, func(), error) {
	gen, err := reg.Provision(ctx, pg)
	if err != nil {
		h.Close()
		up.Close()
		return nil, nil, err
	}
	return gen, func() { gen.Retire(); h.Close(); up.Close() }, nil
}
