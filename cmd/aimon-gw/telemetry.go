package main

import (
	"context"
	"time"

	"aimon.dev/gw/internal/front/telemetry"
	"aimon.dev/gw/internal/runtime/gateway"
)

// traced sets up tracing from the OTEL_* environment (off when it names
// no exporter) into o; stop exports what is left, within a few seconds.
func traced(ctx context.Context, o *gateway.Options) (t *telemetry.Tracing, stop func(), err error) {
	t, err = telemetry.FromEnv(ctx)
	if err != nil {
		return nil, nil, fail(exitUsage, "%v", err)
	}
	o.Trace = t.Tracer()
	return t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := t.Shutdown(ctx); err != nil && o.Logger != nil {
			o.Logger.Warn("the last spans could not be exported", "error", err)
		}
	}, nil
}
