package state

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Cell is what one limit keeps for one caller (rule P19): a rate with a
// burst, decided by the generic cell rate algorithm (GCRA: a theoretical
// arrival time that each call moves on by Interval, refused while it lies
// more than (Burst-1)·Interval ahead of now), and a quota counted in fixed
// windows since the Unix epoch.
type Cell struct {
	// Limit and Caller name the cell: a limit's count for one caller.
	Limit, Caller string
	// Interval is the rate's emission interval, 0 for no rate; Burst how
	// many calls may run at once (at least 1).
	Interval time.Duration
	Burst    int64
	// Quota calls per Window; 0 for no quota.
	Quota  int64
	Window time.Duration
}

// A Limiter takes calls from cells.
type Limiter interface {
	// Take spends one call from every cell, or from none: when one
	// refuses, refused is its index (the one that frees last) and retry
	// when it frees; refused is -1 when the call was taken. An error means
	// it is not known (the store cannot be reached): the caller must not
	// run the call (fail closed), and nothing was spent.
	Take(ctx context.Context, cells []Cell) (refused int, retry time.Duration, err error)
	// String names where the counts are kept, for sentences.
	String() string
}

// Memory keeps the counts in this process: a limit of one process.
type Memory struct {
	now func() time.Time

	mu    sync.Mutex
	cells map[cellKey]*kept
	takes int
}

type cellKey struct{ limit, caller string }

// kept is a cell's state: the rate's theoretical arrival time (ns since
// the epoch), and the quota's count in its window, which ends at end (ns).
type kept struct{ tat, index, n, end int64 }

// NewMemory returns counts kept in memory, by the clock now (time.Now
// when nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, cells: map[cellKey]*kept{}}
}

func (m *Memory) String() string { return "this process's memory" }

func (m *Memory) Take(_ context.Context, cells []Cell) (int, time.Duration, error) {
	return m.TakeAt(m.now(), cells)
}

// TakeAt is Take at the time at, which a caller that has read the clock
// already passes on: on a host whose clock costs 100 ns a read, a second
// read is most of a limit's cost.
func (m *Memory) TakeAt(at time.Time, cells []Cell) (int, time.Duration, error) {
	m.mu.Lock()
	now := at.UnixNano()
	refused, wait := -1, int64(0)
	var kb [4]*kept // one map lookup a cell: what the check found, the spend changes
	ks := kb[:0]
	for i, c := range cells {
		k := m.cells[cellKey{c.Limit, c.Caller}]
		ks = append(ks, k)
		if k == nil {
			continue // a cell never taken refuses nothing
		}
		if w := k.wait(now, c); w > wait {
			refused, wait = i, w
		}
	}
	if refused >= 0 {
		m.mu.Unlock()
		return refused, time.Duration(wait), nil
	}
	for i, c := range cells {
		k := ks[i]
		if k == nil {
			k = &kept{}
			m.cells[cellKey{c.Limit, c.Caller}] = k
		}
		k.spend(now, c)
	}
	if m.takes++; m.takes >= 4096 {
		m.sweep(now)
	}
	m.mu.Unlock()
	return -1, 0, nil
}

// wait is how long (ns) the cell c, in the state k, refuses a call at
// now: 0 or less when it takes it.
func (k *kept) wait(now int64, c Cell) int64 {
	var wait int64
	if c.Interval > 0 {
		wait = max(k.tat, now) - int64(c.Interval)*(c.Burst-1) - now
	}
	if c.Quota > 0 {
		idx := now / int64(c.Window)
		if w := (idx+1)*int64(c.Window) - now; k.index == idx && k.n >= c.Quota && w > wait {
			wait = w
		}
	}
	return wait
}

// spend takes a call at now from the cell c in the state k.
func (k *kept) spend(now int64, c Cell) {
	if c.Interval > 0 {
		k.tat = max(k.tat, now) + int64(c.Interval)
	}
	if c.Quota > 0 {
		if idx := now / int64(c.Window); k.index != idx || k.end == 0 {
			k.index, k.n, k.end = idx, 0, (idx+1)*int64(c.Window)
		}
		k.n++
	}
}

// sweep forgets the cells that hold nothing any more: a theoretical
// arrival time passed is a full burst, a window ended a count of 0, as is
// no cell at all.
func (m *Memory) sweep(now int64) {
	m.takes = 0
	for ck, k := range m.cells {
		if k.tat <= now && k.end <= now {
			delete(m.cells, ck)
		}
	}
}

// limitScript takes a call from every cell or from none, atomically across
// every replica, in one round trip, by the server's clock (so the
// replicas' clocks need not agree). KEYS are each cell's rate key and
// quota key; ARGV each cell's interval (µs), burst, quota and window (µs).
// It answers {-1, 0}, or the refusing cell's index from 0 and its wait in
// µs.
var limitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS / 2
local refused, wait = -1, 0
local tats, counts, wins = {}, {}, {}
for i = 1, n do
  local interval, burst = tonumber(ARGV[4*i-3]), tonumber(ARGV[4*i-2])
  local quota, win = tonumber(ARGV[4*i-1]), tonumber(ARGV[4*i])
  if interval > 0 then
    local tat = tonumber(redis.call('GET', KEYS[2*i-1]) or now)
    if tat < now then tat = now end
    tats[i] = tat
    local w = tat - interval * (burst - 1) - now
    if w > wait then refused, wait = i - 1, w end
  end
  if quota > 0 then
    local idx = math.floor(now / win)
    local h = redis.call('HMGET', KEYS[2*i], 'w', 'n')
    local c = 0
    if tonumber(h[1]) == idx then c = tonumber(h[2]) or 0 end
    counts[i], wins[i] = c, idx
    if c >= quota then
      local w = (idx + 1) * win - now
      if w > wait then refused, wait = i - 1, w end
    end
  end
end
if refused >= 0 then return {refused, wait} end
for i = 1, n do
  if tats[i] then
    local tat = tats[i] + tonumber(ARGV[4*i-3])
    redis.call('SET', KEYS[2*i-1], string.format('%d', tat), 'PX', math.floor((tat - now) / 1000) + 1000)
  end
  if wins[i] then
    local win = tonumber(ARGV[4*i])
    redis.call('HSET', KEYS[2*i], 'w', string.format('%d', wins[i]), 'n', counts[i] + 1)
    redis.call('PEXPIREAT', KEYS[2*i], math.floor((wins[i] + 1) * win / 1000) + 1000)
  end
end
return {-1, 0}
`)

// Limiter is the limiter of s when it is one a fleet shares (Redis), nil
// for a local store, whose processes keep their counts in memory.
func LimiterOf(s Store) Limiter {
	if r, ok := s.(*remote); ok {
		return r
	}
	return nil
}

func (r *remote) Take(ctx context.Context, cells []Cell) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	keys := make([]string, 0, 2*len(cells))
	args := make([]any, 0, 4*len(cells))
	for _, c := range cells {
		k := "aimon-gw:limit:" + key(c.Limit+"\x00"+c.Caller)
		keys = append(keys, k+":rate", k+":quota")
		args = append(args, int64(c.Interval/time.Microsecond), c.Burst, c.Quota, int64(c.Window/time.Microsecond))
	}
	v, err := limitScript.Run(ctx, r.c, keys, args...).Int64Slice()
	if err != nil {
		return 0, 0, fmt.Errorf("%s cannot be reached: %w", r, err)
	}
	if len(v) != 2 || v[0] >= int64(len(cells)) {
		return 0, 0, fmt.Errorf("%s answered the limit's script with %v, which is no answer of it", r, v)
	}
	return int(v[0]), time.Duration(v[1]) * time.Microsecond, nil
}
