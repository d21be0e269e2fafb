package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// r8Records is the decision log's records by subject.
func r8Records(t *testing.T, log string) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if r["phase"] == "result" {
			continue
		}
		out[r["subject"].(string)] = r
	}
	return out
}

// TestR8HookRefusesClaudeCodesWritesToTheGateway: Claude Code performs its
// own Write and Edit, which the hook only decides; under a policy that
// allows Write(/**), the hook denied nothing, so the agent could rewrite
// the policy, add a .cue file to it, or rewrite the decision log or the
// hook's cache (rule R8). Now they are denied, by their name, through a
// link or "..", and recorded so; writes elsewhere are still allowed.
func TestR8HookRefusesClaudeCodesWritesToTheGateway(t *testing.T) {
	t.Parallel()
	bin, home := gatewayBinary(t), t.TempDir()
	cwd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\n"+
		"agent: \"allowed-tools\": [\"Read\", \"Write(/**)\", \"Edit(/**)\", \"MultiEdit(/**)\", \"NotebookEdit(/**)\"]\n")
	policy, _ = filepath.EvalSymlinks(policy)
	if filepath.Dir(policy) != filepath.Dir(cwd) {
		t.Fatalf("the case through .. needs %s and %s in one directory", policy, cwd)
	}
	logDir, cache := t.TempDir(), filepath.Join(home, "cache")
	log := filepath.Join(logDir, "decisions.jsonl")
	os.Symlink(policy, filepath.Join(cwd, "gw"))
	tests := []struct {
		note, tool, path, decision, why string
	}{
		{note: "a file in a temp dir", tool: "Write", path: filepath.Join(cwd, "notes.txt"), decision: "allow"},
		{note: "a relative file", tool: "Edit", path: "notes.txt", decision: "allow"},
		{note: "the policy file", tool: "Write", path: filepath.Join(policy, "policy.cue"), decision: "deny", why: "is a file the policy is loaded from"},
		{note: "a new .cue file in the policy", tool: "Write", path: filepath.Join(policy, "open.cue"), decision: "deny", why: "the policy's directory"},
		{note: "the pins", tool: "MultiEdit", path: filepath.Join(policy, "pins.cue"), decision: "deny", why: "the policy's directory"},
		{note: "through a link in the working directory", tool: "Write", path: "gw/open.cue", decision: "deny", why: "leads through a symbolic link to " + filepath.Join(policy, "open.cue")},
		{note: "through ..", tool: "Edit", path: cwd + "/../" + filepath.Base(policy) + "/policy.cue", decision: "deny", why: "is a file the policy is loaded from"},
		{note: "the decision log", tool: "Write", path: log, decision: "deny", why: "the gateway's decision log"},
		{note: "the hook's cache", tool: "Write", path: filepath.Join(cache, "forged.json"), decision: "deny", why: "cache of compiled policies"},
		{note: "a notebook in the policy", tool: "NotebookEdit", path: filepath.Join(policy, "n.ipynb"), decision: "deny", why: "the policy's directory"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			field := "file_path"
			if tc.tool == "NotebookEdit" {
				field = "notebook_path"
			}
			in, _ := json.Marshal(map[string]any{"cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": tc.tool,
				"tool_input": map[string]any{field: tc.path, "content": "agent: {}"}})
			cmd := exec.Command(bin, "hook", "claude-code", "--policy", policy, "--decision-log", log, "--cache", cache)
			cmd.Dir, cmd.Stdin = cwd, strings.NewReader(string(in))
			cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CACHE_HOME="+home+"/.cache")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			var o struct {
				HookSpecificOutput struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
			}
			if err != nil || json.Unmarshal(out, &o) != nil {
				t.Fatalf("the hook failed: %v %s %s", err, out, stderr.String())
			}
			d := o.HookSpecificOutput
			if d.PermissionDecision != tc.decision || !strings.Contains(d.PermissionDecisionReason, tc.why) {
				t.Fatalf("%s %s: %s %q; want %s with %q", tc.tool, tc.path, d.PermissionDecision, d.PermissionDecisionReason, tc.decision, tc.why)
			}
			if tc.decision == "deny" && !strings.Contains(d.PermissionDecisionReason, "(rule R8)") {
				t.Errorf("the denial does not name rule R8: %q", d.PermissionDecisionReason)
			}
		})
	}
	recs := r8Records(t, log)
	if r := recs[filepath.Join(policy, "open.cue")]; r == nil || r["rule"] != "R8" || r["allowed"] != false {
		t.Errorf("the decision log's record of the new .cue file: %v", r)
	}
	if r := recs[filepath.Join(cwd, "notes.txt")]; r == nil || r["allowed"] != true {
		t.Errorf("the decision log's record of the allowed write: %v", r)
	}
}

// TestR8ServeDecidesBuiltinWritesToTheGateway: serve's built-in Write,
// under Write(/**), is refused by the decision (not only by the tool when
// it runs) for the policy, and the decision log says R8; a write in the
// working directory is made.
func TestR8ServeDecidesBuiltinWritesToTheGateway(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	work, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Read: schema.#Read, Write: schema.#Write}\n"+
		"agent: \"allowed-tools\": [\"Read\", \"Write(/**)\"]\n")
	policy, _ = filepath.EvalSymlinks(policy)
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	replies := runServe(t, []string{"--policy", policy, "--workdir", work, "--decision-log", log},
		[]string{"HOME=" + home, "XDG_CACHE_HOME=" + home + "/.cache"},
		toolLine("new", "Write", map[string]any{"file_path": filepath.Join(policy, "open.cue"), "content": "agent: {}"}),
		toolLine("log", "Write", map[string]any{"file_path": log, "content": "{}"}),
		toolLine("mine", "Write", map[string]any{"file_path": "notes.txt", "content": "x"}))
	for i, why := range []string{"the policy's directory", "the gateway's decision log"} {
		if replies[i]["is_error"] != true || !strings.Contains(text(replies[i]), why) || !strings.Contains(text(replies[i]), "(rule R8)") {
			t.Errorf("reply %d: %v; want a refusal naming %q and rule R8", i, replies[i], why)
		}
	}
	if replies[2]["is_error"] != false {
		t.Errorf("a write in the working directory: %v", replies[2])
	}
	if _, err := os.Stat(filepath.Join(policy, "open.cue")); err == nil {
		t.Error("Write added a file to the policy")
	}
	if r := r8Records(t, log)[filepath.Join(policy, "open.cue")]; r == nil || r["rule"] != "R8" || r["allowed"] != false {
		t.Errorf("the decision log's record: %v", r)
	}
}
