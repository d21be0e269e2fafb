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
	// Key names the limit and the caller.
	Key string
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
	tat   map[string]int64 // key → theoretical arrival time, ns since the epoch
	used  map[string]window
	takes int
}

// window is a quota's count in its window, which ends at end (ns).
type window struct{ index, n, end int64 }

// NewMemory returns counts kept in memory, by the clock now (time.Now
// when nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, tat: map[string]int64{}, used: map[string]window{}}
}

func (m *Memory) String() string { return "this process's memory" }

func (m *Memory) Take(_ context.Context, cells []Cell) (int, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UnixNano()
	refused, wait := -1, int64(0)
	refuse := func(i int, w int64) {
		if w > wait {
			refused, wait = i, w
		}
	}
	for i, c := range cells {
		if c.Interval > 0 {
			tat := max(m.tat[c.Key], now)
			refuse(i, tat-int64(c.Interval)*(c.Burst-1)-now)
		}
		if c.Quota > 0 {
			idx := now / int64(c.Window)
			if u := m.used[c.Key]; u.index == idx && u.n >= c.Quota {
				refuse(i, (idx+1)*int64(c.Window)-now)
			}
		}
	}
	if refused >= 0 {
		return refused, time.Duration(wait), nil
	}
	for _, c := range cells {
		if c.Interval > 0 {
			m.tat[c.Key] = max(m.tat[c.Key], now) + int64(c.Interval)
		}
		if c.Quota > 0 {
			idx := now / int64(c.Window)
			u := m.used[c.Key]
			if u.index != idx || u.end == 0 {
				u = window{index: idx, end: (idx + 1) * int64(c.Window)}
			}
			u.n++
			m.used[c.Key] = u
		}
	}
	if m.takes++; m.takes >= 4096 {
		m.sweep(now)
	}
	return -1, 0, nil
}

// sweep forgets the cells that hold nothing any more: a theoretical
// arrival time passed is a full burst, as is no entry at all.
func (m *Memory) sweep(now int64) {
	m.takes = 0
	for k, tat := range m.tat {
		if tat <= now {
			delete(m.tat, k)
		}
	}
	for k, u := range m.used {
		if u.end <= now {
			delete(m.used, k)
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
		k := "aimon-gw:limit:" + key(c.Key)
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
