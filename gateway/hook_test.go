package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/policy"
)

// preToolUse is a Claude Code PreToolUse input of tool with input (a JSON
// object) in cwd.
func preToolUse(session, cwd, tool, input string) []byte {
	return []byte(`{"session_id":"` + session + `","cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":` + input + `,"tool_use_id":"t"}`)
}

// loadGateway makes a gateway serving the policy in dir, its ./ patterns
// read in wd, closed at the end of the test.
func loadGateway(t *testing.T, dir, wd string, o gateway.Options) *gateway.Gateway {
	t.Helper()
	pol, err := policy.Load(context.Background(), dir, policy.WithWorkdir(wd))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(pol, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw
}

// TestP19HookCountsLimitsAsTheCommandHook: Gateway.Hook and AnswerHook
// (what aimon-gw hook runs) are one hook path: both count the policy's
// limit in the user's state directory, one count between them. Of four
// Writes on a burst of 2, answered alternately by each, the first two are
// allowed and the next two denied by the limit, each answer byte for byte
// what the other path answers at that count. Before they were one path,
// Gateway.Hook counted no limit at all and allowed all four.
func TestP19HookCountsLimitsAsTheCommandHook(t *testing.T) {
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	limit := fmt.Sprintf("facade-writes-%d", time.Now().UnixNano()) // the state directory outlives the test
	dir := writePolicy(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema/claudecode"

tools: Write: claudecode.#Write
agent: "allowed-tools": ["Write(%s/**)"]
limits: %q: {tool: "Write", rate: "1/h", burst: 2}
`, wd, limit))
	t.Setenv("CLAUDE_PROJECT_DIR", wd)
	gw := loadGateway(t, dir, wd, gateway.Options{})
	cfg := gateway.HookConfig{Runtime: "claude-code", Policy: dir, Cache: "off"}
	var answers []string
	for i := range 4 {
		in := preToolUse("s", wd, "Write", fmt.Sprintf(`{"file_path":"%s/f%d","content":"x"}`, wd, i))
		var out []byte
		var err error
		if i%2 == 0 {
			out, err = gateway.AnswerHook(context.Background(), cfg, in)
		} else {
			out, err = gw.Hook(context.Background(), "claude-code", in)
		}
		if err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		answers = append(answers, strings.ReplaceAll(string(out), fmt.Sprintf("f%d", i), "F"))
	}
	for i, want := range []string{`"allow"`, `"allow"`, `the limit \"` + limit, `the limit \"` + limit} {
		if !strings.Contains(answers[i], want) {
			t.Errorf("Write %d answered %s, want %s (rule P19)", i, answers[i], want)
		}
	}
	if answers[0] != answers[1] || answers[2] != answers[3] {
		t.Errorf("the two paths answered unlike at the same count:\nAnswerHook %s\nHook       %s\nAnswerHook %s\nHook       %s", answers[0], answers[1], answers[2], answers[3])
	}
}

// TestR7HookReadsPatternsInTheProject: Gateway.Hook reads the policy's ./
// patterns in the runtime's project while its shell is in a subdirectory
// of it, as aimon-gw hook does (Claude Code reads its own rules against
// the directory it started in): a Read of the project's file from its
// subdirectory is allowed by both paths alike. Before, the façade read
// them in the cwd and denied it.
func TestR7HookReadsPatternsInTheProject(t *testing.T) {
	proj, _ := filepath.EvalSymlinks(t.TempDir())
	sub := filepath.Join(proj, "sub")
	os.Mkdir(sub, 0o755)
	dir := writePolicy(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: Read: claudecode.#Read
agent: "allowed-tools": ["Read(./**)"]
`)
	t.Setenv("CLAUDE_PROJECT_DIR", proj)
	gw := loadGateway(t, dir, t.TempDir(), gateway.Options{})
	in := preToolUse("s", sub, "Read", `{"file_path":"`+proj+`/go.mod"}`)
	lib, err := gw.Hook(context.Background(), "claude-code", in)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := gateway.AnswerHook(context.Background(), gateway.HookConfig{Runtime: "claude-code", Policy: dir, Cache: "off"}, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lib), `"permissionDecision":"allow"`) || string(lib) != string(cli) {
		t.Errorf("a Read of the project's go.mod from %s:\nHook       %s\nAnswerHook %s\nwant both allowed alike", sub, lib, cli)
	}
}

// TestAnswerHookRefusesBadInput: what AnswerHook cannot act on is one
// sentence saying what to give, and no answer: an unknown runtime, an
// input past MaxHookInput, one that is not JSON, a negative load bound, a
// decision log that cannot be opened, a policy that does not load, and a
// --state that is no Redis URL under a policy with limits.
func TestAnswerHookRefusesBadInput(t *testing.T) {
	wd := t.TempDir()
	ok := preToolUse("s", wd, "Read", `{"file_path":"/etc/hostname"}`)
	broken := writePolicy(t, "package policy\n\ntools: {")
	limited := writePolicy(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: Write: claudecode.#Write
agent: "allowed-tools": ["Write"]
limits: w: {tool: "Write", rate: "1/h", burst: 2}
`)
	for _, tc := range []struct {
		note  string
		cfg   gateway.HookConfig
		input []byte
		want  string
	}{
		{"unknown runtime", gateway.HookConfig{Runtime: "cursor"}, ok, `there is no hook of the runtime "cursor"; give one of [claude-code codex gemini-cli]`},
		{"too long", gateway.HookConfig{Runtime: "claude-code"}, make([]byte, gateway.MaxHookInput+1), "the hook input is more than 16 MiB, which the hook does not read; it is blocked"},
		{"not JSON", gateway.HookConfig{Runtime: "claude-code", Cache: "off"}, []byte("not json"), "hook input"},
		{"negative bound", gateway.HookConfig{Runtime: "claude-code", LoadTimeout: -time.Second}, ok, "HookConfig.LoadTimeout -1s is not a positive duration"},
		{"decision log", gateway.HookConfig{Runtime: "claude-code", DecisionLog: filepath.Join(wd, "no", "d.jsonl")}, ok, "no such file or directory; give --decision-log a file the gateway can append to"},
		{"broken policy", gateway.HookConfig{Runtime: "claude-code", Policy: broken, Cache: "off"}, ok, "the policy does not load, so the call is blocked"},
		{"state", gateway.HookConfig{Runtime: "claude-code", Policy: limited, Cache: "off", State: wd}, preToolUse("s", wd, "Write", `{"file_path":"/tmp/x","content":"x"}`), "is not a redis:// or rediss:// URL"},
	} {
		out, err := gateway.AnswerHook(context.Background(), tc.cfg, tc.input)
		if err == nil || out != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %s, %v; want no answer and %q", tc.note, out, err, tc.want)
		}
	}
}

// TestP16ExecRunsNothingItsTicketDoesNotSay: gateway.Exec runs a command
// only with the ticket a hook sealed for exactly it: without one, with a
// forged one, or with the sealed one and another command, nothing runs
// (the file the command would make is not there) and the answer is exit
// 126 with the sentence; a request it cannot act on (no surface, a
// relative directory, a negative load bound) is exit 2.
func TestP16ExecRunsNothingItsTicketDoesNotSay(t *testing.T) {
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	dir, _ := filepath.Abs("../examples/policies/claude-code")
	made := filepath.Join(wd, "made")
	run := "touch " + made
	// A ticket the hook seals, for git status.
	out, err := gateway.AnswerHook(context.Background(), gateway.HookConfig{Runtime: "claude-code", Policy: dir, Cache: "off", ExecBinary: "/usr/bin/aimon-gw"},
		preToolUse("s", wd, "Bash", `{"command":"git status"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, found := strings.Cut(string(out), `'--ticket' '`)
	sealed, _, _ := strings.Cut(rest, "'")
	if !found || sealed == "" {
		t.Fatalf("the hook sealed no ticket for git status: %s", out)
	}
	req := func(tk string) gateway.ExecRequest {
		return gateway.ExecRequest{Policy: dir, Surface: []string{"agent"}, Workdir: wd, Command: run, Ticket: tk}
	}
	for _, tc := range []struct {
		note string
		req  gateway.ExecRequest
		code int
		want string
	}{
		{"no ticket", req(""), gateway.ExitNotRun, "it carries no ticket"},
		{"forged", req("e30.AAAA"), gateway.ExitNotRun, "exec runs only what the hook sealed (rule P16)"},
		{"another command", req(sealed), gateway.ExitNotRun, "exec runs only what the hook sealed (rule P16)"},
		{"no surface", gateway.ExecRequest{Policy: dir, Workdir: wd, Command: run, Ticket: sealed}, 2, "ExecRequest.Surface is empty"},
		{"negative bound", gateway.ExecRequest{Policy: dir, Surface: []string{"agent"}, Workdir: wd, Command: run, Ticket: sealed, LoadTimeout: -time.Second}, 2, "ExecRequest.LoadTimeout -1s is not a positive duration"},
		{"relative", gateway.ExecRequest{Policy: dir, Surface: []string{"agent"}, Workdir: "proj", Command: run, Ticket: sealed}, 2, `ExecRequest.Workdir "proj" is not an absolute directory`},
	} {
		err := gateway.Exec(context.Background(), tc.req)
		var exit *gateway.ExitError
		if !errors.As(err, &exit) || exit.Code != tc.code || !strings.Contains(exit.Reason, tc.want) {
			t.Errorf("%s: %v; want exit %d with %q", tc.note, err, tc.code, tc.want)
		}
		if _, err := os.Stat(made); err == nil {
			t.Fatalf("%s: the command ran", tc.note)
		}
	}
}
