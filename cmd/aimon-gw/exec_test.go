package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR8HookRunsBashThroughExec is a runner that does what Claude Code does
// with the hook's answer: it applies updatedInput and runs the command with
// bash -c. An allowed command then runs through aimon-gw exec, in the
// sandbox the policy derives: git's alias, git's --output and find's -exec
// write nothing outside what the surface may write, while a write inside
// works; a command changed after the hook decided is decided again by exec
// and refused (issue 28).
func TestR8HookRunsBashThroughExec(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	bin := gatewayBinary(t)
	project, _ := filepath.EvalSymlinks(t.TempDir())
	outside, _ := filepath.EvalSymlinks(t.TempDir())
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)", "Bash(git:*)", "Bash(find:*)", "Bash(echo:*)"]
agent: "ask-tools": ["Bash(git push:*)"]
`)
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	hook := func(command string) (decision string, updated string) {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"cwd": project, "hook_event_name": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": command, "description": "d"}})
		h := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
		h.Stdin = strings.NewReader(string(in))
		out, err := h.Output()
		if err != nil {
			t.Fatalf("hook on %q: %v", command, err)
		}
		var ans struct {
			Out struct {
				Decision string         `json:"permissionDecision"`
				Updated  map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		json.Unmarshal(out, &ans)
		if ans.Out.Decision != "deny" && ans.Out.Updated["description"] != "d" {
			t.Errorf("updatedInput must keep the call's other fields: %s", out)
		}
		c, _ := ans.Out.Updated["command"].(string)
		return ans.Out.Decision, c
	}
	run := func(command string) (string, error) {
		c := exec.Command("bash", "-c", command)
		c.Dir = project
		out, err := c.CombinedOutput()
		return string(out), err
	}
	for _, tc := range []struct{ note, command, plants string }{
		{"git's alias runs a program", "git -c alias.x='!touch " + outside + "/alias' x", "alias"},
		{"git diff writes where --output says", "git diff --no-index --output=" + outside + "/output /dev/null /etc/hostname", "output"},
		{"find runs a program with -exec", "find . -maxdepth 0 -exec touch " + outside + "/find +", "find"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			decision, updated := hook(tc.command)
			if decision != "allow" || !strings.Contains(updated, " 'exec' ") {
				t.Fatalf("the hook must allow %q through exec, got %s %q", tc.command, decision, updated)
			}
			out, _ := run(updated)
			if _, err := os.Stat(filepath.Join(outside, tc.plants)); err == nil {
				t.Errorf("%q wrote outside the writable set through exec:\n%s", tc.command, out)
			}
		})
	}
	// A write inside the project, which Write(./**) allows, works; the
	// command arrives whole, quotes and all.
	decision, updated := hook(`echo "it's here" > inside.txt`)
	if decision == "allow" {
		t.Errorf("a redirection must not pass Bash(echo:*): %q", updated)
	}
	decision, updated = hook(`git -c alias.y='!touch "it'"'"'s here"' y`)
	if out, err := run(updated); decision != "allow" || err != nil {
		t.Fatalf("a write inside: %s %v\n%s", decision, err, out)
	}
	if _, err := os.Stat(filepath.Join(project, "it's here")); err != nil {
		t.Errorf("the write inside, quotes and all: %v", err)
	}
	// An ask is answered with the command wrapped as approved: Claude Code
	// runs it only once the person has said yes.
	if decision, updated = hook("git push origin main"); decision != "ask" || !strings.Contains(updated, "'--approved'") {
		t.Errorf("an ask: %s %q", decision, updated)
	}
	// A command changed on its way is refused, exit 126: its ticket was
	// sealed for the one decided.
	_, updated = hook("git status")
	changed := strings.Replace(updated, "'git status'", "'touch "+outside+"/direct'", 1)
	c := exec.Command("bash", "-c", changed)
	out, err := c.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitNotRun || !strings.Contains(string(out), "another command") {
		t.Errorf("exec of a command changed after the hook: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(outside, "direct")); err == nil {
		t.Error("exec ran a refused command")
	}
}

// TestR8HookCacheOfItsOwnIsProtectedInExec: a hook given a load cache of
// its own (--cache DIR, here inside the project the surface may write)
// hands Bash to exec with that directory, and exec's sandbox keeps it
// read-only as it does the default one: a command can neither plant a
// record in it nor create it first, while it writes beside it.
func TestR8HookCacheOfItsOwnIsProtectedInExec(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	bin := gatewayBinary(t)
	project, _ := filepath.EvalSymlinks(t.TempDir())
	dir := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\nagent: \"allowed-tools\": [\"Write(./**)\", \"Bash(git:*)\"]\n")
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	// through asks the hook about a git alias that runs program, and runs
	// what the hook hands back, as Claude Code would.
	through := func(cache, program string) string {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"cwd": project, "hook_event_name": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "git -c alias.x='!" + program + "' x"}})
		h := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", cache)
		h.Stdin = strings.NewReader(string(in))
		out, err := h.Output()
		if err != nil {
			t.Fatalf("hook: %v", err)
		}
		var ans struct {
			Out struct {
				Updated map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		json.Unmarshal(out, &ans)
		wrapped, _ := ans.Out.Updated["command"].(string)
		if !strings.Contains(wrapped, "'--cache' '"+cache+"'") {
			t.Fatalf("the hook does not hand exec its cache: %s", out)
		}
		c := exec.Command("bash", "-c", wrapped)
		c.Dir = project
		run, _ := c.CombinedOutput()
		return string(run)
	}
	for _, tc := range []struct{ note, cache string }{
		{note: "the cache exists", cache: filepath.Join(project, "cache")},
		{note: "the cache is not made yet", cache: filepath.Join(project, "later", "cache")},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if !strings.Contains(tc.note, "not") {
				os.MkdirAll(tc.cache, 0o700)
			}
			out := through(tc.cache, "mkdir -p "+tc.cache)
			out += through(tc.cache, "touch "+tc.cache+"/forged.json")
			beside := filepath.Join(filepath.Dir(tc.cache), "beside")
			out += through(tc.cache, "touch "+beside)
			if _, err := os.Stat(tc.cache + "/forged.json"); err == nil {
				t.Errorf("a command planted a record in the hook's cache:\n%s", out)
			}
			if _, err := os.Stat(beside); err != nil {
				t.Errorf("a command could not write beside the cache:\n%s", out)
			}
		})
	}
}
