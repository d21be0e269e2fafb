package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/mcptest"
)

// freeAddr is a local address where nothing listens (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// serveBinary runs the binary's serve with args, one line in and one out,
// until stop is called or the test ends.
func serveBinary(t *testing.T, env []string, args ...string) (s *session, stop func()) {
	t.Helper()
	inR, inW := io.Pipe()
	cmd := exec.Command(gatewayBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = inR
	if f := os.Getenv("AIMON_TEST_SERVE_LOG"); f != "" {
		cmd.Stderr, _ = os.Create(f)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = sync.OnceFunc(func() {
		inW.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	t.Cleanup(stop)
	return &session{t: t, in: inW, out: bufio.NewReader(out)}, stop
}

// downPolicy is a policy with a built-in beside a stdio server whose
// command is missing and an HTTP server where none listens.
func downPolicy(t *testing.T, command, url string) string {
	return moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

servers: gone: {command: [%q], expose: ["read_file"], pin: false}
servers: web: {url: %q, headers: Authorization: "Bearer ${AIMON_TEST_TOKEN}", expose: "*", pin: false}
tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo", "gone__read_file", "web__echo"]
`, command, url))
}

// unavailableServers are the servers the status line says are down.
func unavailableServers(st map[string]any) string {
	var names []string
	list, _ := st["unavailable"].([]any)
	for _, u := range list {
		m, _ := u.(map[string]any)
		names = append(names, fmt.Sprint(m["server"]))
	}
	return strings.Join(names, ",")
}

// TestR4ServerDownWithholdsItsToolsNotTheGateway: a stdio server whose
// command is missing and an HTTP server that is down do not stop serve:
// the built-in answers, the servers' tools are withheld (not listed, and a
// call says the server is unavailable and why), the status line names
// both servers with the reason, and once each answers its tools are
// offered and run (issue 29).
func TestR4ServerDownWithholdsItsToolsNotTheGateway(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	command, addr := filepath.Join(root, "server"), freeAddr(t)
	dir := downPolicy(t, command, "http://"+addr+"/mcp")
	s, stop := serveBinary(t, []string{"AIMON_TEST_TOKEN=s3cret"}, "--policy", dir, "--workdir", dir)
	defer stop() // before the HTTP server stops: it waits for the gateway's stream

	if r := s.send(toolLine("e", "Echo", map[string]any{"message": "hi"})); r["is_error"] != false {
		t.Fatalf("the built-in beside servers that are down: %v", r)
	}
	// The servers are waited for beside the built-in (rule R10): the
	// status names them as not answered yet until each has failed.
	st := s.waitStatus(func(st map[string]any) bool {
		return !strings.Contains(fmt.Sprint(st["unavailable"]), "not answered yet")
	})
	if got := unavailableServers(st); got != "gone,web" {
		t.Fatalf("the status line names %q as unavailable, want gone,web: %v", got, st)
	}
	if why := fmt.Sprint(st["unavailable"]); !strings.Contains(why, "cannot be started") || !strings.Contains(why, "cannot be reached") || !strings.Contains(why, "gone__read_file") {
		t.Errorf("the status line does not say why: %v", st)
	}
	if list := fmt.Sprint(s.send(`{"type":"list_tools"}`)); strings.Contains(list, "gone__read_file") || !strings.Contains(list, "Echo") {
		t.Errorf("list_tools offers a tool of a server that is down: %s", list)
	}
	r := s.send(toolLine("g", "gone__read_file", map[string]any{"path": command}))
	if r["is_error"] != true || !strings.Contains(text(r), "its MCP server gone is unavailable") || !strings.Contains(text(r), "cannot be started") {
		t.Errorf("a call of a tool of a server that is down: %v", r)
	}

	if err := os.Symlink(fsServer(t), command); err != nil {
		t.Fatal(err)
	}
	echo := mcptest.NewEchoAt(t, "s3cret", addr)
	s.waitStatus(func(st map[string]any) bool { return unavailableServers(st) == "" })
	if r := s.send(toolLine("w", "web__echo", map[string]any{"text": "back"})); r["is_error"] != false || text(r) != "echo back" {
		t.Errorf("the HTTP server's tool once it answers: %v", r)
	}
	if got := echo.Got(); len(got) != 1 || got[0] != "back" {
		t.Errorf("the HTTP server received %q", got)
	}
	f := filepath.Join(root, "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	if r := s.send(toolLine("g", "gone__read_file", map[string]any{"path": f})); r["is_error"] != false || text(r) != "hello" {
		t.Errorf("the stdio server's tool once it starts: %v", r)
	}
}

// TestR4OneShotCommandsNeedNoServer: check, vet and the hook load a policy
// whose servers are down and decide (issue 29).
func TestR4OneShotCommandsNeedNoServer(t *testing.T) {
	t.Parallel()
	dir := downPolicy(t, filepath.Join(t.TempDir(), "server"), "http://"+freeAddr(t)+"/mcp")
	cwd := t.TempDir()
	for _, tc := range []struct {
		note  string
		args  []string
		stdin string
		want  string
	}{
		{"check", []string{"check", "--policy", dir, `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}`}, "", "allow"},
		{"vet", []string{"vet", dir}, "", ""},
		{"hook", []string{"hook", "claude-code", "--policy", dir, "--cache", "off"},
			`{"cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"Echo","tool_input":{"message":"x"}}`, `"allow"`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(strings.ToLower(string(out)), tc.want) {
				t.Errorf("%v: %v\n%s", tc.args, err, out)
			}
		})
	}
}

// TestR4MCPOffersAServerThatComesBack: under mcp, a server that is down at
// load has its tools left out of the list; once it starts, the client is
// told the list changed (notifications/tools/list_changed) and the tool is
// in it (issue 29).
func TestR4MCPOffersAServerThatComesBack(t *testing.T) {
	t.Parallel()
	command := filepath.Join(t.TempDir(), "server")
	dir := downPolicy(t, command, "http://"+freeAddr(t)+"/mcp")
	changed := make(chan struct{}, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, mcpParams{Policy: dir, Surface: "agent", Workdir: t.TempDir(), Stdin: inR, Stdout: outW, Log: discard})
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	s, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close(); inW.Close(); cancel(); <-done }()
	if names := toolNames(t, s); names != "Echo" {
		t.Fatalf("tools while the servers are down: %s", names)
	}
	if err := os.Symlink(fsServer(t), command); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(toolNames(t, s), "gone__read_file") {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("the client was not told that the tools changed; tools: %s", toolNames(t, s))
		}
	}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "gone__read_file", Arguments: map[string]any{"path": f}})
	if err != nil || r.IsError || resultText(r) != "hello" {
		t.Errorf("a call once the server started: %v %v", err, r)
	}
}
