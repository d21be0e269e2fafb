package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// hookAnswered is what a hook answered and what its decision log recorded,
// through the binary: the decision ("decision" for Gemini CLI,
// permissionDecision for Claude Code and Codex, "" for Codex's {}), its
// sentence, and the records.
func hookAnswered(t *testing.T, cmd *exec.Cmd, input, log string) (decision, said string, records []map[string]any) {
	t.Helper()
	out, stderr, code := runInput(t, cmd, input)
	if code != 0 {
		t.Fatalf("%v: exit %d, %q %q", cmd.Args, code, out, stderr)
	}
	var a struct {
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
		Specific struct {
			Decision string `json:"permissionDecision"`
			Reason   string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v: %v: %q", cmd.Args, err, out)
	}
	return a.Decision + a.Specific.Decision, a.Reason + a.Specific.Reason, readRecords(t, log)
}

// sameSentence reports whether a hook's answer says what its record does
// (Codex's answer leaves the last full stop off, as Codex adds its own).
func sameSentence(said string, r map[string]any) bool {
	reason, _ := r["reason"].(string)
	return said != "" && strings.TrimSuffix(reason, ".") == strings.TrimSuffix(said, ".")
}

// TestP15CodexHookRefusesAnAskInTheDecision: Codex's hook cannot ask a
// person, so the one decision refuses an asked call there (rule P15): the
// hook answers deny, and its one record says refused by P15 with the very
// sentence the answer gives (rule R10), not the ask it used to record.
// The same policy and call under Claude Code's and Gemini CLI's hooks,
// whose runtimes ask a person, is still answered ask and recorded as one.
func TestP15CodexHookRefusesAnAskInTheDecision(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, agentsPolicy), t.TempDir()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	inputs := map[string]string{
		"codex":       `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch review"},"tool_use_id":"a1"}`,
		"claude-code": `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch review"},"tool_use_id":"a1"}`,
		"gemini-cli":  `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"touch review"}}`,
	}
	for runtime, input := range inputs {
		log := filepath.Join(t.TempDir(), "hook.jsonl")
		cmd := exec.Command(gatewayBinary(t), "hook", runtime, "--policy", dir, "--cache", "off", "--decision-log", log)
		cmd.Dir = wd
		decision, said, rs := hookAnswered(t, cmd, input, log)
		if len(rs) != 1 {
			t.Fatalf("%s: %d records, want one", runtime, len(rs))
		}
		r := rs[0]
		switch runtime {
		case "codex":
			if decision != "deny" || r["allowed"] != false || r["ask"] == true || r["rule"] != "P15" {
				t.Errorf("codex: answered %q, recorded %v; want deny, and refused by P15", decision, r)
			}
			if !strings.Contains(said, "Codex's hook cannot ask one, so the call is refused") || !sameSentence(said, r) {
				t.Errorf("codex: the answer says %q, its record %q; want the same refusal", said, r["reason"])
			}
		default:
			if decision != "ask" || r["ask"] != true || r["allowed"] == true || strings.Contains(said, "cannot ask") {
				t.Errorf("%s: answered %q (%q), recorded %v; want ask, recorded as one", runtime, decision, said, r)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "review")); err == nil {
		t.Error("the hook ran the command")
	}
}

// TestP16UnsealableTicketIsRefusedInTheDecision: a hook whose exec ticket
// cannot be sealed (run as a user whose state directory, where the key is
// made, is held by a file) refuses the allowed sandboxed command in the
// one decision: Claude Code's and Codex's hooks answer deny,
// and write one record, refused by P16 with the answer's sentence, naming
// the state directory (rules P16, R10); the command does not run.
func TestP16UnsealableTicketIsRefusedInTheDecision(t *testing.T) {
	t.Parallel()
	const uid = 61736
	setpriv, bin, root, place := stateless(t, uid, "unsealed")
	policy, wd := filepath.Join(root, "policy"), filepath.Join(root, "work")
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": strings.ReplaceAll(agentsPolicy, `sandbox: mode: "off"`, `sandbox: {}`)})
	os.MkdirAll(wd, 0o755)
	chownAll(t, root, uid, uid)

	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	input := `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch allowed"},"tool_use_id":"t1"}`
	for _, runtime := range []string{"claude-code", "codex"} {
		log := filepath.Join(root, runtime+".jsonl")
		cmd := exec.Command(setpriv, "--reuid="+fmt.Sprint(uid), "--regid="+fmt.Sprint(uid), "--clear-groups", "--", bin, "hook", runtime, "--policy", policy, "--cache", "off", "--decision-log", log)
		cmd.Dir = wd
		decision, said, rs := hookAnswered(t, cmd, input, log)
		if len(rs) != 1 {
			t.Fatalf("%s: %d records, want one", runtime, len(rs))
		}
		r := rs[0]
		if decision != "deny" || r["allowed"] != false || r["rule"] != "P16" {
			t.Errorf("%s: answered %q, recorded %v; want deny, and refused by P16", runtime, decision, r)
		}
		if !strings.Contains(said, "cannot seal the ticket") || !strings.Contains(said, place) || !sameSentence(said, r) {
			t.Errorf("%s: the answer says %q, its record %q; want the same refusal, naming %s", runtime, said, r["reason"], place)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "allowed")); err == nil {
		t.Error("the command ran")
	}
}
