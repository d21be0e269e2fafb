package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// askedGitInitPrincipalsPolicy is askedGitInitPolicy over HTTP: alice and
// rita are its callers, and the quota of 2 a day it names is alice's.
const askedGitInitPrincipalsPolicy = `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)", "Bash"]
agent: "ask-tools": ["Bash(git init:*)"]
principals: {
	alice: {subject: "alice", surface: ["agent"]}
	rita:  {subject: "rita", surface: ["agent"]}
}
limits: %q: {who: principal: "alice", tool: "Bash", quota: "2/day"}
`

// httpHookBash posts a Bash command in wd to g's Claude Code hook as the
// caller of token: the decision, the command Claude Code runs, the reason.
func httpHookBash(t *testing.T, g *httpGW, token, wd, command string) (decision, updated, reason string) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": command}})
	status, _, body := g.post("/hooks/claude-code", token, string(in))
	var ans hookAnswer
	if status != 200 || json.Unmarshal([]byte(body), &ans) != nil {
		t.Fatalf("the HTTP hook on %q answered %d: %s", command, status, body)
	}
	updated, _ = ans.Out.Updated["command"].(string)
	return ans.Out.Decision, updated, ans.Out.Reason
}

// TestP19HTTPHookSpendsApprovedAsksUnderTheCaller: under mcp --listen's
// HTTP hook an asked Bash command alice's person approved is spent from
// alice's count, in the server's store, not as a caller with no identity
// in the user's state directory (probe V3). With --state redis:// the
// exec line names alice and the fleet's Redis, bound to the ticket (with
// rita's name it is refused): two approved git inits of alice's quota of 2
// run, Redis counts 2, the third is refused by the limit for alice, and
// alice's ls is denied while rita's is allowed; exec records the runs
// under alice. Without --state the server
// counts in its memory, which exec cannot reach: the asks are spent there,
// at the ask, so alice's third git init is denied, not asked, while the
// two approved run and rita's is asked.
func TestP19HTTPHookSpendsApprovedAsksUnderTheCaller(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	tokens := tokensFile(t, staticTokens)
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		addr, _ := startRedis(t)
		limit := fmt.Sprintf("alice-asked-bash-%d", time.Now().UnixNano())
		wd, _ := filepath.EvalSymlinks(t.TempDir())
		log := filepath.Join(t.TempDir(), "decisions.jsonl")
		g := startHTTP(t, http.DefaultClient, "--policy", moduleDir(t, fmt.Sprintf(askedGitInitPrincipalsPolicy, limit)), "--workdir", wd, "--tokens", tokens, "--state", "redis://"+addr, "--cache", "off", "--decision-log", log)
		approvedGitInits(t, wd, limit, func(i int, command string) string {
			d, updated, r := httpHookBash(t, g, "tok-alice", wd, command)
			if d != "ask" || !strings.Contains(updated, "'--state' 'redis://"+addr+"'") || !strings.Contains(updated, "'--caller' 'alice'") {
				t.Fatalf("alice's git init %d must be asked through exec with the server's store and her name: %s %q %q", i, d, updated, r)
			}
			return updated
		}, func(updated string) {
			forged := strings.Replace(updated, "'--caller' 'alice'", "'--caller' 'rita'", 1)
			c := exec.Command("bash", "-c", forged)
			c.Dir = wd
			if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "sealed with other protections") {
				t.Errorf("exec with another caller's name must refuse the ticket: %v\n%s", err, out)
			}
		})
		var runs, limited int
		for _, r := range readRecords(t, log) {
			switch {
			case r["phase"] == "running" && r["principal"] == "alice":
				runs++
			case r["phase"] == "running":
				t.Errorf("exec recorded alice's approved run under %v: %v", r["principal"], r)
			case r["rule"] == "P19" && r["principal"] == "alice":
				limited++
			}
		}
		if runs != 2 || limited != 1 {
			t.Errorf("exec recorded %d approved runs of alice's and %d refused by her limit, want 2 and 1", runs, limited)
		}
		if n := redisQuotaCount(t, addr); n != "2" {
			t.Errorf("Redis counts %q of alice's approved runs, want 2", n)
		}
		if d, _, r := httpHookBash(t, g, "tok-alice", wd, "ls"); d != "deny" || !strings.Contains(r, fmt.Sprintf("the limit %q", limit)) || !strings.Contains(r, "for alice") {
			t.Errorf("with alice's quota spent by her approved runs, her ls must be denied by the limit: %s %q", d, r)
		}
		if d, _, r := httpHookBash(t, g, "tok-rita", wd, "ls"); d != "allow" {
			t.Errorf("rita's ls, which alice's limit does not select, must be allowed: %s %q", d, r)
		}
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		limit := fmt.Sprintf("alice-asked-bash-%d", time.Now().UnixNano())
		wd, _ := filepath.EvalSymlinks(t.TempDir())
		g := startHTTP(t, http.DefaultClient, "--policy", moduleDir(t, fmt.Sprintf(askedGitInitPrincipalsPolicy, limit)), "--workdir", wd, "--tokens", tokens, "--cache", "off")
		for i := range 2 {
			d, updated, r := httpHookBash(t, g, "tok-alice", wd, fmt.Sprint("git init gi", i))
			if d != "ask" || !strings.Contains(updated, "'--limits-spent'") {
				t.Fatalf("alice's git init %d must be asked, spent at the ask: %s %q %q", i, d, updated, r)
			}
			c := exec.Command("bash", "-c", updated)
			c.Dir = wd
			if out, err := c.CombinedOutput(); err != nil {
				t.Fatalf("alice's approved git init %d of a quota of 2, spent at its ask, must run: %v\n%s", i, err, out)
			}
		}
		if d, _, r := httpHookBash(t, g, "tok-alice", wd, "git init gi2"); d != "deny" || !strings.Contains(r, fmt.Sprintf("the limit %q", limit)) || !strings.Contains(r, "for alice") {
			t.Errorf("alice's third git init on a quota of 2 must be denied at the ask by her limit: %s %q", d, r)
		}
		if d, _, r := httpHookBash(t, g, "tok-rita", wd, "git init r"); d != "ask" {
			t.Errorf("rita's git init, which alice's limit does not select, must be asked: %s %q", d, r)
		}
	})
}
