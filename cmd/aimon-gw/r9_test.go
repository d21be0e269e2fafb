package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR9HookRefusesClaudeCodesFiles: under a policy that lets Write, Edit,
// MultiEdit and NotebookEdit write anywhere, the hook refuses each of
// them on every file that makes Claude Code call it — user, project and
// local settings, hook scripts, ~/.claude.json, .mcp.json, CLAUDE_CONFIG_DIR
// — by its name, a .. spelling and a link; a command the hook wraps cannot
// write them in its sandbox; a file beside them is written (rule R9).
func TestR9HookRefusesClaudeCodesFiles(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	bin := gatewayBinary(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	home, project, config := root+"/home", root+"/proj", root+"/config"
	for _, d := range []string{home + "/.claude/hooks", project + "/.claude/hooks", project + "/sub", config} {
		os.MkdirAll(d, 0o755)
	}
	writeFile(t, project+"/.claude/settings.json", `{"hooks":{}}`)
	os.Symlink(project+"/.claude", project+"/lnk")
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Write", "Edit", "MultiEdit", "NotebookEdit", "Bash(cp:*)"]
subagents: cp: "allowed-tools": ["Write(./**)", "Write(~/**)", "Bash(cp:*)"]
`)
	env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+project, "CLAUDE_CONFIG_DIR="+config)
	cwd, agent := project+"/sub", ""
	hook := func(tool string, input map[string]any) (string, string, map[string]any) {
		t.Helper()
		ans := claudeHook(t, bin, policy, env, map[string]any{"cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "agent_type": agent})
		return ans.Out.Decision, ans.Out.Reason, ans.Out.Updated
	}
	for _, path := range []string{
		project + "/.claude/settings.json", project + "/.claude/settings.local.json", project + "/.claude/hooks/gate.sh",
		project + "/sub/../.claude/settings.local.json", project + "/lnk/settings.local.json", project + "/.mcp.json",
		home + "/.claude/settings.json", home + "/.claude/hooks/gate.sh", home + "/.claude.json",
		config + "/settings.json", "/etc/claude-code/managed-settings.json",
	} {
		for tool, input := range map[string]map[string]any{
			"Write":        {"file_path": path, "content": "{}"},
			"Edit":         {"file_path": path, "old_string": "hooks", "new_string": "x"},
			"MultiEdit":    {"file_path": path, "edits": []any{map[string]any{"old_string": "hooks", "new_string": "x"}}},
			"NotebookEdit": {"notebook_path": path, "new_source": "x"},
		} {
			if decision, reason, _ := hook(tool, input); decision != "deny" || !strings.Contains(reason, "rule R9") || !strings.Contains(reason, "Claude Code's") {
				t.Errorf("%s of %s: %s %q", tool, path, decision, reason)
			}
		}
	}
	if decision, reason, _ := hook("Write", map[string]any{"file_path": project + "/notes.json", "content": "{}"}); decision != "allow" {
		t.Errorf("a Write beside them: %s %q", decision, reason)
	}
	// In the sandbox of a surface that may write the project and the
	// home, the same files are read-only.
	cwd, agent = project, "cp"
	writeFile(t, project+"/off.json", `{"disableAllHooks": true}`)
	writeFile(t, home+"/.claude.json", `{}`)
	writeFile(t, project+"/.mcp.json", `{}`)
	for _, target := range []string{project + "/.claude/settings.local.json", home + "/.claude.json", project + "/.claude/settings.json", home + "/.claude/settings.json", config + "/settings.json", project + "/.mcp.json"} {
		decision, reason, updated := hook("Bash", map[string]any{"command": "cp off.json " + target})
		cmd, _ := updated["command"].(string)
		if decision != "allow" || !strings.Contains(cmd, "'--runtime' 'claude-code'") {
			t.Fatalf("cp: %s %q %q", decision, reason, cmd)
		}
		c := exec.Command("bash", "-c", cmd)
		c.Dir, c.Env = project, env
		out, _ := c.CombinedOutput()
		if b, _ := os.ReadFile(target); strings.Contains(string(b), "disableAllHooks") {
			t.Errorf("a command wrote %s in its sandbox:\n%s", target, out)
		}
	}
}

// TestR9ExecRefusesAnUnknownRuntime: exec told to protect the files of a
// runtime it does not know runs nothing, and says which it knows.
func TestR9ExecRefusesAnUnknownRuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := exec.Command(gatewayBinary(t), "exec", "--runtime", "claud-code", "--workdir", dir, "--", "touch ran")
	out, err := c.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "claude-code") {
		t.Errorf("exec with an unknown runtime: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("exec ran the command")
	}
}

// TestR9AMissingClaudeConfigDirIsMadeFirst: a CLAUDE_CONFIG_DIR that does
// not exist yet, in a home the surface's commands may write, is made
// (empty, read-only in the sandbox) before the hook's command runs, so a
// command cannot make it first with a settings file that switches the
// hooks off; the command's other copy into the home lands (rule R9; the
// hostile probe's F8).
func TestR9AMissingClaudeConfigDirIsMadeFirst(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	bin := gatewayBinary(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	home, project := root+"/home", root+"/proj"
	config := home + "/claude-config"
	for _, d := range []string{home, project + "/off"} {
		os.MkdirAll(d, 0o755)
	}
	writeFile(t, project+"/off/settings.json", `{"disableAllHooks": true}`)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Write(./**)", "Write(~/**)", "Bash(cp:*)"]
`)
	env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+project, "CLAUDE_CONFIG_DIR="+config)
	for _, target := range []string{config, home + "/other"} {
		ans := claudeHook(t, bin, policy, env, map[string]any{"cwd": project, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "cp -r off " + target}})
		cmd, _ := ans.Out.Updated["command"].(string)
		if ans.Out.Decision != "allow" || cmd == "" {
			t.Fatalf("cp -r off %s: %s %q", target, ans.Out.Decision, ans.Out.Reason)
		}
		c := exec.Command("bash", "-c", cmd)
		c.Dir, c.Env = project, env
		run, _ := c.CombinedOutput()
		_, err := os.Stat(filepath.Join(target, "settings.json"))
		switch {
		case target == config && err == nil:
			t.Errorf("a command made the user configuration %s first, with settings that switch the hooks off:\n%s", config, run)
		case target != config && err != nil:
			t.Errorf("the command's copy beside it did not land (%v), so the test shows nothing:\n%s", err, run)
		}
	}
}

// claudeHook runs hook claude-code --cache off under policy on the input.
func claudeHook(t *testing.T, bin, policy string, env []string, input map[string]any) hookAnswer {
	t.Helper()
	in, _ := json.Marshal(input)
	h := exec.Command(bin, "hook", "claude-code", "--policy", policy, "--cache", "off")
	h.Stdin, h.Env = strings.NewReader(string(in)), env
	out, err := h.Output()
	if err != nil {
		t.Fatalf("hook: %v", err)
	}
	var ans hookAnswer
	json.Unmarshal(out, &ans)
	return ans
}
