package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClient runs serveMCP in process behind the guard transport, on pipes,
// and connects the official Go SDK's client to it.
func mcpClient(t testing.TB, p mcpParams) *mcp.ClientSession {
	t.Helper()
	return mcpClientWith(t, p, nil)
}

// mcpClientWith is mcpClient with the client's options (its elicitation
// handler, say).
func mcpClientWith(t testing.TB, p mcpParams, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return mcpClientIn(t, context.Background(), p, opts)
}

// mcpClientIn is mcpClientWith serving under parent (mcpfront.WithSDKCalls).
func mcpClientIn(t testing.TB, parent context.Context, p mcpParams, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(parent, 60*time.Second)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p.Stdin, p.Stdout, p.Log = inR, outW, discard
	if p.Workdir == "" {
		p.Workdir = t.TempDir()
	}
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, p)
		outW.Close()
	}()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		session.Close()
		inW.Close()
		cancel()
		<-done
	})
	return session
}

func toolNames(t *testing.T, s *mcp.ClientSession) string {
	t.Helper()
	list, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return strings.Join(names, ",")
}

// toolsByName lists the session's tools by name.
func toolsByName(t *testing.T, s *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	list, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		byName[tool.Name] = tool
	}
	return byName
}

func resultText(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].(*mcp.TextContent).Text
}

const mcpPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Glob: schema.#Glob, Read: schema.#Read, Bash: schema.#Bash & {sandbox: mode: "off"}}
validation: "enforce"
agent: "allowed-tools": ["Echo", "Glob", "Read", "Bash"]
subagents: reviewer: {"allowed-tools": ["Read", "Glob", "Echo"], "max-effect": "read"}
`

// TestMCPServesTheSurfacesTools: the tool list is the surface's (rule P9);
// a refusal is a tool error with the gateway's sentence, and a tool the
// surface may not use is "not allowed", not an unknown tool (issue 16).
func TestMCPServesTheSurfacesTools(t *testing.T) {
	t.Parallel()
	s := mcpClient(t, mcpParams{Surface: "agent,subagent:reviewer", Policy: moduleDir(t, mcpPolicy)})
	if got := toolNames(t, s); got != "Echo,Glob,Read" {
		t.Errorf("tools = %s", got)
	}
	if caps := s.InitializeResult().Capabilities; caps.Logging != nil {
		t.Errorf("logging is advertised but never sent: %+v", caps)
	}
	tests := []struct {
		name    string
		args    map[string]any
		text    string
		isError bool
	}{
		{"Echo", map[string]any{"message": "hi ", "times": 2}, "hi hi ", false},
		{"Read", map[string]any{"file_paht": "x"}, "Missing required parameter 'file_path'.", true},
		{"Bash", map[string]any{"command": "true"}, "is not allowed on this surface", true},
		{"Bsah", map[string]any{"command": "true"}, "Unknown tool 'Bsah'.", true},
	}
	for _, tt := range tests {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tt.name, Arguments: tt.args})
		if err != nil {
			t.Fatalf("%s: a protocol error: %v", tt.name, err)
		}
		if text := resultText(res); res.IsError != tt.isError || !strings.Contains(text, tt.text) {
			t.Errorf("%s: got %q (isError %v), want %q (isError %v)", tt.name, text, res.IsError, tt.text, tt.isError)
		}
	}
}

// TestP9MCPUnlistedOnEveryTransport: a call of a tool the surface does not
// list is answered with the gateway's sentence, unknown and not allowed
// told apart, on a transport other than the stdio guard too (the SDK's
// in-memory pair, as a streamable HTTP session would be): the refusal
// lives in the server's receiving middleware, not in the transport.
func TestP9MCPUnlistedOnEveryTransport(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	serverT, clientT := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, mcpParams{Surface: "agent,subagent:reviewer", Policy: moduleDir(t, mcpPolicy), Workdir: t.TempDir(), Log: discard, Transport: serverT})
	}()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, clientT, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close(); cancel(); <-done }()
	for _, tc := range []struct {
		note, name, want string
		args             map[string]any
	}{
		{"a tool the policy defines but the surface may not use", "Bash", "is not allowed on this surface", map[string]any{"command": "true"}},
		{"a tool the policy does not define", "Bsah", "Unknown tool 'Bsah'.", map[string]any{"command": "true"}},
		{"a listed tool still runs", "Echo", "hi", map[string]any{"message": "hi"}},
	} {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tc.name, Arguments: tc.args})
		if err != nil {
			t.Fatalf("%s: a protocol error, not the gateway's answer: %v", tc.note, err)
		}
		if text := resultText(res); !strings.Contains(text, tc.want) || res.IsError != (tc.name != "Echo") {
			t.Errorf("%s: got %q (isError %v), want %q", tc.note, text, res.IsError, tc.want)
		}
	}
}

// TestP13MCPAnnotationsAndStructure: tools carry titles and the annotations
// their side effect gives; Bash and Glob return structured content that
// their output schemas describe, beside the text (issue 16).
func TestP13MCPAnnotationsAndStructure(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, mcpPolicy)
	s := mcpClient(t, mcpParams{Surface: "agent", Policy: dir, Workdir: dir})
	byName := toolsByName(t, s)
	if a := byName["Bash"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint || byName["Bash"].OutputSchema == nil {
		t.Errorf("Bash: %+v", byName["Bash"])
	}
	if a := byName["Read"].Annotations; a == nil || !a.ReadOnlyHint || *a.DestructiveHint || !a.IdempotentHint || byName["Read"].Title != "Read file" {
		t.Errorf("Read: %+v", byName["Read"])
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "echo out; echo err >&2"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(b) != `{"exit_code":0,"stderr":"err\n","stdout":"out\n","timed_out":false}` || !strings.Contains(resultText(res), "Exit code: 0") {
		t.Errorf("Bash result: %s / %q", b, resultText(res))
	}
	res, err = s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Glob", Arguments: map[string]any{"pattern": "*.cue"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"files":["`+filepath.Join(dir, "policy.cue")) {
		t.Errorf("Glob structured: %s", b)
	}
}

// TestMCPFollowsPolicyEdits: the MCP tool list follows a policy edit
// (rule R3) without a new session.
func TestMCPFollowsPolicyEdits(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo", "Glob"]`+"\n")
	s := mcpClient(t, mcpParams{Policy: dir, Surface: "agent"})
	if got := toolNames(t, s); got != "Echo,Glob" {
		t.Fatalf("tools at start: %s", got)
	}
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+`agent: "allowed-tools": ["Glob"]`+"\n")
	deadline := time.Now().Add(30 * time.Second)
	for toolNames(t, s) != "Glob" {
		if time.Now().After(deadline) {
			t.Fatalf("the tool list never followed the edit: %s", toolNames(t, s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawMCP runs the binary's mcp and exchanges raw frames with it.
type rawMCP struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startRawMCP(t *testing.T, args ...string) *rawMCP {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), append([]string{"mcp"}, args...)...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 64<<20)
	r := &rawMCP{t: t, cmd: cmd, in: in, out: sc}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	r.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	r.next()
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawMCP) send(line string) { fmt.Fprintln(r.in, line) }

func (r *rawMCP) next() map[string]any {
	r.t.Helper()
	if !r.out.Scan() {
		r.t.Fatalf("the session ended: %v", r.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(r.out.Bytes(), &m); err != nil {
		r.t.Fatalf("frame %q: %v", r.out.Bytes(), err)
	}
	return m
}

// TestMCPBadFramesDoNotEndTheSession: each bad frame gets its JSON-RPC
// error and the session goes on (issue 16).
func TestMCPBadFramesDoNotEndTheSession(t *testing.T) {
	t.Parallel()
	r := startRawMCP(t, "--max-line-bytes", "4096")
	for _, tc := range []struct {
		frame string
		code  float64
		id    any
	}{
		{`garbage`, -32700, nil},
		{`{"jsonrpc":"2.0","id":5,"method":"tools/list"`, -32700, nil},
		{`[1,2,3]`, -32600, nil},
		{`42`, -32600, nil},
		{`{"id":7,"method":"tools/list"}`, -32600, 7.0},
		{`[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`, -32600, nil},
		{`{"jsonrpc":"2.0","id":9,"method":"x","params":"` + strings.Repeat("x", 5000) + `"}`, -32600, nil},
	} {
		r.send(tc.frame)
		m := r.next()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != tc.code || m["id"] != tc.id {
			t.Errorf("frame %.40s: got %v; want code %v, id %v", tc.frame, m, tc.code, tc.id)
		}
	}
	r.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"alive"}}}`)
	if m := r.next(); m["id"] != 10.0 || !strings.Contains(fmt.Sprint(m["result"]), "alive") {
		t.Errorf("after the bad frames: %v", m)
	}
}

// TestMCPCancelledCallIsNotAnswered: a cancelled request gets no response,
// and its command is killed (issue 16).
func TestMCPCancelledCallIsNotAnswered(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, mcpPolicy)
	r := startRawMCP(t, "--policy", dir, "--workdir", dir)
	r.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"Bash","arguments":{"command":"sleep 32.25"}}}`)
	waitStarted(t, "32.25")
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}`)
	waitGone(t, "32.25")
	r.send(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`)
	if m := r.next(); m["id"] != "ping" {
		t.Errorf("the first frame after a cancellation answers %v; the cancelled call must get none", m)
	}
}

// TestMCPUndeclaredSurfaceExits2: the same surface serve and check refuse.
func TestMCPUndeclaredSurfaceExits2(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(gatewayBinary(t), "mcp", "--surface", "agent,subagent:nope")
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), `"subagent:nope" is not declared`) {
		t.Errorf("exit %d: %s", cmd.ProcessState.ExitCode(), out)
	}
}

func TestUnknownCommandExits2(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(gatewayBinary(t), "nosuch")
	cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Errorf("an unknown command exits %d, want 2", code)
	}
}
