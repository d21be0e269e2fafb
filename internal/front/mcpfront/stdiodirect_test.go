package mcpfront

import (
	"context"
	"testing"
)

// TestR2DirectCallsRunAtOnceOnKeptWorkers: each call answered on the
// guard's path runs, none waits behind another still running (a slow
// upstream call holds no later one), a call after them runs on a worker
// kept from them, and the workers end with their session.
func TestR2DirectCallsRunAtOnceOnKeptWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var w workers
	const n = 3
	started, release := make(chan int), make(chan struct{})
	for i := range n {
		w.run(ctx, func() {
			started <- i
			<-release
		})
	}
	seen := map[int]bool{}
	for range n { // every call runs while the others still hold theirs
		seen[<-started] = true
	}
	close(release)
	if len(seen) != n {
		t.Fatalf("%d of %d calls ran", len(seen), n)
	}
	// A worker is idle again once its call returns: the next call is
	// handed to one of them rather than to a new goroutine.
	kept := make(chan bool)
	w.idle <- func() { kept <- true }
	<-kept
	cancel()
	w.live.Wait() // the workers end with the session, or the test hangs
	ran := make(chan bool, 1)
	w.run(ctx, func() { ran <- true }) // a call after the end still runs
	<-ran
	w.live.Wait()
}
