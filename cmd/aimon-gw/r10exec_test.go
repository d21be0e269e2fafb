package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestR10ExecPassesOnSignalsAndKeepsItsTimeout: aimon-gw exec, as Claude
// Code runs a hooked Bash command, passes SIGTERM on to the command in
// its sandbox (its trap runs), kills a command that ignores it once its
// grace is over (what it would print later never comes), and stops a
// command at the timeout its call asked for, exit 124 with the sentence,
// and a command run in the background at none but the runtime's stop
// (probe P11: exec, its tracer, bwrap and the command ran on after
// SIGTERM, and nothing bounded them in time).
func TestR10ExecPassesOnSignalsAndKeepsItsTimeout(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Bash"]
`)
	hooked := func(input map[string]any) string {
		t.Helper()
		in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": input})
		h := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", policy, "--cache", "off")
		h.Stdin = strings.NewReader(string(in))
		out, err := h.Output()
		var ans struct {
			Out struct {
				Decision string         `json:"permissionDecision"`
				Updated  map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		if err != nil || json.Unmarshal(out, &ans) != nil || ans.Out.Decision != "allow" {
			t.Fatalf("the hook must allow %v through exec: %v %s", input, err, out)
		}
		cmd, _ := ans.Out.Updated["command"].(string)
		if !strings.Contains(cmd, " 'exec' ") {
			t.Fatalf("not wrapped in exec: %q", cmd)
		}
		return cmd
	}
	// run starts the wrapped command as the exec process itself, waits
	// for the command to say it is ready, sends exec sig (0: none), and
	// returns what it printed and its exit status.
	run := func(wrapped string, sig syscall.Signal) (string, int) {
		t.Helper()
		c := exec.Command("bash", "-c", "exec "+wrapped)
		c.Dir = wd
		var stderr strings.Builder
		c.Stderr = &stderr
		out, _ := c.StdoutPipe()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if sc.Text() == "ready" && sig != 0 {
				c.Process.Signal(sig)
			}
		}
		err := c.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		return strings.Join(lines, "\n") + "\n" + stderr.String(), code
	}
	out, code := run(hooked(map[string]any{"command": "trap 'echo got-term; exit 7' TERM; echo ready; sleep 30 & wait"}), syscall.SIGTERM)
	if !strings.Contains(out, "got-term") || code != 7 {
		t.Errorf("SIGTERM to exec must reach the command (its trap says got-term, exit 7): exit %d\n%s", code, out)
	}
	// Run in the background, a command has no timeout of exec's (Claude
	// Code bounds it by none), and the runtime's stop still reaches it.
	bg := hooked(map[string]any{"command": "trap 'echo got-term; exit 7' TERM; echo ready; sleep 30 & wait", "run_in_background": true})
	if !strings.Contains(bg, "'--timeout' '-1'") {
		t.Errorf("a background command must be sealed with no timeout (-1): %q", bg)
	}
	if out, code := run(bg, syscall.SIGTERM); !strings.Contains(out, "got-term") || code != 7 {
		t.Errorf("SIGTERM to exec must reach a background command: exit %d\n%s", code, out)
	}
	out, code = run(hooked(map[string]any{"command": "trap '' TERM; echo ready; sleep 30; echo survived"}), syscall.SIGTERM)
	if strings.Contains(out, "survived") || code != 128+int(syscall.SIGKILL) {
		t.Errorf("a command that ignores SIGTERM must be killed after the grace (exit 137, nothing after): exit %d\n%s", code, out)
	}
	out, code = run(hooked(map[string]any{"command": "echo ready; sleep 30; echo survived", "timeout": 1500}), 0)
	if strings.Contains(out, "survived") || code != 124 || !strings.Contains(out, "stopped after its timeout of 1.5s") {
		t.Errorf("a command past its call's timeout must be stopped, exit 124 with the sentence: exit %d\n%s", code, out)
	}
}
