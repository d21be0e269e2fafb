package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"
)

// limitsPolicy limits Write to a burst of 3 (then one an hour) for every
// caller, and Echo to a burst of 5 for alice; Read is unlimited.
const limitsPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read, Write: schema.#Write}
validation: "enforce"
agent: "allowed-tools": ["Echo", "Read(./**)", "Write(./out/**)"]
principals: {
	alice: {subject: "alice", surface: ["agent"]}
	rita:  {subject: "rita", surface: ["agent"]}
}
limits: {
	writes: {tool: "Write", rate: "1/h", burst: 3}
	"alice-echo": {who: principal: "alice", tool: "Echo", rate: "1/h", burst: 5, quota: "1000/day"}
}
`

// TestP19ServeRefusesPastTheBurst: serve with a limit of a burst of 3
// Writes runs three and refuses the fourth with the line protocol's error
// result, a sentence naming the limit and when to retry, and the file is
// not written; five Writes the list refuses first spend nothing, and an
// unlimited Read is served after.
func TestP19ServeRefusesPastTheBurst(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, limitsPolicy)
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(wd, "open"), "open\n")
	os.Mkdir(filepath.Join(wd, "out"), 0o755)
	var lines []string
	for i := range 5 {
		lines = append(lines, toolLine(fmt.Sprint("outside", i), "Write", map[string]any{"file_path": filepath.Join(wd, fmt.Sprint("outside", i)), "content": "x"}))
	}
	for i := range 4 {
		lines = append(lines, toolLine(fmt.Sprint("w", i), "Write", map[string]any{"file_path": filepath.Join(wd, "out", fmt.Sprint(i)), "content": "x"}))
	}
	lines = append(lines, toolLine("read", "Read", map[string]any{"file_path": "open"}))
	replies := runServe(t, []string{"--policy", dir, "--workdir", wd}, nil, lines...)
	if len(replies) != len(lines) {
		t.Fatalf("%d replies to %d lines", len(replies), len(lines))
	}
	for i, r := range replies[:5] {
		if r["is_error"] != true || strings.Contains(text(r), "limit") {
			t.Errorf("a Write outside ./out must be refused by the list: %v", r)
		}
		if _, err := os.Stat(filepath.Join(wd, fmt.Sprint("outside", i))); err == nil {
			t.Errorf("a refused Write wrote outside%d", i)
		}
	}
	for i, r := range replies[5:8] {
		if r["is_error"] != false {
			t.Errorf("Write %d of the burst of 3 was refused, so the list's refusals spent the burst: %v", i+1, r)
		}
	}
	last := replies[8]
	for _, want := range []string{`Write was not run: the limit "writes" (1 calls per hour with a burst of 3, per caller)`, "callers with no identity", "The tool was not executed."} {
		if last["is_error"] != true || last["type"] != "tool_result" || last["tool_use_id"] != "w3" || !strings.Contains(text(last), want) {
			t.Errorf("the 4th Write must be the error result saying %q: %v", want, last)
		}
	}
	if !retryInAnHour.MatchString(text(last)) {
		t.Errorf("the 4th Write must say when to retry: %v", last)
	}
	if _, err := os.Stat(filepath.Join(wd, "out", "3")); err == nil {
		t.Error("the Write the limit refused wrote its file")
	}
	if r := replies[9]; r["is_error"] != false || !strings.Contains(text(r), "open") {
		t.Errorf("an unlimited Read after the limit refused: %v", r)
	}
}

// limitedError is the JSON-RPC error of a call a limit refused: code
// -32029 with retryAfterSeconds in its data.
func limitedError(t *testing.T, err error) (sentence string, retry float64) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != -32029 {
		t.Fatalf("want the JSON-RPC error -32029, got %v", err)
	}
	var data struct {
		RetryAfterSeconds *float64 `json:"retryAfterSeconds"`
	}
	if json.Unmarshal(je.Data, &data) != nil || data.RetryAfterSeconds == nil {
		t.Fatalf("the error's data has no retryAfterSeconds: %s", je.Data)
	}
	return je.Message, *data.RetryAfterSeconds
}

// TestP19HTTPLimitIsAJSONRPCError: over mcp --listen a limit is kept per
// principal: alice's sixth Echo is the JSON-RPC error -32029 with the
// sentence and retryAfterSeconds, while rita, whom the limit does not
// select, and alice's Read are served; Claude Code's HTTP hook denies
// rita's fourth Write with the sentence as its reason, and spends her
// count, not alice's; /metrics counts the refusals by the limits' names.
func TestP19HTTPLimitIsAJSONRPCError(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, limitsPolicy), t.TempDir()
	writeFile(t, filepath.Join(wd, "open"), "open\n")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens))
	alice, rita := g.session("tok-alice", "", nil), g.session("tok-rita", "", nil)
	ctx := context.Background()
	echo := func(s *mcp.ClientSession) (*mcp.CallToolResult, error) {
		return s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
	}
	for i := range 5 {
		if r, err := echo(alice); err != nil || r.IsError {
			t.Fatalf("alice's Echo %d of the burst of 5: %v %+v", i+1, err, r)
		}
	}
	_, err := echo(alice)
	sentence, retry := limitedError(t, err)
	if !strings.Contains(sentence, `the limit "alice-echo"`) || !strings.Contains(sentence, "for alice") || retry != 3600 {
		t.Errorf("alice's 6th Echo: %q, retry after %v; want the limit named and 3600 s", sentence, retry)
	}
	for i := range 8 {
		if r, err := echo(rita); err != nil || r.IsError {
			t.Fatalf("rita's Echo %d, which no limit selects: %v %+v", i+1, err, r)
		}
	}
	if r, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "Read", Arguments: map[string]any{"file_path": "open"}}); err != nil || r.IsError {
		t.Errorf("alice's unlimited Read: %v %+v", err, r)
	}
	hook := func(token string, i int) string {
		in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(wd, "out", fmt.Sprint(i)), "content": "x"}})
		status, _, body := g.post("/hooks/claude-code", token, string(in))
		if status != 200 {
			t.Fatalf("the hook answered %d: %s", status, body)
		}
		return body
	}
	for i := range 3 {
		if body := hook("tok-rita", i); !strings.Contains(body, `"permissionDecision":"allow"`) {
			t.Fatalf("rita's hooked Write %d of the burst of 3: %s", i+1, body)
		}
	}
	if body := hook("tok-rita", 3); !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, `the limit \"writes\"`) || !strings.Contains(body, "for rita") || !retryInAnHour.MatchString(body) {
		t.Errorf("rita's 4th hooked Write must be denied by the limit, saying when to retry: %s", body)
	}
	if body := hook("tok-alice", 0); !strings.Contains(body, `"permissionDecision":"allow"`) {
		t.Errorf("alice's first hooked Write was refused by rita's count: %s", body)
	}
	for name, want := range map[string]float64{"alice-echo": 1, "writes": 1} {
		if n := metric(t, g.base, "aimon_gw_limit_refusals_total", `limit="`+name+`"`); n != want {
			t.Errorf("/metrics counts %v refusals of %s, want %v", n, name, want)
		}
	}
}

// TestP19FleetSharesOneLimitThroughRedis: three mcp --listen replicas
// behind a real HAProxy share a real Redis (--state redis://): 200 Echo
// calls from alice at once, spread over the replicas, run exactly the
// limit's allowance (its burst of 5 — the rate adds one an hour), the rest
// refused with -32029. With Redis stopped, alice's limited Echo is refused
// with a sentence saying its count cannot be checked, while her Read,
// which no limit selects, is served.
func TestP19FleetSharesOneLimitThroughRedis(t *testing.T) {
	addr, stopRedis := startRedis(t)
	needCommand(t, "haproxy", "the Debian package haproxy")
	dir, wd := moduleDir(t, limitsPolicy), t.TempDir()
	writeFile(t, filepath.Join(wd, "open"), "open\n")
	tokens := tokensFile(t, staticTokens)
	var replicas []*httpGW
	var backends []string
	for range 3 {
		a := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		replicas = append(replicas, startHTTP(t, &http.Client{}, "--listen", a, "--policy", dir, "--workdir", wd, "--tokens", tokens, "--state", "redis://"+addr, "--cache", "off"))
		backends = append(backends, a)
	}
	lbPort := freePort(t)
	startHAProxy(t, lbPort, backends)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/mcp", lbPort)
	ctx := context.Background()

	var ran, limited atomic.Int64
	var mu sync.Mutex
	var others []string
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Go(func() {
			s, err := goSession(ctx, endpoint, "tok-alice")
			if err != nil {
				t.Errorf("client %d cannot connect: %v", w, err)
				return
			}
			defer s.Close()
			for range 20 {
				r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
				var je *jsonrpc.Error
				switch {
				case err == nil && !r.IsError:
					ran.Add(1)
				case errors.As(err, &je) && je.Code == -32029:
					limited.Add(1)
				default:
					mu.Lock()
					others = append(others, fmt.Sprintf("%v %+v", err, r))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(others) > 0 {
		t.Fatalf("%d calls neither ran nor were limited; the first: %s", len(others), others[0])
	}
	if ran.Load() != 5 || limited.Load() != 195 {
		t.Fatalf("200 calls over three replicas: %d ran, %d limited; want exactly the allowance, 5, and 195", ran.Load(), limited.Load())
	}
	var total float64
	for i, g := range replicas {
		n := metric(t, g.base, "aimon_gw_calls_total", `tool="Echo"`)
		if n == 0 {
			t.Errorf("replica %d decided no call: the calls were not spread", i+1)
		}
		total += n
	}
	if total != 200 {
		t.Errorf("the replicas decided %v calls, want 200", total)
	}

	stopRedis()
	// To a replica itself: HAProxy's 100 ms check gives up on a /readyz
	// that waits out the client's retry of the stopped Redis.
	direct := replicas[0].base + "/mcp"
	s, err := goSession(ctx, direct, "tok-rita")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := goSession(ctx, direct, "tok-alice")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, `the limit "alice-echo" bounds it, and its count cannot be checked`) {
		t.Errorf("alice's limited Echo with Redis stopped must be refused, saying why: %v %+v", err, r)
	}
	for _, c := range []struct {
		who  *mcp.ClientSession
		tool string
		args map[string]any
	}{{a, "Read", map[string]any{"file_path": "open"}}, {s, "Echo", map[string]any{"message": "hi"}}} {
		if r, err := c.who.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args}); err != nil || r.IsError {
			t.Errorf("an unlimited %s with Redis stopped must be served: %v %+v", c.tool, err, r)
		}
	}
}

// TestP19VetPlacesABadLimit: vet reports a bad limit with a sentence at
// its file:line:col and exits non-zero.
func TestP19VetPlacesABadLimit(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, strings.Replace(limitsPolicy, `burst: 3}`, `burst: 0}`, 1))
	out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
	want := filepath.Join(dir, "policy.cue") + `:13:46:`
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), `limit "writes": the burst is 0; a burst is how many calls may run at once, at least 1.`) {
		t.Errorf("vet of a burst of 0: %v\n%s", err, out)
	}
}

// TestP19OneRoundTripPerLimitedCall: with --state redis://, a call no
// limit selects sends Redis no command, and a limited call one script
// (EVALSHA), whatever else it decides; the counts are Redis's own.
func TestP19OneRoundTripPerLimitedCall(t *testing.T) {
	addr, _ := startRedis(t)
	dir := moduleDir(t, limitsPolicy)
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(wd, "open"), "open\n")
	os.Mkdir(filepath.Join(wd, "out"), 0o755)
	s := startServeProc(t, "--policy", dir, "--workdir", wd, "--state", "redis://"+addr)
	write := func(id string) map[string]any {
		return s.send(toolLine(id, "Write", map[string]any{"file_path": filepath.Join(wd, "out", id), "content": "x"}))
	}
	// The first loads the script (EVALSHA, NOSCRIPT, EVAL).
	if r := write("warm"); r["is_error"] != false {
		t.Fatalf("the first limited Write: %v", r)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer c.Close()
	before := redisCalls(t, c)
	for i := range 10 {
		if r := s.send(toolLine(fmt.Sprint("r", i), "Read", map[string]any{"file_path": "open"})); r["is_error"] != false {
			t.Fatalf("an unlimited Read: %v", r)
		}
	}
	// Echo's limit selects alice only; serve knows no caller.
	s.send(toolLine("echo", "Echo", map[string]any{"message": "hi"}))
	s.send(toolLine("outside", "Write", map[string]any{"file_path": filepath.Join(wd, "outside"), "content": "x"}))
	mid := redisCalls(t, c)
	if d := diffCalls(before, mid); d != "" {
		t.Errorf("calls no limit takes from (unlimited, unselected, refused by the list) sent Redis commands: %s", d)
	}
	if r := write("w1"); r["is_error"] != false {
		t.Fatalf("a limited Write within the burst: %v", r)
	}
	// Redis counts the commands the script runs too (TIME, GET, SET);
	// those are not round trips.
	var sent []string
	for _, d := range strings.Split(diffCalls(mid, redisCalls(t, c)), ",") {
		switch strings.Split(d, "+")[0] {
		case "time", "get", "set", "hmget", "hset", "pexpireat":
		default:
			sent = append(sent, d)
		}
	}
	if strings.Join(sent, ",") != "evalsha+1" {
		t.Errorf("a limited call must cost one EVALSHA and nothing else, sent: %q", sent)
	}
}

// hookLimitPolicy limits Write to a burst of 3 (then one an hour) under a
// name of the test run's own: a command hook keeps its counts in the
// user's state directory, which outlives the test.
func hookLimitPolicy(t *testing.T) (dir, wd, limit string) {
	t.Helper()
	limit = fmt.Sprintf("hook-writes-%d", time.Now().UnixNano())
	wd, _ = filepath.EvalSymlinks(t.TempDir())
	return moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: Write: schema.#Write
agent: "allowed-tools": ["Write(%s/out/**)"]
limits: %q: {tool: "Write", rate: "1/h", burst: 3}
`, wd, limit)), wd, limit
}

// hookWrite asks aimon-gw hook claude-code (a process of its own, with
// args added) about a Write of file; it returns the decision and its
// reason, or the exit code and standard error of a hook that failed.
func hookWrite(t *testing.T, policy, wd, file string, args ...string) (decision, reason string, code int) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": map[string]any{"file_path": file, "content": "x"}})
	h := exec.Command(gatewayBinary(t), append([]string{"hook", "claude-code", "--policy", policy, "--cache", "off"}, args...)...)
	h.Stdin = strings.NewReader(string(in))
	var stderr strings.Builder
	h.Stderr = &stderr
	out, err := h.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return "", stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var ans struct {
		Out struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("the hook's answer: %v: %s", err, out)
	}
	return ans.Out.Decision, ans.Out.Reason, 0
}

// TestP19CommandHookCountsLimits: aimon-gw hook claude-code, a process a
// call, counts a limit across its processes in the user's state
// directory: two Writes the list refuses spend nothing; of eight hooks
// at once on a limit's burst of 3, exactly three allow and five deny with
// Claude Code's reason naming the limit and the time to retry; with
// --state redis:// the count is Redis's (four calls, the fourth denied;
// emptied, the burst is back), and with Redis stopped the limited call
// is denied with a sentence saying its count cannot be checked. A --state
// that is no Redis URL is an error, never a call allowed.
var retryInAnHour = regexp.MustCompile(`retry after 3(5[0-9][0-9]|600) seconds`)

func TestP19CommandHookCountsLimits(t *testing.T) {
	t.Parallel()
	policy, wd, limit := hookLimitPolicy(t)
	for i := range 2 {
		if d, r, code := hookWrite(t, policy, wd, filepath.Join(wd, fmt.Sprint("outside", i))); d != "deny" || strings.Contains(r, "limit") {
			t.Fatalf("a Write outside ./out must be denied by the list: %s %q (exit %d)", d, r, code)
		}
	}
	var mu sync.Mutex
	got := map[string][]string{}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			d, r, code := hookWrite(t, policy, wd, filepath.Join(wd, "out", fmt.Sprint(i)))
			if code != 0 {
				t.Errorf("hook %d exited %d: %s", i, code, r)
			}
			mu.Lock()
			got[d] = append(got[d], r)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(got["allow"]) != 3 || len(got["deny"]) != 5 {
		t.Fatalf("eight hooks on a burst of 3 (the list's refusals spending nothing): %d allowed, %d denied; want 3 and 5: %v", len(got["allow"]), len(got["deny"]), got)
	}
	for _, r := range got["deny"] {
		if want := fmt.Sprintf(`Write was not run: the limit %q (1 calls per hour with a burst of 3, per caller)`, limit); !strings.Contains(r, want) {
			t.Errorf("a Write past the burst: %q, want %q", r, want)
		}
		// The hour is counted from the burst's first call, a few seconds
		// earlier on a loaded machine.
		if !retryInAnHour.MatchString(r) {
			t.Errorf("a Write past the burst: %q, want a retry in under an hour, less the seconds since the burst", r)
		}
	}

	addr, stopRedis := startRedis(t)
	red := []string{"--state", "redis://" + addr}
	for i := range 3 {
		if d, r, code := hookWrite(t, policy, wd, filepath.Join(wd, "out", "r"), red...); d != "allow" {
			t.Fatalf("hooked Write %d of the burst in Redis: %s %q (exit %d)", i+1, d, r, code)
		}
	}
	if d, r, _ := hookWrite(t, policy, wd, filepath.Join(wd, "out", "r"), red...); d != "deny" || !retryInAnHour.MatchString(r) {
		t.Errorf("the 4th hooked Write counted in Redis: %s %q", d, r)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if d, r, _ := hookWrite(t, policy, wd, filepath.Join(wd, "out", "r"), red...); d != "allow" {
		t.Errorf("with Redis emptied, the count must be back (it was Redis's): %s %q", d, r)
	}
	stopRedis()
	if d, r, _ := hookWrite(t, policy, wd, filepath.Join(wd, "out", "r"), red...); d != "deny" || !strings.Contains(r, "its count cannot be checked") {
		t.Errorf("with Redis stopped: %s %q; want a deny saying the count cannot be checked", d, r)
	}
	if d, r, code := hookWrite(t, policy, wd, filepath.Join(wd, "out", "r"), "--state", t.TempDir()); code != 2 || d != "" || !strings.Contains(r, "is not a redis:// or rediss:// URL") {
		t.Errorf("--state DIR: exit %d, %s %q; want exit 2 saying it is no Redis URL", code, d, r)
	}
}
