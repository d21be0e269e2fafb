package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHookExitContract: through the binary, allow, deny and ask exit 0 with
// the decision on standard output; a broken policy or input exits 2 with
// one sentence on standard error, which Claude Code takes as a block. It
// never exits 1, which Claude Code would take as a non-blocking error and
// run the tool (issue 14).
func TestHookExitContract(t *testing.T) {
	t.Parallel()
	policyDir, _ := filepath.Abs("../../examples/policies/claude-code")
	cwd := t.TempDir()
	broken := moduleDir(t, "package policy\n\nagent: allowedTools: []\n")
	tests := []struct {
		note, policy, input string
		exit                int
		decision, stderr    string
	}{
		{"allow", policyDir, `{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"session_id":"s"}`, 0, "allow", ""},
		{"deny", policyDir, `{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"curl x | sh"}}`, 0, "deny", ""},
		{"ask", policyDir, `{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"mcp__slack__post","tool_input":{}}`, 0, "ask", ""},
		{"broken policy", broken, `{"cwd":"` + cwd + `","tool_name":"Bash","tool_input":{"command":"git status"}}`, 2, "", "does not load, so the call is blocked"},
		{"broken input", policyDir, `{"tool_name":`, 2, "", "the call is blocked"},
		{"no cwd of its own", policyDir, `{"cwd":"relative/dir","tool_name":"Read","tool_input":{"file_path":"/etc/passwd"}}`, 2, "", "not an absolute directory"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", tc.policy)
			cmd.Stdin = strings.NewReader(tc.input)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, _ := cmd.Output()
			if code := cmd.ProcessState.ExitCode(); code != tc.exit {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.exit, stderr.String())
			}
			if tc.exit != 0 {
				if len(out) != 0 || !strings.Contains(stderr.String(), tc.stderr) || strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 && !strings.Contains(tc.note, "policy") {
					t.Errorf("stdout %q, stderr %q", out, stderr.String())
				}
				return
			}
			var o struct {
				HookSpecificOutput struct {
					HookEventName, PermissionDecision, PermissionDecisionReason string
				} `json:"hookSpecificOutput"`
			}
			if err := json.Unmarshal(out, &o); err != nil || o.HookSpecificOutput.HookEventName != "PreToolUse" ||
				o.HookSpecificOutput.PermissionDecision != tc.decision || o.HookSpecificOutput.PermissionDecisionReason == "" {
				t.Errorf("output %s: %v", out, err)
			}
		})
	}
}

// TestLoadCollectorResumesAsItWas: serve's and mcp's first load runs with
// GOGC at loadGCPercent, and its resume puts back what it found; a GOGC
// the operator set is left alone.
func TestLoadCollectorResumesAsItWas(t *testing.T) {
	percent := debug.SetGCPercent(73)
	defer debug.SetGCPercent(percent)
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	resume := loadGC()
	if p := debug.SetGCPercent(loadGCPercent); p != loadGCPercent {
		t.Errorf("loading: GOGC %d; want %d", p, loadGCPercent)
	}
	resume()
	if p := debug.SetGCPercent(73); p != 73 {
		t.Errorf("loaded: GOGC %d; want 73 as it was", p)
	}
	t.Setenv("GOGC", "73")
	resume = loadGC()
	if p := debug.SetGCPercent(73); p != 73 {
		t.Errorf("loading under the operator's GOGC=73: GOGC %d; want 73", p)
	}
	resume()
}

// TestHookCollectorResumesAsItWas: the hook's pause holds the collector
// off within a bound of memory, and its resume (called before a fresh
// load) puts back the settings it found, GOGC and GOMEMLIMIT alike.
func TestHookCollectorResumesAsItWas(t *testing.T) {
	percent, limit := debug.SetGCPercent(73), debug.SetMemoryLimit(1<<40)
	defer func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) }()
	resume := pauseGC()
	if p, l := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1); p != -1 || l != hookHeap {
		t.Errorf("paused: GOGC %d, memory limit %d; want off, within %d", p, l, hookHeap)
	}
	resume()
	if p, l := debug.SetGCPercent(73), debug.SetMemoryLimit(-1); p != 73 || l != 1<<40 {
		t.Errorf("resumed: GOGC %d, memory limit %d; want 73 and %d as they were", p, l, int64(1<<40))
	}
}
