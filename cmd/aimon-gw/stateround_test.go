package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// redisCalls is how many commands of each name Redis has run; c is one
// connection, so that its own handshake is counted once, before the first.
func redisCalls(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, m := range regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		calls[m[1]], _ = strconv.Atoi(m[2])
	}
	return calls
}

// TestR10AllowedCallAsksTheStoreNothing: with --state redis://, calls that
// need no approval (allowed, denied, asked) send Redis no command, and an
// approved call sends it exactly one SET (one round trip); the counts are
// Redis's own.
func TestR10AllowedCallAsksTheStoreNothing(t *testing.T) {
	addr, _ := startRedis(t)
	dir, wd := askSetup(t)
	s := startServeProc(t, "--policy", dir, "--workdir", wd, "--approval-key", approvalKey(t), "--state", "redis://"+addr)
	// The session's first reply: the process is up, its client connected
	// or not; what it sends on connecting is not a call's.
	s.send(toolLine("warm", "Read", map[string]any{"file_path": "open"}))
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	before := redisCalls(t, c)
	for i := range 20 {
		if r := s.send(toolLine("open"+strconv.Itoa(i), "Read", map[string]any{"file_path": "open"})); r["is_error"] != false {
			t.Fatalf("an allowed read: %v", r)
		}
	}
	s.send(toolLine("deny", "Read", map[string]any{"file_path": "secret/key"}))
	tok := askToken(t, s.send(toolLine("ask", "Read", map[string]any{"file_path": "secret/a"})))
	mid := redisCalls(t, c)
	if d := diffCalls(before, mid); d != "" {
		t.Errorf("calls that spend no approval sent Redis commands: %s", d)
	}
	if r := s.send(approvedRead("approved", "secret/a", tok)); r["is_error"] != false || !strings.Contains(text(r), "the secret") {
		t.Fatalf("the approved call must run: %v", r)
	}
	after := redisCalls(t, c)
	if d := diffCalls(mid, after); d != "set+1" {
		t.Errorf("a spend must cost one SET and nothing else, sent: %q", d)
	}
}

// diffCalls says which commands ran between two counts, but the INFO the
// test itself sends.
func diffCalls(a, b map[string]int) string {
	var d []string
	for name, n := range b {
		if name != "info" && n != a[name] {
			d = append(d, name+"+"+strconv.Itoa(n-a[name]))
		}
	}
	return strings.Join(d, ",")
}
