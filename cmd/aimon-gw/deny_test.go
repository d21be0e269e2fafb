package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestP14CheckNamesTheDecidingEntry: check shows the deny or ask entry that
// decided, with its position, and an ask as such.
func TestP14CheckNamesTheDecidingEntry(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
agent: "allowed-tools": ["Bash(git:*)"]
agent: "ask-tools": ["Bash(git push:*)"]
skills: safe: "denied-tools": ["Bash(git push:*)"]
`)
	for _, tc := range []struct {
		note, surface, command string
		ask                    bool
		at                     string
	}{
		{"an ask", "agent", "git push", true, "policy.cue:7:22"},
		{"a child's deny beats its caller's ask", "skill:safe", "git push", false, "policy.cue:8:32"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			call := fmt.Sprintf(`{"type":"tool_use","id":"1","name":"Bash","input":{"command":%q}}`, tc.command)
			out, _ := exec.Command(gatewayBinary(t), "check", "--policy", dir, "--surface", tc.surface, call).Output()
			var d struct {
				Allowed bool     `json:"allowed"`
				Ask     bool     `json:"ask"`
				Rule    string   `json:"rule"`
				Entries []string `json:"entries"`
				At      []string `json:"entry_at"`
			}
			if err := json.Unmarshal(out, &d); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if d.Allowed || d.Ask != tc.ask || d.Rule != "P14" || len(d.At) != 1 || !strings.HasSuffix(d.At[0], tc.at) {
				t.Errorf("check = %s, want ask=%v by P14 at %s", out, tc.ask, tc.at)
			}
		})
	}
}

// TestP14QuotingHidesNoDeniedCommand: deny and ask entries read a command
// as the shell will, so quotes, backslashes and expansions that the shell
// removes before the command runs hide no denied or asked command; where
// an expansion could make a word of the entry, the entry cannot tell and
// decides (rules P3, P14). Nor do assignments, wrappers (env, timeout…),
// a shell's -c string or options before the subcommand. Commands whose
// words do not meet the entry stay allowed.
func TestP14QuotingHidesNoDeniedCommand(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
agent: "allowed-tools": ["Bash(git:*)", "Bash(ls:*)", "Bash(env:*)", "Bash(sh:*)", "Bash(timeout:*)"]
agent: "denied-tools": ["Bash(git push:*)", "Bash(git reset --hard)"]
agent: "ask-tools": ["Bash(git commit:*)"]
`)
	cases := []struct {
		note, command string
		verdict       string // allow, ask or deny
	}{
		{"single quotes", "git 'push'", "deny"},
		{"double quotes", `git "push" origin`, "deny"},
		{"an empty quote glued on", "git ''push", "deny"},
		{"a backslash", `git p\ush`, "deny"},
		{"a quoted word of an exact entry", `git reset '--hard'`, "deny"},
		{"a brace expansion", "git {push,x}", "deny"},
		{"a glob that a file named push would expand", "git pus?", "deny"},
		{"an unterminated quote", "git 'push", "deny"},
		{"an asked command in quotes", `git "commit" -m x`, "ask"},
		{"the plain denied command", "git push", "deny"},
		{"quotes in another word", "git log --format='%h push'", "allow"},
		{"a glob after the entry's words differ", "ls *.go", "allow"},
		{"a word push after the subcommand: the safe direction", "git status 'push'", "deny"},
		{"an option before the subcommand", "git -C . push", "deny"},
		{"a long option before the subcommand", "git --no-pager push origin", "deny"},
		{"env", "env git push", "deny"},
		{"env with an assignment", "env FOO=1 git push", "deny"},
		{"timeout with a duration", "timeout 5 git push", "deny"},
		{"sh -c", "sh -c 'git push'", "deny"},
		{"env and sh -c and an option", `env sh -c "git -C . push"`, "deny"},
		{"an exact entry through env", "env git reset --hard", "deny"},
		{"an asked command through env", "env git commit -m x", "ask"},
		{"env running another command", "env git status", "allow"},
		{"sh -c running another command", "sh -c 'git status'", "allow"},
		{"a glob that cannot be the subcommand", "git add *.go", "allow"},
		{"the exact entry with another word after it", "git reset --hard 'HEAD'", "allow"},
	}
	// One check reads all the calls, a line each: one load of the policy.
	var calls []string
	for i, tc := range cases {
		calls = append(calls, fmt.Sprintf(`{"type":"tool_use","id":"%d","name":"Bash","input":{"command":%q}}`, i, tc.command))
	}
	verdicts := checkLines(t, calls, "--policy", dir)
	for i, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			var d struct {
				Allowed, Ask bool
			}
			if err := json.Unmarshal([]byte(verdicts[i]), &d); err != nil {
				t.Fatalf("%v: %s", err, verdicts[i])
			}
			got := map[[2]bool]string{{true, false}: "allow", {false, true}: "ask", {false, false}: "deny"}[[2]bool{d.Allowed, d.Ask}]
			if got != tc.verdict {
				t.Errorf("%s: %s, want %s: %s", tc.command, got, tc.verdict, verdicts[i])
			}
		})
	}
}

// TestP14ShellBuiltinsRunNoDeniedCommand: end to end through serve, the
// shell's own ways of running a command (eval, builtin, !, coproc, a
// trap's action, compgen -C, jobs -x) do not run what a deny entry
// denies: each call is refused and nothing it names is written; eval of
// another command still runs.
func TestP14ShellBuiltinsRunNoDeniedCommand(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
agent: "allowed-tools": ["Bash"]
agent: "denied-tools": ["Bash(touch:*)"]
`)
	commands := []struct{ note, command string }{
		{"eval", "eval touch eval"},
		{"eval of a quoted string", "eval 'touch evalq'"},
		{"builtin", "builtin command touch builtin"},
		{"!", "! touch not"},
		{"coproc", "coproc touch coproc"},
		{"a trap's action", `trap "touch trap" EXIT`},
		{"compgen -C", "compgen -C 'touch compgen' x"},
		{"jobs -x", "jobs -x touch jobs"},
	}
	lines := []string{bashLine("control", "eval echo ran")}
	for _, c := range commands {
		lines = append(lines, bashLine(c.note, c.command))
	}
	replies := runServe(t, []string{"--policy", dir, "--workdir", work}, nil, lines...)
	if r := replies[0]; r["is_error"] != false || !strings.Contains(fmt.Sprint(r["content"]), "ran") {
		t.Fatalf("eval of an allowed command did not run: %v", r)
	}
	for i, c := range commands {
		r := replies[i+1]
		if r["is_error"] != true || !strings.Contains(fmt.Sprint(r["content"]), "denied on this surface by Bash(touch:*)") {
			t.Errorf("%s: %s was not refused by the deny entry: %v", c.note, c.command, r)
		}
	}
	entries, _ := os.ReadDir(work)
	for _, e := range entries {
		t.Errorf("a denied touch ran: %s", filepath.Join(work, e.Name()))
	}
}

// checkLines runs check with args on calls, one a line on its standard
// input, and returns its verdicts, one per call: a policy loaded once for
// all the calls.
func checkLines(t *testing.T, calls []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), append(append([]string{"check"}, args...), "-")...)
	cmd.Stdin = strings.NewReader(strings.Join(calls, "\n") + "\n")
	out, _ := cmd.Output()
	verdicts := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(verdicts) != len(calls) {
		t.Fatalf("check: %d verdicts for %d calls:\n%s", len(verdicts), len(calls), out)
	}
	return verdicts
}
