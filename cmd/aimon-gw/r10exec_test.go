package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestR10ExecRecordsAnApprovedRunBeforeItRuns: under the command hook with
// --decision-log, an asked Bash command the person approved is recorded
// by exec before it runs (running, allowed by P15, under the call's id,
// after the hook's ask) and its result after; with the log's disk full
// once the hook recorded the ask, the approved rm is not run (its victim
// kept), exit 126 with why, and the log holds nothing more; an exec line
// without the hook's --protect FILE, where the record goes, or without
// its --decision-log-sync, is refused, and runs nothing. As root and as nobody (probe V10).
func TestR10ExecRecordsAnApprovedRunBeforeItRuns(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, p16Lists)
			lines := func() []map[string]any {
				t.Helper()
				data, _ := os.ReadFile(e.log)
				var recs []map[string]any
				for line := range strings.Lines(string(data)) {
					var r map[string]any
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatalf("the decision log's line %q: %v", line, err)
					}
					recs = append(recs, r)
				}
				return recs
			}
			e.hookArgs = []string{"--decision-log-sync"}
			d, wrapped, reason := p16HookWrap(t, e, "rm-1", "rm victim")
			if d != "ask" {
				t.Fatalf("the hook must ask about rm: %s %s", d, reason)
			}
			protect := fmt.Sprintf("'--protect' '%s' '--call-id' 'rm-1' '--decision-log-sync' ", e.log)
			if !strings.Contains(wrapped, protect) {
				t.Fatalf("the exec line does not name the hook's log, synced as the hook's: %s", wrapped)
			}
			for _, forged := range []string{strings.Replace(wrapped, protect, "", 1), strings.Replace(wrapped, "'--decision-log-sync' ", "", 1)} {
				if r := p16RunWrapped(t, e, forged); !r.isError || !strings.Contains(r.text, "sealed with other protections") {
					t.Errorf("exec without the hook's --protect, or its --decision-log-sync, must refuse its ticket: %+v", r)
				}
			}
			e.hookArgs = nil
			if _, err := os.Stat(e.proj + "/victim"); err != nil {
				t.Fatalf("exec without the log it records in ran the approved rm: %v", err)
			}
			if r := p16RunWrapped(t, e, wrapped); r.isError {
				t.Fatalf("the approved rm must run: %s", r.text)
			}
			if _, err := os.Stat(e.proj + "/victim"); err == nil {
				t.Fatal("the approved rm did not run")
			}
			var got []string
			for _, r := range lines() {
				got = append(got, fmt.Sprintf("%v %v allowed=%v ask=%v %v error=%v", r["phase"], r["call_id"], r["allowed"], r["ask"], r["rule"], r["result_error"]))
			}
			want := []string{"decided rm-1 allowed=false ask=true P14 error=<nil>", "running rm-1 allowed=true ask=<nil> P15 error=<nil>", "result rm-1 allowed=<nil> ask=<nil> <nil> error=false"}
			if !slices.Equal(got, want) {
				t.Errorf("the decision log holds\n%s\nwant the hook's ask, exec's run before it ran, and its result:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}

			// The disk fills between the ask and the person's yes.
			mnt := smallTmpfs(t)
			e.log = filepath.Join(mnt, "decisions.jsonl")
			writeFile(t, e.proj+"/victim2", "keep\n")
			if u.uid >= 0 {
				os.Chown(e.proj+"/victim2", u.uid, u.gid)
			}
			if d, wrapped, reason = p16HookWrap(t, e, "rm-2", "rm victim2"); d != "ask" {
				t.Fatalf("the hook must ask about rm: %s %s", d, reason)
			}
			// The log's one page filled, after the ask, by a line of its
			// own, and the disk holds no other.
			f, err := os.OpenFile(e.log, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := f.Stat()
			f.WriteString(`{"pad":"` + strings.Repeat("x", 4096-int(fi.Size())-11) + "\"}\n")
			f.Close()
			fill(t, filepath.Join(mnt, "filler"))
			asked, _ := os.ReadFile(e.log)
			r := p16RunWrapped(t, e, wrapped)
			if !r.isError || !strings.Contains(r.text, "decision log cannot be written") || !strings.Contains(r.text, "no space left on device") {
				t.Errorf("an approved run whose record cannot be written must not run, saying why: %+v", r)
			}
			if _, err := os.Stat(e.proj + "/victim2"); err != nil {
				t.Errorf("the approved rm ran with its record unwritten: %v", err)
			}
			if now, _ := os.ReadFile(e.log); string(now) != string(asked) {
				t.Errorf("the decision log holds %q after the hook's ask; want nothing (no torn record)", strings.TrimPrefix(string(now), string(asked)))
			}
		})
	}
}
