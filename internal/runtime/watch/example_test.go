package watch_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/watch"
)

// How aimon-gw serve wires the watcher: New loads the first generation (and
// fails fast on a broken policy), swap stores each later one atomically,
// SIGHUP reloads, and Status answers the status line.
func Example() {
	var cur atomic.Pointer[policy.Generation] // the gateway's Swap does this
	w, err := watch.New("policies/main", func(g *policy.Generation) error { cur.Store(g); return nil }, watch.Options{Logger: slog.Default()})
	if err != nil {
		slog.Error("the policy does not load", "problems", err) // every problem, file:line:col
		return
	}
	cur.Store(w.Initial()) // New does not swap the first generation in

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			w.Reload()
		}
	}()
	go w.Run(ctx)

	_ = w.Status() // {"type":"status"}: generation, revision, loaded_at, last_error
}
