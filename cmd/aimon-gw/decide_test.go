package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestR7UpstreamGetsTheDecidedPath: the npm filesystem server, rooted at /,
// behind fs__read_text_file(./**): a relative path is read where it was
// decided (under the working directory), not where the server would take
// it; a "~" path, which neither serve nor MCP defines, is refused; and the
// nulls an OpenAI strict-mode model sends for optional parameters never
// reach the server (issue 26).
func TestR7UpstreamGetsTheDecidedPath(t *testing.T) {
	t.Parallel()
	bin := npmBin(t, "mcp-server-filesystem")
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(wd, "etc", "hostname"), "inside the working directory\n")
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: fs: {command: [%q, "/"], expose: ["read_text_file"]}
tools: fs__read_text_file: {subject: {field: "path", kind: "path"}, effect: "read"}
agent: "allowed-tools": ["fs__read_text_file(./**)"]
validation: "enforce"
`, bin))
	replies := runServe(t, []string{"--policy", dir, "--workdir", wd}, nil,
		toolLine("rel", "fs__read_text_file", map[string]any{"path": "etc/hostname"}),
		toolLine("home", "fs__read_text_file", map[string]any{"path": "~/.bashrc"}),
		toolLine("abs", "fs__read_text_file", map[string]any{"path": "/etc/hostname"}),
		toolLine("nulls", "fs__read_text_file", map[string]any{"path": "etc/hostname", "head": nil, "tail": nil}),
		`{"type":"function_call","call_id":"strict","name":"fs__read_text_file","arguments":"{\"path\":\"etc/hostname\",\"head\":null,\"tail\":null}"}`)
	if r := replies[0]; r["is_error"] != false || !strings.Contains(text(r), "inside the working directory") {
		t.Errorf("a relative path must be read under the working directory it was decided against: %v", r)
	}
	if r := replies[1]; r["is_error"] != true || !strings.Contains(text(r), "does not expand") {
		t.Errorf("a ~ path must be refused: %v", r)
	}
	if r := replies[2]; r["is_error"] != true || !strings.Contains(text(r), "not allowed on this surface") {
		t.Errorf("an absolute path outside the working directory: %v", r)
	}
	if r := replies[3]; r["is_error"] != false || !strings.Contains(text(r), "inside the working directory") {
		t.Errorf("null optional parameters must be removed before the server sees them: %v", r)
	}
	if got := fmt.Sprint(replies[4]["output"]); !strings.Contains(got, "inside the working directory") {
		t.Errorf("a strict-mode function call with nulls: %v", replies[4])
	}
}

// TestR7CheckReadsAsServeReads: check and serve read the same line the
// same way: a misspelt member name and a name given twice are what serve
// says they are, never a call check decides on its own reading.
func TestR7CheckReadsAsServeReads(t *testing.T) {
	t.Parallel()
	bin := gatewayBinary(t)
	for _, tc := range []struct{ note, line, says string }{
		{note: "NAME is not name", line: `{"type":"tool_use","id":"1","NAME":"Read","input":{"file_path":"README.md"}}`, says: "The call names no tool"},
		{note: "name given twice", line: `{"type":"tool_use","id":"1","name":"Read","name":"Echo","input":{"file_path":"README.md"}}`, says: "name"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			serve := exec.Command(bin, "serve")
			serve.Stdin = strings.NewReader(tc.line + "\n")
			served, _ := serve.Output()
			check := exec.Command(bin, "check", tc.line)
			var stdout, stderr bytes.Buffer
			check.Stdout, check.Stderr = &stdout, &stderr
			err := check.Run()
			if err == nil || strings.Contains(stdout.String(), `"allowed": true`) {
				t.Fatalf("check allowed what serve refuses (serve: %s); check: %s%s", served, stdout.String(), stderr.String())
			}
			if !strings.Contains(string(served), tc.says) || !strings.Contains(stdout.String()+stderr.String(), tc.says) {
				t.Errorf("want both to say %q; serve: %s check: %s%s", tc.says, served, stdout.String(), stderr.String())
			}
		})
	}
}

// TestR7EveryCallIsOneRecord: the decision log holds one record per call,
// whatever decided it: a line refused by the surface ceiling (R5), the
// hook's MCP entries and its unknown-tool "ask", and a hook input without
// cwd.
func TestR7EveryCallIsOneRecord(t *testing.T) {
	t.Parallel()
	bin := gatewayBinary(t)
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo", "mcp__github"]
subagents: docs: "allowed-tools": ["Echo"]
claudeCode: unknownTools: "ask"
`)
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	serve := exec.Command(bin, "serve", "--policy", dir, "--surface", "agent,subagent:docs", "--decision-log", log)
	serve.Stdin = strings.NewReader(strings.Join([]string{
		`{"type":"tool_use","id":"r5","name":"Echo","input":{"message":"x"},"surface":["agent"]}`,
		`{"role":"assistant","surface":["agent"],"content":[{"type":"tool_use","id":"r5a","name":"Echo","input":{"message":"x"}},{"type":"tool_use","id":"r5b","name":"Echo","input":{"message":"y"}}]}`,
		`{"type":"tool_use","id":"ok","name":"Echo","input":{"message":"x"}}`,
	}, "\n") + "\n")
	if out, err := serve.CombinedOutput(); err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	cwd := t.TempDir()
	for _, in := range []string{
		`{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"mcp__github__create_issue","tool_input":{},"tool_use_id":"mcp"}`,
		`{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"Frobnicate","tool_input":{},"tool_use_id":"unknown"}`,
		`{"hook_event_name":"PreToolUse","tool_name":"Echo","tool_input":{"message":"x"},"tool_use_id":"nocwd"}`,
	} {
		hook := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off", "--decision-log", log)
		hook.Stdin = strings.NewReader(in)
		if out, err := hook.CombinedOutput(); err != nil {
			t.Fatalf("hook: %v\n%s", err, out)
		}
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if rec["phase"] == "result" {
			continue
		}
		got[fmt.Sprint(rec["call_id"])] = rec
		n++
	}
	want := map[string]string{"r5": "R5", "r5a": "R5", "r5b": "R5", "ok": "P6", "mcp": "P9", "unknown": "P9", "nocwd": "R7"}
	if n != len(want) {
		t.Errorf("%d records, want %d, one per call: %v", n, len(want), got)
	}
	for id, rule := range want {
		if rec, ok := got[id]; !ok || rec["rule"] != rule {
			t.Errorf("call %s: record %v, want one by rule %s", id, rec, rule)
		}
	}
	if got["mcp"]["allowed"] != true || got["unknown"]["allowed"] != false || got["nocwd"]["allowed"] != false {
		t.Errorf("verdicts: mcp %v, unknown %v, nocwd %v", got["mcp"], got["unknown"], got["nocwd"])
	}
}

// TestR7OneMCPRendering: list_tools with format "mcp" lists each tool
// exactly as the MCP server does: title, schemas and annotations.
func TestR7OneMCPRendering(t *testing.T) {
	t.Parallel()
	s := mcpClient(t, mcpParams{Surface: "agent"})
	list, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	served := runServe(t, nil, nil, `{"type":"list_tools","format":"mcp"}`)[0]
	byName := map[string]any{}
	for _, tool := range served["tools"].([]any) {
		byName[tool.(map[string]any)["name"].(string)] = tool
	}
	if len(list.Tools) == 0 || len(byName) != len(list.Tools) {
		t.Fatalf("mcp lists %d tools, list_tools %d", len(list.Tools), len(byName))
	}
	for _, tool := range list.Tools {
		b, _ := json.Marshal(tool)
		var viaMCP any
		json.Unmarshal(b, &viaMCP)
		if !reflect.DeepEqual(viaMCP, byName[tool.Name]) {
			t.Errorf("%s:\n  mcp:        %s\n  list_tools: %v", tool.Name, b, byName[tool.Name])
		}
	}
}

// TestP1MCPEntriesMeanTheSameEverywhere: Claude Code's names of a server's
// tools, mcp__SERVER and mcp__SERVER__TOOL, are entries of the gateway's
// SERVER__TOOL tools under serve as under the hook: the whole server, one
// tool, a pattern on it, and a deny of one tool.
func TestP1MCPEntriesMeanTheSameEverywhere(t *testing.T) {
	t.Parallel()
	bin := fsServer(t)
	root, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(root, "inside", "a.txt"), "hello")
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: fs: {command: [%q], expose: ["write_file", "read_file"], pin: false}
tools: fs__write_file: {subject: {field: "path", kind: "path"}, effect: "write"}
tools: fs__read_file: {subject: {field: "path", kind: "path"}, effect: "read"}
agent: "allowed-tools": ["mcp__fs"]
subagents: reader: "allowed-tools": ["mcp__fs__read_file(%s/inside/**)"]
subagents: nowrite: "denied-tools": ["mcp__fs__write_file"]
`, bin, root))
	in, out := filepath.Join(root, "inside", "a.txt"), filepath.Join(root, "b.txt")
	lines := func(chain string) []map[string]any {
		return runServe(t, []string{"--policy", dir, "--workdir", root, "--surface", chain}, nil,
			`{"type":"list_tools"}`,
			toolLine("r", "fs__read_file", map[string]any{"path": in}),
			toolLine("w", "fs__write_file", map[string]any{"path": out, "content": "x"}))
	}
	agent := lines("agent")
	if list := fmt.Sprint(agent[0]); !strings.Contains(list, "fs__read_file") || !strings.Contains(list, "fs__write_file") {
		t.Errorf("mcp__fs must list every tool of fs: %s", list)
	}
	if agent[1]["is_error"] != false || agent[2]["is_error"] != false {
		t.Errorf("mcp__fs must allow every tool of fs: %v %v", agent[1], agent[2])
	}
	reader := lines("agent,subagent:reader")
	if list := fmt.Sprint(reader[0]); strings.Contains(list, "fs__write_file") {
		t.Errorf("mcp__fs__read_file must list that tool alone: %s", list)
	}
	if reader[1]["is_error"] != false || reader[2]["is_error"] != true {
		t.Errorf("mcp__fs__read_file(pattern): read %v, write %v", reader[1], reader[2])
	}
	nowrite := lines("agent,subagent:nowrite")
	if nowrite[1]["is_error"] != false || nowrite[2]["is_error"] != true || !strings.Contains(text(nowrite[2]), "denied") {
		t.Errorf("a deny of mcp__fs__write_file: read %v, write %v", nowrite[1], nowrite[2])
	}
}
