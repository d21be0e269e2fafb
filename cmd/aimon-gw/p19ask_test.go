package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// hookBash asks aimon-gw hook claude-code about a Bash command in wd, as
// Claude Code does; it returns the decision, the command Claude Code runs
// (the updatedInput's) and the reason.
// The hook's flags are args besides --policy and --cache off.
func hookBash(t *testing.T, policy, wd, command string, args ...string) (decision, updated, reason string) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": command}})
	h := exec.Command(gatewayBinary(t), append([]string{"hook", "claude-code", "--policy", policy, "--cache", "off"}, args...)...)
	h.Stdin = strings.NewReader(string(in))
	out, err := h.Output()
	if err != nil {
		t.Fatalf("hook on %q: %v", command, err)
	}
	var ans struct {
		Out struct {
			Decision string         `json:"permissionDecision"`
			Reason   string         `json:"permissionDecisionReason"`
			Updated  map[string]any `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("the hook's answer: %v: %s", err, out)
	}
	updated, _ = ans.Out.Updated["command"].(string)
	return ans.Out.Decision, updated, ans.Out.Reason
}

// askedGitInitPolicy is a policy that asks about git init, allows the
// rest of Bash, and bounds Bash by the quota of 2 a day it names.
const askedGitInitPolicy = `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)", "Bash"]
agent: "ask-tools": ["Bash(git init:*)"]
limits: %q: {tool: "Bash", quota: "2/day"}
`

// approvedGitInits asks about three git inits on a quota of 2 (limit) in
// wd through ask, which answers the command Claude Code runs, and runs
// each as Claude Code does once its person approves: two run, the third
// is refused by the limit (exit 126), its repository not made. forge, when
// not nil, is given the third's command before it runs.
func approvedGitInits(t *testing.T, wd, limit string, ask func(i int, command string) string, forge func(updated string)) {
	t.Helper()
	for i := range 3 {
		repo := fmt.Sprint("gi", i)
		updated := ask(i, "git init "+repo)
		if i == 2 && forge != nil {
			forge(updated)
		}
		c := exec.Command("bash", "-c", updated)
		c.Dir = wd
		out, err := c.CombinedOutput()
		_, made := os.Stat(filepath.Join(wd, repo, ".git"))
		if i < 2 {
			if err != nil || made != nil {
				t.Fatalf("approved git init %d of a quota of 2 must run: %v %v\n%s", i, err, made, out)
			}
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitNotRun || !strings.Contains(string(out), fmt.Sprintf("the limit %q", limit)) {
			t.Errorf("the 3rd approved git init on a quota of 2 must be refused by the limit (exit 126): %v\n%s", err, out)
		}
		if made == nil {
			t.Errorf("the 3rd approved git init ran past the quota: %s exists", repo)
		}
	}
}

// TestP19HookCountsApprovedAsksOnce: under the command hook an asked
// Bash call the person approves is spent from the policy's limits when it
// runs (exec of its approved ticket), as serve spends an approved call,
// and once: an ask the person refuses (never run) spends nothing; of
// three approved runs on a quota of 2, two run and the third is refused
// by the limit, its repository not made; the next allowed call is denied
// by the limit too (probe P8).
func TestP19HookCountsApprovedAsksOnce(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	limit := fmt.Sprintf("asked-bash-%d", time.Now().UnixNano())
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, fmt.Sprintf(askedGitInitPolicy, limit))
	// Asked and refused by the person: Claude Code never runs it.
	if d, updated, r := hookBash(t, policy, wd, "git init refused"); d != "ask" || !strings.Contains(updated, "'--approved'") {
		t.Fatalf("git init must be asked through exec: %s %q %q", d, updated, r)
	}
	approvedGitInits(t, wd, limit, func(i int, command string) string {
		d, updated, r := hookBash(t, policy, wd, command)
		if d != "ask" {
			t.Fatalf("the hook must ask about git init %d (an ask spends nothing): %s %q", i, d, r)
		}
		return updated
	}, nil)
	if d, _, r := hookBash(t, policy, wd, "ls"); d != "deny" || !strings.Contains(r, fmt.Sprintf("the limit %q", limit)) {
		t.Errorf("with the quota spent by approved calls, ls must be denied by the limit: %s %q", d, r)
	}
}

// TestP19HookSpendsApprovedAsksInTheFleetsStore: with the hook started
// with --state redis://ADDR, the fleet's store, an approved asked Bash
// command is spent by exec in that Redis, not in the user's state
// directory: after two approved git inits on a quota of 2, Redis holds
// the limit's count of 2, a third approved one is refused by the limit
// (its repository not made), and ls through the hook is denied by the
// limit the approved runs spent. exec with the hook's --state changed or
// left out refuses the ticket.
func TestP19HookSpendsApprovedAsksInTheFleetsStore(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	addr, _ := startRedis(t)
	fleet := []string{"--state", "redis://" + addr}
	limit := fmt.Sprintf("fleet-asked-bash-%d", time.Now().UnixNano())
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, fmt.Sprintf(askedGitInitPolicy, limit))
	approvedGitInits(t, wd, limit, func(i int, command string) string {
		d, updated, r := hookBash(t, policy, wd, command, fleet...)
		if d != "ask" || !strings.Contains(updated, "'--state' 'redis://"+addr+"'") {
			t.Fatalf("git init %d must be asked through exec with the hook's --state: %s %q %q", i, d, updated, r)
		}
		return updated
	}, func(updated string) {
		// The store is the hook's word, bound to the ticket: neither
		// another one nor none spends the approved command elsewhere.
		word := "'--state' 'redis://" + addr + "'"
		for _, forged := range []string{strings.Replace(updated, word, "'--state' 'redis://127.0.0.1:1'", 1), strings.Replace(updated, word+" ", "", 1)} {
			c := exec.Command("bash", "-c", forged)
			c.Dir = wd
			out, err := c.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitNotRun || !strings.Contains(string(out), "sealed with other protections") {
				t.Errorf("exec with its --state changed must refuse the ticket (exit 126): %v\n%s", err, out)
			}
		}
	})
	if n := redisQuotaCount(t, addr); n != "2" {
		t.Errorf("Redis counts %q approved runs of the quota, want 2", n)
	}
	if d, _, r := hookBash(t, policy, wd, "ls", fleet...); d != "deny" || !strings.Contains(r, fmt.Sprintf("the limit %q", limit)) {
		t.Errorf("with the fleet's quota spent by approved runs, ls through the hook must be denied by the limit: %s %q", d, r)
	}
}

// TestP19HookKeepsTheStoresPasswordOutOfTheCommand: with --state naming
// a Redis by a URL with its password, the command the hook hands Claude
// Code (which shows it, logs it and gives it to the model) carries the URL
// with the password masked; exec reads the whole URL back from the state
// directory and spends the approved runs in that Redis, and a command
// whose reference is changed runs nothing (rule P19; the password in
// exec's line, session 18's note).
func TestP19HookKeepsTheStoresPasswordOutOfTheCommand(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	const password = "s3cret-of-the-fleet"
	addr, _ := startRedis(t, "--requirepass", password)
	fleet := []string{"--state", "redis://:" + password + "@" + addr}
	limit := fmt.Sprintf("fleet-masked-bash-%d", time.Now().UnixNano())
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, fmt.Sprintf(askedGitInitPolicy, limit))
	masked := regexp.MustCompile(`'--state' 'redis://:xxxxx@` + regexp.QuoteMeta(addr) + `#aimon-gw-secret=([0-9a-f]{24})'`)
	approvedGitInits(t, wd, limit, func(i int, command string) string {
		d, updated, r := hookBash(t, policy, wd, command, fleet...)
		if d != "ask" || strings.Contains(updated, password) || !masked.MatchString(updated) {
			t.Fatalf("git init %d must be asked through exec with the hook's --state, its password masked: %s %q %q", i, d, updated, r)
		}
		return updated
	}, func(updated string) {
		ref := masked.FindStringSubmatch(updated)[1]
		forged := strings.Replace(updated, ref, strings.Repeat("0", 24), 1)
		c := exec.Command("bash", "-c", forged)
		c.Dir = wd
		out, err := c.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitNotRun {
			t.Errorf("exec with its --state's reference changed must run nothing (exit 126): %v\n%s", err, out)
		}
	})
	if n := redisQuotaCount(t, "redis://:"+password+"@"+addr); n != "2" {
		t.Errorf("Redis counts %q approved runs of the quota, want 2", n)
	}
}

// redisQuotaCount is the count of the one quota the Redis at addr (or
// the redis:// URL) holds, as the limits' script keeps it.
func redisQuotaCount(t *testing.T, addr string) string {
	t.Helper()
	opts := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opts, err = redis.ParseURL(addr); err != nil {
			t.Fatal(err)
		}
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "aimon-gw:limit:*:quota").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("Redis must hold the one quota the approved runs spent: %v %v", keys, err)
	}
	n, err := rc.HGet(ctx, keys[0], "n").Result()
	if err != nil {
		t.Fatalf("Redis's quota %s has no count: %v", keys[0], err)
	}
	return n
}

// TestP19HookSpendsClientRunAsksAtTheAsk: an asked Write, which Claude
// Code runs itself once its person says yes and no exec of ours runs, is
// spent from the limits at the ask: on a quota of 2, two are asked and the
// third is denied by the limit, so Claude Code never offers it to the
// person (probe P8's remainder; rule P19).
func TestP19HookSpendsClientRunAsksAtTheAsk(t *testing.T) {
	t.Parallel()
	limit := fmt.Sprintf("asked-write-%d", time.Now().UnixNano())
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)"]
agent: "ask-tools": ["Write(./notes/**)"]
limits: %q: {tool: "Write", quota: "2/day"}
`, limit))
	for i, want := range []string{"ask", "ask", "deny"} {
		in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Write",
			"tool_input": map[string]any{"file_path": filepath.Join(wd, "notes", fmt.Sprint(i)), "content": "x"}})
		h := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", policy, "--cache", "off")
		h.Stdin = strings.NewReader(string(in))
		out, err := h.Output()
		if err != nil || !strings.Contains(string(out), `"permissionDecision":"`+want+`"`) {
			t.Fatalf("asked Write %d on a quota of 2: want %s: %v %s", i, want, err, out)
		}
		if want == "deny" && !strings.Contains(string(out), limit) {
			t.Errorf("the third asked Write must be denied by the limit: %s", out)
		}
	}
	// An allowed Write is then out of the quota too.
	in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Write",
		"tool_input": map[string]any{"file_path": filepath.Join(wd, "ok"), "content": "x"}})
	h := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", policy, "--cache", "off")
	h.Stdin = strings.NewReader(string(in))
	if out, _ := h.Output(); !strings.Contains(string(out), `"permissionDecision":"deny"`) {
		t.Errorf("with the quota spent at the asks, an allowed Write must be denied: %s", out)
	}
}
