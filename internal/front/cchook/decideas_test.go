package cchook

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/runtime/gateway"
)

// TestR9AnswerProtectsItsRuntimesFiles: the answer of another
// runtime's hook (Answer, which Codex's and Gemini CLI's hooks decide
// through, once) refuses a Write of that runtime's project configuration,
// in its project and in its cwd when CLAUDE_PROJECT_DIR names another, and
// of Claude Code's as well; a runtime the gateway does not know is refused
// as a whole, not decided with nothing protected.
func TestR9AnswerProtectsItsRuntimesFiles(t *testing.T) {
	project, cwd := t.TempDir(), t.TempDir()
	gen := loadSource(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Write(/**)"]
`, cwd)
	write := func(runtime, path string) Specific {
		t.Helper()
		input, _ := json.Marshal(map[string]string{"file_path": path, "content": "x"})
		in := Input{SessionID: "s", Cwd: cwd, Project: project, HookEventName: "PreToolUse", ToolName: "Write", ToolInput: input, ToolUseID: "t"}
		return Answer(runtime, gen, in, gateway.Options{Logger: slog.New(slog.DiscardHandler)}, nil).HookSpecificOutput
	}
	if d := write("codex", filepath.Join(cwd, "free.txt")); d.PermissionDecision != "allow" {
		t.Fatalf("a Write the list allows: %+v", d)
	}
	for _, path := range []string{
		filepath.Join(project, ".codex", "config.toml"),
		filepath.Join(cwd, ".codex", "config.toml"),
		filepath.Join(project, ".claude", "settings.json"),
	} {
		if d := write("codex", path); d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "(rule R9)") {
			t.Errorf("a Write of %s under Codex's hook: %+v", path, d)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s was written", path)
		}
	}
	if d := write("gemini-cli", filepath.Join(cwd, ".gemini", "settings.json")); d.PermissionDecision != "deny" {
		t.Errorf("a Write of the cwd's .gemini under Gemini CLI's hook: %+v", d)
	}
	if d := write("cursor", filepath.Join(cwd, "free.txt")); d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "cannot be protected") {
		t.Errorf("an unknown runtime: %+v", d)
	}
}
