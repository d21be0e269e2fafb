package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/mcptest"
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

// TestR8UpstreamResultsAreBounded: a result past MaxResult is cut with a
// sentence; an answer past MaxMessage, over stdio or HTTP, is dropped
// unread with a sentence, and the server answers the next call (issue 27
// item 4).
func TestR8UpstreamResultsAreBounded(t *testing.T) {
	web := mcptest.NewEcho(t, "tok")
	t.Setenv("AIMON_TEST_TOKEN", "tok")
	stdio := func(size int) *policy.Tool {
		return fsTool(fsServer(t), "big", map[string]string{"AIMON_TEST_BIG": strconv.Itoa(size)})
	}
	http := &policy.Tool{Name: "web__repeat", Upstream: &policy.Upstream{Server: "web", Tool: "repeat", URL: web.URL, Headers: map[string]string{"Authorization": "Bearer ${AIMON_TEST_TOKEN}"}, NoPin: true}}
	// The next call, of a small answer, to the same server.
	next := map[*policy.Tool]tools.Input{http: {"text": "z", "times": 3}}
	for _, tc := range []struct {
		note string
		tool *policy.Tool
		in   tools.Input
		want string
	}{
		{"stdio, past MaxResult", stdio(MaxResult + 5000), tools.Input{}, fmt.Sprintf("was cut at %d of its %d bytes", MaxResult, MaxResult+5000)},
		{"stdio, past MaxMessage", stdio(MaxMessage + 1), tools.Input{}, fmt.Sprintf("with more than %d bytes", MaxMessage)},
		{"HTTP, past MaxResult", http, tools.Input{"text": "y", "times": MaxResult + 1}, fmt.Sprintf("was cut at %d of its %d bytes", MaxResult, MaxResult+1)},
		{"HTTP, past MaxMessage", http, tools.Input{"text": "y", "times": MaxMessage + 1}, fmt.Sprintf("with more than %d bytes", MaxMessage)},
	} {
		t.Run(tc.note, func(t *testing.T) {
			up := &Upstreams{}
			defer up.Close()
			b := bind(t, up, tc.tool)
			r := b.Tool.Run(context.Background(), nil, tc.in)
			if !strings.Contains(r.Text, tc.want) || len(r.Text) > MaxResult+200 {
				t.Errorf("a big result: %d bytes ending %q, want %q", len(r.Text), r.Text[max(0, len(r.Text)-300):], tc.want)
			}
			again, in := b, next[tc.tool]
			if in == nil {
				u := *tc.tool.Upstream
				u.Tool = "read_file"
				again = bind(t, up, &policy.Tool{Name: "fs__read_file", Upstream: &u})
				in = tools.Input{"path": "/dev/null"}
			}
			if r := again.Tool.Run(context.Background(), nil, in); r.IsError {
				t.Errorf("the next call: %s", r.Text)
			}
		})
	}
	if got := capResult(tools.Result{Text: strings.Repeat("é", MaxResult)}, "x").Text; !utf8.ValidString(got) {
		t.Error("a cut splits a rune")
	}
}
