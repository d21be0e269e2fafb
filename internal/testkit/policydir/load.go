package policydir

import (
	"context"
	"log/slog"
	"testing"

	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
)

// Load writes a policy of one file, src, in a module of its own and loads
// it as the gateway does, for the working directory wd; a policy that does
// not load fails the test.
func Load(t testing.TB, src, wd string) *provision.Generation {
	t.Helper()
	dir := Write(t, map[string]string{"policy.cue": src})
	h := pluginhost.New(slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	gen, err := reload.Load(context.Background(), reload.Registry(h, &provision.Upstreams{}), dir, wd, 0)
	if err != nil {
		t.Fatalf("the policy does not load: %v\n%s", err, src)
	}
	return gen
}
