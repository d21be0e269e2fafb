package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/policydir"
)

func bashPolicy(t *testing.T) string {
	dir := t.TempDir()
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
`})
	return dir
}

// exits waits for cmd to end within d.
func exits(t *testing.T, cmd *exec.Cmd, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		t.Fatalf("%s did not exit within %s of SIGTERM", cmd.Args[1], d)
	}
}

// TestR2SIGTERMStopsServe: SIGTERM stops reading, cancels the running
// call, which still gets its one result, and serve exits within seconds.
func TestR2SIGTERMStopsServe(t *testing.T) {
	t.Parallel()
	dir := bashPolicy(t)
	cmd := exec.Command(gatewayBinary(t), "serve", "--policy", dir, "--workdir", dir)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, bashLine("long", "sleep 30.25"))
	waitStarted(t, "30.25")
	cmd.Process.Signal(syscall.SIGTERM)
	// A line sent after the signal is not read.
	fmt.Fprintln(in, bashLine("after", "true"))
	var replies []map[string]any
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		replies = append(replies, m)
	}
	exits(t, cmd, 5*time.Second)
	if len(replies) != 1 || replies[0]["tool_use_id"] != "long" || replies[0]["is_error"] != true || !strings.Contains(text(replies[0]), "cancelled") {
		t.Errorf("replies after SIGTERM = %v; want the running call's cancelled result only", replies)
	}
	waitGone(t, "30.25")
}

// TestR2SIGTERMStopsMCP: the same for mcp with a call in flight.
func TestR2SIGTERMStopsMCP(t *testing.T) {
	t.Parallel()
	dir := bashPolicy(t)
	cmd := exec.Command(gatewayBinary(t), "mcp", "--policy", dir, "--workdir", dir)
	in, _ := cmd.StdinPipe()
	cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Bash","arguments":{"command":"sleep 31.25"}}}`,
	} {
		fmt.Fprintln(in, l)
	}
	waitStarted(t, "31.25")
	cmd.Process.Signal(syscall.SIGTERM)
	exits(t, cmd, 5*time.Second)
	waitGone(t, "31.25")
}
