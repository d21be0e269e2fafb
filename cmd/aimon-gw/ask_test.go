package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askPolicy allows reads under the working directory, asks for those under
// secret/ and denies one file there.
const askPolicy = `package policy

import "aimon.dev/gw/schema"

tools: Read: schema.#Read
agent: {
	"allowed-tools": ["Read(./**)"]
	"ask-tools": ["Read(./secret/**)"]
	"denied-tools": ["Read(./secret/key)"]
}
validation: "enforce"
`

func askSetup(t *testing.T) (dir, wd string) {
	t.Helper()
	dir = moduleDir(t, askPolicy)
	wd, _ = filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(wd, "secret", "a"), "the secret\n")
	writeFile(t, filepath.Join(wd, "secret", "key"), "the key\n")
	writeFile(t, filepath.Join(wd, "open"), "open\n")
	return dir, wd
}

var tokenRE = regexp.MustCompile(`"approvals": \["([^"]+)"\]`)

// TestP15ServeApprovalToken: serve answers an ask with a sealed token and
// runs the same call sent back with it, once; a deny is never asked; a
// forged token, a replayed one and a token for another call run nothing;
// the decision log records the ask and the approval. The key comes from a
// file, so a second process approves what the first asked: nothing is
// kept between the two lines.
func TestP15ServeApprovalToken(t *testing.T) {
	t.Parallel()
	dir, wd := askSetup(t)
	key := filepath.Join(t.TempDir(), "approval.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k3y-", 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	args := []string{"--policy", dir, "--workdir", wd, "--approval-key", key, "--decision-log", log}
	first := runServe(t, args, nil,
		toolLine("ask", "Read", map[string]any{"file_path": "secret/a"}),
		toolLine("deny", "Read", map[string]any{"file_path": "secret/key"}),
		toolLine("open", "Read", map[string]any{"file_path": "open"}))
	m := tokenRE.FindStringSubmatch(text(first[0]))
	if first[0]["is_error"] != true || m == nil || strings.Contains(text(first[0]), "the secret") {
		t.Fatalf("an ask must be refused with a token: %v", first[0])
	}
	if r := first[1]; r["is_error"] != true || strings.Contains(text(r), "approvals") || !strings.Contains(text(r), "is denied") {
		t.Errorf("a deny must beat the ask, with no token: %v", r)
	}
	if r := first[2]; r["is_error"] != false || !strings.Contains(text(r), "open") {
		t.Errorf("an allowed read: %v", r)
	}
	tok := m[1]
	approved := func(id, path, token string) string {
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": path}, "approvals": []string{token}})
		return string(b)
	}
	forged := tok[:len(tok)-2] + "xx"
	second := runServe(t, args, nil,
		approved("forged", "secret/a", forged),
		approved("other", "secret/key", tok),
		approved("approved", "secret/a", tok),
		approved("replayed", "secret/a", tok))
	if r := second[0]; r["is_error"] != true || !strings.Contains(text(r), "not one this gateway sealed") || strings.Contains(text(r), "the secret") {
		t.Errorf("a forged token: %v", r)
	}
	if r := second[1]; r["is_error"] != true || strings.Contains(text(r), "the key") {
		t.Errorf("a token for another call: %v", r)
	}
	if r := second[2]; r["is_error"] != false || !strings.Contains(text(r), "the secret") {
		t.Errorf("the approved call must run: %v", r)
	}
	if r := second[3]; r["is_error"] != true || !strings.Contains(text(r), "already used") {
		t.Errorf("a replayed token: %v", r)
	}
	recs := readRecords(t, log)
	var asked, approvedRec bool
	for _, r := range recs {
		asked = asked || (r["call_id"] == "ask" && r["ask"] == true && r["allowed"] == false)
		approvedRec = approvedRec || (r["call_id"] == "approved" && r["rule"] == "P15" && r["allowed"] == true)
	}
	if len(recs) != 7 || !asked || !approvedRec {
		t.Errorf("the decision log must hold one record per call, the ask and the approval among them: %v", recs)
	}
}

// TestP15HookAndCheckAsk: the hook answers "ask" and "deny"; check says
// the call is not allowed, that it asks, and which entry decided.
func TestP15HookAndCheckAsk(t *testing.T) {
	t.Parallel()
	dir, wd := askSetup(t)
	bin := gatewayBinary(t)
	for _, tc := range []struct{ note, path, want string }{
		{"an ask", "secret/a", `"permissionDecision":"ask"`},
		{"a deny beats the ask", "secret/key", `"permissionDecision":"deny"`},
		{"an allow", "open", `"permissionDecision":"allow"`},
	} {
		in, _ := json.Marshal(map[string]any{"cwd": wd, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": map[string]any{"file_path": tc.path}})
		hook := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
		hook.Stdin = strings.NewReader(string(in))
		out, err := hook.Output()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %v %s; want %s", tc.note, err, out, tc.want)
		}
	}
	check := exec.Command(bin, "check", "--policy", dir, "--workdir", wd, `{"type":"tool_use","id":"1","name":"Read","input":{"file_path":"secret/a"}}`)
	out, err := check.Output()
	var v map[string]any
	json.Unmarshal(out, &v)
	if err == nil || v["allowed"] != false || v["ask"] != true || v["rule"] != "P14" || !strings.Contains(fmt.Sprint(v["entry_at"]), "policy.cue:8:") {
		t.Errorf("check on an ask must name the ask-tools entry where it is written (policy.cue, line 8): %v %s", err, out)
	}
	// Another hook event than PreToolUse and PostToolUse (whose results
	// label a session, rule P18: {} under a policy without labels) is
	// refused, naming it.
	post := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
	post.Stdin = strings.NewReader(`{"cwd":"` + wd + `","hook_event_name":"PostToolUse","tool_name":"Read","tool_input":{"file_path":"open"},"tool_response":{}}`)
	if out, err = post.Output(); err != nil || strings.TrimSpace(string(out)) != "{}" {
		t.Errorf("a PostToolUse input under a policy without labels must be answered {}: %v %s", err, out)
	}
	stop := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
	stop.Stdin = strings.NewReader(`{"cwd":"` + wd + `","hook_event_name":"Stop","tool_name":"Read","tool_input":{"file_path":"open"}}`)
	out, err = stop.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "the Stop event") {
		t.Errorf("a Stop input must be refused with exit 2, naming the event: %v %s", err, out)
	}
}

// TestP15MCPElicitsApproval: mcp asks the person through elicitation when
// the client declares it, runs the call only on an approval, and refuses
// it with a sentence when the client cannot be asked.
func TestP15MCPElicitsApproval(t *testing.T) {
	t.Parallel()
	dir, wd := askSetup(t)
	call := func(s *mcp.ClientSession, path string) (string, bool) {
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Read", Arguments: map[string]any{"file_path": path}})
		if err != nil {
			t.Fatal(err)
		}
		return resultText(r), r.IsError
	}
	elicit := func(answer string, approve bool) *mcp.ClientOptions {
		return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if !strings.Contains(req.Params.Message, "Read") {
				t.Errorf("the elicitation does not say what it asks about: %q", req.Params.Message)
			}
			return &mcp.ElicitResult{Action: answer, Content: map[string]any{"approve": approve}}, nil
		}}
	}
	p := mcpParams{Policy: dir, Surface: "agent", Workdir: wd}
	if got, isErr := call(mcpClientWith(t, p, elicit("accept", true)), "secret/a"); isErr || !strings.Contains(got, "the secret") {
		t.Errorf("an approved call must run: %v %q", isErr, got)
	}
	if got, isErr := call(mcpClientWith(t, p, elicit("accept", true)), "secret/key"); !isErr || strings.Contains(got, "the key") {
		t.Errorf("a denied call is never asked: %v %q", isErr, got)
	}
	if got, isErr := call(mcpClientWith(t, p, elicit("decline", false)), "secret/a"); !isErr || !strings.Contains(got, "did not approve") {
		t.Errorf("a declined call: %v %q", isErr, got)
	}
	if got, isErr := call(mcpClientWith(t, p, elicit("accept", false)), "secret/a"); !isErr || strings.Contains(got, "the secret") {
		t.Errorf("an accepted form that does not approve: %v %q", isErr, got)
	}
	if got, isErr := call(mcpClient(t, p), "secret/a"); !isErr || !strings.Contains(got, "declares no elicitation") {
		t.Errorf("a client that cannot be asked: %v %q", isErr, got)
	}
}

// TestP14BashKeepsOutOfDeniedAndAskedWrites: a command writes nothing a
// deny or an ask entry of Write or Edit withholds, even where the surface
// may otherwise write: Bash would be a way around them.
func TestP14BashKeepsOutOfDeniedAndAskedWrites(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	for _, d := range []string{"secret", "review", "open"} {
		if err := os.MkdirAll(filepath.Join(wd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Write(./**)", "Bash(touch:*)"]
	"denied-tools": ["Write(./secret/**)"]
	"ask-tools": ["Write(./review/**)"]
}
`)
	replies := runServe(t, []string{"--policy", dir, "--workdir", wd}, nil,
		toolLine("secret", "Bash", map[string]any{"command": "touch secret/x"}),
		toolLine("review", "Bash", map[string]any{"command": "touch review/x"}),
		toolLine("open", "Bash", map[string]any{"command": "touch open/x"}))
	for _, f := range []string{"secret/x", "review/x"} {
		if _, err := os.Stat(filepath.Join(wd, f)); err == nil {
			t.Errorf("Bash wrote %s, which a deny or ask entry of Write withholds: %v", f, replies)
		}
	}
	if _, err := os.Stat(filepath.Join(wd, "open", "x")); err != nil {
		t.Errorf("a write where no entry withholds it: %v", replies[2])
	}
}

// TestP14BashKeepsOutOfDeniedAndAskedReads: a command reads nothing a deny
// or an ask entry of Read withholds (hidden in its sandbox), a directory
// or a file, while it reads what no entry withholds: Bash would be a way
// around them.
func TestP14BashKeepsOutOfDeniedAndAskedReads(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	for f, body := range map[string]string{"secret/x": "SECRET-DIR", "review/x": "REVIEW-DIR", "key.pem": "SECRET-FILE", "open/x": "OPEN-DIR"} {
		if err := os.MkdirAll(filepath.Join(wd, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wd, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read(./**)", "Bash(cat:*)"]
	"denied-tools": ["Read(./secret/**)", "Read(./key.pem)"]
	"ask-tools": ["Read(./review/**)"]
}
`)
	replies := runServe(t, []string{"--policy", dir, "--workdir", wd}, nil,
		toolLine("secret", "Bash", map[string]any{"command": "cat secret/x"}),
		toolLine("review", "Bash", map[string]any{"command": "cat review/x"}),
		toolLine("file", "Bash", map[string]any{"command": "cat key.pem"}),
		toolLine("open", "Bash", map[string]any{"command": "cat open/x"}))
	all := fmt.Sprint(replies)
	for _, s := range []string{"SECRET-DIR", "REVIEW-DIR", "SECRET-FILE"} {
		if strings.Contains(all, s) {
			t.Errorf("Bash read %s, which a deny or ask entry of Read withholds: %v", s, replies)
		}
	}
	if !strings.Contains(all, "OPEN-DIR") {
		t.Errorf("a read where no entry withholds it: %v", replies)
	}
}
