package provision

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

// TestR8CoalescerRunsOneAtATime: triggers while a run is under way make
// one more run after it, never one each, and never two at once.
func TestR8CoalescerRunsOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		note     string
		triggers int
		want     int32
	}{
		{"one trigger, one run", 1, 1},
		{"a burst behind a run, one more", 1000, 2},
	} {
		t.Run(tc.note, func(t *testing.T) {
			var c coalescer
			var runs, running, most atomic.Int32
			first := make(chan struct{})
			release := make(chan struct{})
			f := func() {
				if n := running.Add(1); n > most.Load() {
					most.Store(n)
				}
				if runs.Add(1) == 1 {
					close(first)
					<-release // the burst arrives while the first run is under way
				}
				running.Add(-1)
			}
			c.trigger(f)
			<-first
			for range tc.triggers - 1 {
				c.trigger(f)
			}
			close(release)
			c.wg.Wait()
			if runs.Load() != tc.want || most.Load() != 1 {
				t.Errorf("%d triggers: %d runs, at most %d at once; want %d, one at a time", tc.triggers, runs.Load(), most.Load(), tc.want)
			}
		})
	}
}

// TestR8ListChangedBurstIsCoalesced: a server that sends a burst of
// tools/list_changed notifications is re-listed one request at a time,
// far fewer times than it said so, and the change is still seen (issue 27
// item 4, issue 29).
func TestR8ListChangedBurstIsCoalesced(t *testing.T) {
	const burst = 1000
	calls := filepath.Join(t.TempDir(), "calls")
	env := map[string]string{"AIMON_TEST_CALLS": calls, "AIMON_TEST_BURST": "1000"}
	up := &Upstreams{}
	defer up.Close()
	changed := make(chan string, burst)
	up.OnChange(func(server string) { changed <- server })
	b := bind(t, up, fsTool(fsServer(t), "burst", env))
	if r := b.Tool.Run(context.Background(), nil, tools.Input{}); r.IsError {
		t.Fatal(r.Text)
	}
	<-changed // the new tool was seen
	up.mu.Lock()
	var s *upstream
	for _, s = range up.servers {
	}
	up.mu.Unlock()
	for deadline := time.Now().Add(time.Minute); s.notices.Load() < burst; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d notifications received", s.notices.Load(), burst)
		}
	}
	s.relists.wg.Wait()
	log, _ := os.ReadFile(calls)
	lists := strings.Count(string(log), "tools/list")
	if strings.Contains(string(log), "tools/list 2") || lists-1 > burst/10 {
		t.Errorf("%d notifications made %d re-lists (at most %d wanted, one at a time):\n%s", burst, lists-1, burst/10, log)
	}
	t.Logf("%d notifications, %d re-lists", burst, lists-1)
}
