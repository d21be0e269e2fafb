package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const agentsPolicy = `package policy

import (
	"aimon.dev/gw/schema/codex"
	"aimon.dev/gw/schema/geminicli"
)

tools: {
	Bash:              codex.#Bash & {sandbox: mode: "off"}
	apply_patch:       codex.#apply_patch
	run_shell_command: geminicli.#run_shell_command & {sandbox: mode: "off"}
	read_file:         geminicli.#read_file
	write_file:        geminicli.#write_file
}
agent: {
	"allowed-tools": ["Bash(touch allowed)", "Bash(touch review)", "run_shell_command(touch allowed)", "run_shell_command(touch review)", "write_file(./**)", "read_file(./**)", "mcp__aimon__Echo"]
	"denied-tools": ["write_file(./secret/**)"]
	"ask-tools": ["Bash(touch review)", "run_shell_command(touch review)"]
}
`

// runHook runs aimon-gw hook RUNTIME on input; it returns standard output,
// standard error and the exit code.
func runHook(t *testing.T, runtime, policy, input string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), "hook", runtime, "--policy", policy, "--cache", "off")
	return runInput(t, cmd, input)
}

// runInput runs cmd on input; it returns standard output, standard error
// and the exit code.
func runInput(t *testing.T, cmd *exec.Cmd, input string) (string, string, int) {
	t.Helper()
	cmd.Stdin = strings.NewReader(input)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestR7CodexHookAnswersAsCodexEnforces: aimon-gw hook codex decides Codex's
// own calls by the same policy and decision as Claude Code's hook, and
// answers only what Codex enforces (it runs the tool on anything else): {}
// for an allowed call, a deny with the reason for a refused one, a deny
// for an ask (Codex's hook cannot ask), exit 2 for an input it cannot read.
func TestR7CodexHookAnswersAsCodexEnforces(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, agentsPolicy), t.TempDir()
	in := func(tool, input string) string {
		return `{"session_id":"s","turn_id":"t","cwd":"` + wd + `","hook_event_name":"PreToolUse","model":"m","permission_mode":"bypassPermissions","tool_name":"` + tool + `","tool_input":` + input + `,"tool_use_id":"c1"}`
	}
	for _, tc := range []struct {
		name, tool, input, want string
	}{
		{"allowed", "Bash", `{"command":"touch allowed"}`, `{}`},
		{"refused", "Bash", `{"command":"touch other"}`, `"permissionDecision":"deny"`},
		{"asked is refused", "Bash", `{"command":"touch review"}`, `Codex's hook cannot ask one`},
		{"unknown tool", "view_image", `{"path":"x.png"}`, `does not mention view_image`},
		{"MCP allowed", "mcp__aimon__Echo", `{"message":"hi"}`, `{}`},
		{"MCP refused", "mcp__aimon__Bash", `{"command":"id"}`, `"permissionDecision":"deny"`},
		{"patch not allowed", "apply_patch", `{"command":"*** Begin Patch"}`, `"permissionDecision":"deny"`},
	} {
		out, stderr, code := runHook(t, "codex", dir, in(tc.tool, tc.input))
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, %q (stderr %q), want %s", tc.name, code, out, stderr, tc.want)
		}
		if strings.Contains(out, `"ask"`) || strings.Contains(out, `"allow"`) && !strings.Contains(out, "updatedInput") {
			t.Errorf("%s: an answer Codex does not enforce, so runs the tool on: %s", tc.name, out)
		}
	}
	for name, bad := range map[string]string{"not JSON": `{"tool_name":`, "another event": `{"hook_event_name":"SessionStart","tool_name":"Bash","cwd":"` + wd + `"}`, "no cwd": `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch allowed"}}`} {
		out, stderr, code := runHook(t, "codex", dir, bad)
		if code != 2 || out != "" || stderr == "" {
			t.Errorf("%s: a bad input must exit 2 with a sentence on standard error (Codex blocks on that alone): exit %d, %q %q", name, code, out, stderr)
		}
	}
}

// TestR7GeminiHookAnswersAsGeminiReads: aimon-gw hook gemini-cli decides
// Gemini CLI's own calls by the same policy and decision, under its tool
// names and its MCP tools' context, and answers Gemini's decision
// (allow, ask, deny with the reason the model gets); a shell command in
// another directory than the one decided is refused; a bad input exits 2.
func TestR7GeminiHookAnswersAsGeminiReads(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, agentsPolicy), t.TempDir()
	in := func(tool, input, extra string) string {
		return `{"session_id":"s","transcript_path":"/t","cwd":"` + wd + `","hook_event_name":"BeforeTool","timestamp":"2026-12-02T21:00:39.687Z","tool_name":"` + tool + `","tool_input":` + input + extra + `}`
	}
	for _, tc := range []struct {
		name, tool, input, extra, decision, says string
	}{
		{"shell allowed", "run_shell_command", `{"command":"touch allowed"}`, "", "allow", ""},
		{"shell refused", "run_shell_command", `{"command":"touch other"}`, "", "deny", "not allowed"},
		{"shell asked", "run_shell_command", `{"command":"touch review"}`, "", "ask", "approval"},
		{"shell elsewhere", "run_shell_command", `{"command":"touch allowed","dir_path":"/tmp"}`, "", "deny", "dir_path"},
		{"write allowed", "write_file", `{"file_path":"a.txt","content":"x"}`, "", "allow", ""},
		{"write denied", "write_file", `{"file_path":"secret/a.txt","content":"x"}`, "", "deny", "denied"},
		{"own parameter", "read_file", `{"file_path":"a.txt","wait_for_previous":true}`, "", "allow", ""},
		{"unknown tool", "save_memory", `{"fact":"x"}`, "", "deny", "does not mention save_memory"},
		{"MCP by its context", "mcp_aimon_Echo", `{"message":"hi"}`, `,"mcp_context":{"server_name":"aimon","tool_name":"Echo"}`, "allow", ""},
		{"MCP refused", "mcp_aimon_Bash", `{"command":"id"}`, `,"mcp_context":{"server_name":"aimon","tool_name":"Bash"}`, "deny", "mcp__aimon__Bash"},
	} {
		out, stderr, code := runHook(t, "gemini-cli", dir, in(tc.tool, tc.input, tc.extra))
		var got struct{ Decision, Reason string }
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Decision != tc.decision || !strings.Contains(got.Reason, tc.says) {
			t.Errorf("%s: exit %d, %q (stderr %q), want %s %q", tc.name, code, out, stderr, tc.decision, tc.says)
		}
	}
	for name, bad := range map[string]string{"not JSON": `[`, "another event": `{"hook_event_name":"BeforeModel","tool_name":"read_file","cwd":"` + wd + `"}`, "relative cwd": `{"hook_event_name":"BeforeTool","tool_name":"read_file","cwd":"w","tool_input":{}}`} {
		out, stderr, code := runHook(t, "gemini-cli", dir, bad)
		if code != 2 || out != "" || stderr == "" {
			t.Errorf("%s: a bad input must exit 2 with a sentence on standard error (Gemini blocks on that alone): exit %d, %q %q", name, code, out, stderr)
		}
	}
}

// TestR6AgentShellsRunInTheSandbox: an allowed command of Codex and of
// Gemini CLI is handed back wrapped in aimon-gw exec, the whole input, so
// that what runs is decided again and kept in the policy's sandbox.
func TestR6AgentShellsRunInTheSandbox(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, strings.ReplaceAll(agentsPolicy, `sandbox: mode: "off"`, `sandbox: {}`)), t.TempDir()
	out, stderr, code := runHook(t, "codex", dir, `{"cwd":"`+wd+`","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch allowed"},"tool_use_id":"c"}`)
	if code != 0 || !strings.Contains(out, `"permissionDecision":"allow"`) || !strings.Contains(out, `exec`) || !strings.Contains(out, `updatedInput`) {
		t.Errorf("codex: %d %s %s", code, out, stderr)
	}
	out, stderr, code = runHook(t, "gemini-cli", dir, `{"cwd":"`+wd+`","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"touch allowed","description":"d"}}`)
	var got struct {
		Decision           string
		HookSpecificOutput struct {
			ToolInput map[string]any `json:"tool_input"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Decision != "allow" || !strings.Contains(got.HookSpecificOutput.ToolInput["command"].(string), "'exec'") || got.HookSpecificOutput.ToolInput["description"] != "d" {
		t.Errorf("gemini-cli: %d %s %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(wd, "allowed")); err == nil {
		t.Error("the hook ran the command")
	}
}
