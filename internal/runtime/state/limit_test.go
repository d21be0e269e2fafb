package state

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

// limiterKinds are the limiters that keep counts here: in this process's
// memory, and in the local store, for the command hooks' processes.
var limiterKinds = []string{"memory", "local"}

func newLimiter(t *testing.T, kind string, now func() time.Time) Limiter {
	if kind == "memory" {
		return NewMemory(now)
	}
	l, err := openLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l.now = now
	return l
}

func take(t *testing.T, l Limiter, cells ...Cell) (int, time.Duration) {
	t.Helper()
	i, wait, err := l.Take(context.Background(), cells)
	if err != nil {
		t.Fatal(err)
	}
	return i, wait
}

// TestP19GCRABurstThenSteadyRate: a limit of 30/min with a burst of 10
// takes 10 calls at once and refuses the 11th, saying it frees in 2 s (one
// emission interval); from then on one call every 2 s, never two.
func TestP19GCRABurstThenSteadyRate(t *testing.T) {
	for _, kind := range limiterKinds {
		t.Run(kind, func(t *testing.T) {
			c := &clock{time.Unix(1_800_000_000, 0)}
			m := newLimiter(t, kind, c.now)
			cell := Cell{Limit: "l", Caller: "alice", Interval: 2 * time.Second, Burst: 10}
			for i := range 10 {
				if r, _ := take(t, m, cell); r != -1 {
					t.Fatalf("call %d of the burst was refused", i+1)
				}
			}
			r, wait := take(t, m, cell)
			if r != 0 || wait != 2*time.Second {
				t.Fatalf("the burst's 11th call: refused %d, retry after %v; want cell 0 after 2s", r, wait)
			}
			c.add(time.Second)
			if r, wait := take(t, m, cell); r != 0 || wait != time.Second {
				t.Fatalf("a second later: refused %d, retry after %v; want 1s", r, wait)
			}
			for step := range 30 {
				c.add(time.Second) // now at an emission
				if r, _ := take(t, m, cell); r != -1 {
					t.Fatalf("step %d: a call at its emission interval was refused", step)
				}
				if r, wait := take(t, m, cell); r != 0 || wait != 2*time.Second {
					t.Fatalf("step %d: a second call within the interval: refused %d after %v", step, r, wait)
				}
				c.add(time.Second)
			}
			// A caller of its own is not bounded by alice's count.
			if r, _ := take(t, m, Cell{Limit: "l", Caller: "bob", Interval: 2 * time.Second, Burst: 10}); r != -1 {
				t.Fatal("another caller's first call was refused")
			}
			// Idle long enough, the whole burst is back, and no more.
			c.add(time.Hour)
			for i := range 10 {
				if r, _ := take(t, m, cell); r != -1 {
					t.Fatalf("after an idle hour, call %d of the burst was refused", i+1)
				}
			}
			if r, _ := take(t, m, cell); r != 0 {
				t.Fatal("an idle hour gave more than the burst")
			}
		})
	}
}

// TestP19QuotaPerWindow: a quota of 3/h takes three calls in its window,
// refuses the 4th until the window's end (the retry-after value), and
// takes three again in the next.
func TestP19QuotaPerWindow(t *testing.T) {
	for _, kind := range limiterKinds {
		t.Run(kind, func(t *testing.T) {
			c := &clock{time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(15 * time.Minute)}
			m := newLimiter(t, kind, c.now)
			cell := Cell{Limit: "q", Quota: 3, Window: time.Hour}
			for range 3 {
				if r, _ := take(t, m, cell); r != -1 {
					t.Fatal("a call within the quota was refused")
				}
			}
			if r, wait := take(t, m, cell); r != 0 || wait != 45*time.Minute {
				t.Fatalf("the 4th: refused %d after %v; want the window's end, 45m", r, wait)
			}
			c.add(45 * time.Minute)
			for range 3 {
				if r, _ := take(t, m, cell); r != -1 {
					t.Fatal("a call of the next window was refused")
				}
			}
		})
	}
}

// TestP19RefusedTakesNothing: when one cell refuses, no cell is spent; the
// refusal names the cell that frees last.
func TestP19RefusedTakesNothing(t *testing.T) {
	for _, kind := range limiterKinds {
		t.Run(kind, func(t *testing.T) {
			c := &clock{time.Unix(1_800_000_000, 0)}
			m := newLimiter(t, kind, c.now)
			rate := Cell{Limit: "rate", Interval: time.Second, Burst: 2}
			quota := Cell{Limit: "quota", Quota: 1, Window: 24 * time.Hour}
			if r, _ := take(t, m, rate, quota); r != -1 {
				t.Fatal("the first call was refused")
			}
			// The quota refuses now: the rate's second call must stay.
			if r, _ := take(t, m, rate, quota); r != 1 {
				t.Fatalf("refused by cell %d, want the quota (1)", r)
			}
			if r, _ := take(t, m, rate); r != -1 {
				t.Fatal("a call the quota refused spent the rate's burst")
			}
			if r, _ := take(t, m, rate); r != 0 {
				t.Fatal("the rate's burst of 2 took 3")
			}
		})
	}
}

// TestP19LocalCountsAcrossProcesses: 40 takers, each with its own open
// store on one state directory as the command hooks' processes have (the
// lock is per open file, so they exclude each other as processes do),
// racing for a burst of 15, take exactly 15.
func TestP19LocalCountsAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	cell := Cell{Limit: "bash", Interval: time.Hour, Burst: 15}
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			st, err := Open(dir, "")
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			r, _, err := st.(Limiter).Take(context.Background(), []Cell{cell})
			if err != nil {
				t.Error(err)
			} else if r == -1 {
				taken.Add(1)
			}
		})
	}
	wg.Wait()
	if n := taken.Load(); n != 15 {
		t.Errorf("40 takers of a burst of 15 took %d", n)
	}
}

// TestP19LocalFailsClosed: a count that cannot be read, and a lock another
// process holds past the take's time, are errors that say what to do,
// never a call taken.
func TestP19LocalFailsClosed(t *testing.T) {
	l, err := openLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cell := Cell{Limit: "bash", Interval: time.Hour, Burst: 3}
	if r, _ := take(t, l, cell); r != -1 {
		t.Fatal("the first call was refused")
	}
	name := filepath.Join(l.dir, "limits", key("bash\x00"))
	if err := os.WriteFile(name, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Take(context.Background(), []Cell{cell}); err == nil || !strings.Contains(err.Error(), "cannot be read") || !strings.Contains(err.Error(), "remove the file") {
		t.Errorf("a count that cannot be read: %v", err)
	}
	os.Remove(name)
	held, err := os.OpenFile(filepath.Join(l.dir, "limits", ".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := l.Take(ctx, []Cell{cell}); err == nil || !strings.Contains(err.Error(), "held the lock") {
		t.Errorf("a lock held past the take's time: %v", err)
	}
	syscall.Flock(int(held.Fd()), syscall.LOCK_UN)
	if r, _ := take(t, l, cell); r != -1 {
		t.Error("once the lock is free, the call the burst still holds was refused")
	}
}
