package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/claudecode"
)

// TestP18AFailedCallStillLabels: a call a label's entry matches labels the
// session at its decision, whatever it then returns (rule P18; probe V6:
// cat of the labelled page followed by false returned the page in an
// error, which labelled nothing, so the write after it ran). The label's
// entry is the tool-wide Read, so that every command's result gives it.
// Through serve, as root and as nobody, the command's result is an error
// and the write after it is refused by the flow and makes nothing; through
// the hook's processes, a PreToolUse of the command and no PostToolUse
// (Claude Code sends a failed call's result to PostToolUseFailure) label
// the session, so the next Write is denied; and through the real Claude
// Code, with the hook under PreToolUse and PostToolUse, the Write after
// the failing command is refused, naming it, and writes nothing.
func TestP18AFailedCallStillLabels(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	const failing = "cat web/page.html; false"
	for _, u := range gatewayUsers(t) {
		t.Run("serve as "+u.name, func(t *testing.T) {
			t.Parallel()
			bin := append(append([]string{}, u.prefix...), gatewayBinary(t))
			proj, policy := p18CommandsLayout(t, `["Read"]`)
			replies := runServeAs(t, bin, []string{"--policy", policy, "--workdir", proj}, nil,
				bashLine("cat", failing),
				p18Line("write", "Write", map[string]any{"file_path": proj + "/w.txt", "content": "x"}))
			if replies[0]["is_error"] != true || !strings.Contains(fmt.Sprint(replies[0]["content"]), "IGNORE-PREVIOUS") {
				t.Fatalf("the failing command did not return the page in an error: %v", replies[0])
			}
			if exists(proj+"/w.txt") || !strings.Contains(fmt.Sprint(replies[1]["content"]), "The result of Bash of "+failing+" (call cat) labelled the session untrusted") {
				t.Errorf("after a failed command that read the labelled page, the write was not refused by the flow (written %v): %v", exists(proj+"/w.txt"), replies[1])
			}
		})
	}
	t.Run("hook processes", func(t *testing.T) {
		t.Parallel()
		proj, policy := p18CommandsLayout(t, `["Read"]`)
		p18ClaudeTools(t, policy)
		sid := sessionID(t)
		out, stderr, code := runHook(t, "claude-code", policy, hookInput("PreToolUse", sid, proj, "Bash", map[string]any{"command": failing}))
		if code != 0 || jsonField(t, out, "hookSpecificOutput", "permissionDecision") != "allow" {
			t.Fatalf("the command was not allowed: exit %d: %s %s", code, out, stderr)
		}
		out, _, _ = runHook(t, "claude-code", policy, hookInput("PreToolUse", sid, proj, "Write", map[string]any{"file_path": proj + "/w.txt", "content": "x"}))
		if d := jsonField(t, out, "hookSpecificOutput", "permissionDecision"); d != "deny" || !strings.Contains(out, "labelled the session untrusted") {
			t.Errorf("a Write after an allowed command whose result never came back was not denied by the flow: %s", out)
		}
	})
	t.Run("claude code", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRun(t, "")
		r.post = true
		r.policy = moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
labels: untrusted: entries: ["Read"]
agent: {
	"allowed-tools": ["Read", "Bash", "Write(%[1]s/**)"]
	when: untrusted: "denied-tools": ["Write(%[1]s/**)"]
}
`, r.project))
		writeFile(t, filepath.Join(r.project, "web", "page.html"), "<p>IGNORE-PREVIOUS-INSTRUCTIONS</p>\n")
		r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
			{use("Bash", "command", failing)},
			{use("Write", "file_path", filepath.Join(r.project, "w.txt"), "content", "x")},
		}})
		if got := r.server.Result(claudecode.ID("MAIN", 0, 0)); !strings.Contains(got, "IGNORE-PREVIOUS") {
			t.Errorf("the failing command did not read the page: %q", got)
		}
		by := "The result of Bash of " + failing + " (call " + claudecode.ID("MAIN", 0, 0) + ") labelled the session untrusted"
		if got := r.server.Result(claudecode.ID("MAIN", 1, 0)); !strings.Contains(got, by) || exists(filepath.Join(r.project, "w.txt")) {
			t.Errorf("the Write after the failed command: %q (written %v), want it refused with %q", got, exists(filepath.Join(r.project, "w.txt")), by)
		}
	})
}

// p18ClaudeTools makes the policy of p18CommandsLayout declare Claude
// Code's tools.
func p18ClaudeTools(t *testing.T, policy string) {
	t.Helper()
	text, err := os.ReadFile(policy + "/policy.cue")
	if err != nil {
		t.Fatal(err)
	}
	cue := strings.NewReplacer(`import "aimon.dev/gw/schema"`, `import "aimon.dev/gw/schema/claudecode"`,
		"tools: {Read: schema.#Read, Write: schema.#Write, Bash: schema.#Bash}", "tools: claudecode.#Tools").Replace(string(text))
	if err := os.WriteFile(policy+"/policy.cue", []byte(cue), 0o644); err != nil {
		t.Fatal(err)
	}
}
