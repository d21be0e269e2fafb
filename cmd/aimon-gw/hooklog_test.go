package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR8HookDecisionLogIsReadOnlyInExec: the hook run with --decision-log
// FILE, FILE in the project that Write(./**) lets commands write, hands
// Bash to aimon-gw exec, whose sandbox did not know the log: an allowed
// command replaced or removed the record of what was decided (rule R8).
// The hook now hands the log on (exec --protect) and exec protects it.
func TestR8HookDecisionLogIsReadOnlyInExec(t *testing.T) {
	needBwrap(t)
	t.Parallel()
	home, bin := t.TempDir(), gatewayBinary(t)
	project, _ := filepath.EvalSymlinks(t.TempDir())
	logFile := filepath.Join(project, "decisions.jsonl")
	env := append(os.Environ(), "HOME="+home, "XDG_CACHE_HOME="+home+"/.cache")
	policy := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\n"+
		"agent: \"allowed-tools\": [\"Write(./**)\", \"Bash(cp:*)\", \"Bash(rm:*)\", \"Bash(touch:*)\"]\n")
	// runs command as Claude Code would, from where decide says: the
	// hook's answer, then bash -c of the command it hands back.
	runs := func(command, decide string) {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"cwd": project, "hook_event_name": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": command}})
		h := exec.Command(bin, "hook", "claude-code", "--policy", policy, "--decision-log", decide)
		h.Dir, h.Env, h.Stdin = project, env, strings.NewReader(string(in))
		out, _ := h.Output()
		var ans map[string]map[string]any
		json.Unmarshal(out, &ans)
		updated, _ := ans["hookSpecificOutput"]["updatedInput"].(map[string]any)
		wrapped, _ := updated["command"].(string)
		if !strings.Contains(wrapped, " 'exec' ") {
			t.Fatalf("the hook must allow %q through exec: %s", command, out)
		}
		c := exec.Command("bash", "-c", wrapped)
		c.Dir, c.Env = project, env
		c.CombinedOutput() // a refused write fails the command: what counts is the file
	}
	calls := 0
	for _, tc := range []struct{ note, command, decide string }{
		{note: "the log replaced", command: "cp /etc/hostname " + logFile, decide: logFile},
		{note: "the log removed", command: "rm -f " + logFile, decide: logFile},
		{note: "a log named relative to the hook's directory", command: "cp /etc/hostname decisions.jsonl", decide: "decisions.jsonl"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			runs(tc.command, tc.decide)
			calls++
			data, err := os.ReadFile(logFile)
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			for _, l := range lines {
				if !strings.HasPrefix(l, `{"time":`) {
					err = os.ErrInvalid
				}
			}
			if err != nil || len(lines) != calls {
				t.Errorf("%q changed the decision log through exec (%d calls): %v %.80q", tc.command, calls, err, data)
			}
		})
	}
	// A write beside the log, which Write(./**) allows, works.
	runs("touch "+project+"/beside", logFile)
	if _, err := os.Stat(filepath.Join(project, "beside")); err != nil {
		t.Errorf("a command could not write beside the log: %v", err)
	}
}
