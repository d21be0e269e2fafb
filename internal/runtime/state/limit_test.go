package state

import (
	"context"
	"testing"
	"time"
)

// clock is a fake clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
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
	c := &clock{time.Unix(1_800_000_000, 0)}
	m := NewMemory(c.now)
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
}

// TestP19QuotaPerWindow: a quota of 3/h takes three calls in its window,
// refuses the 4th until the window's end (the retry-after value), and
// takes three again in the next.
func TestP19QuotaPerWindow(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0).Truncate(time.Hour).Add(15 * time.Minute)}
	m := NewMemory(c.now)
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
}

// TestP19RefusedTakesNothing: when one cell refuses, no cell is spent; the
// refusal names the cell that frees last.
func TestP19RefusedTakesNothing(t *testing.T) {
	c := &clock{time.Unix(1_800_000_000, 0)}
	m := NewMemory(c.now)
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
}
