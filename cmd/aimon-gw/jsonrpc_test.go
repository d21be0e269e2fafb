package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestR2MCPOddIDsGetAnErrorWithASentence: a request whose id JSON-RPC does
// not allow gets one error, with id null and a sentence that names no Go
// type, and the session goes on (issue 33).
func TestR2MCPOddIDsGetAnErrorWithASentence(t *testing.T) {
	t.Parallel()
	r := startRawMCP(t)
	for _, tc := range []struct {
		note, id, want string
	}{
		{"a null id would be read as a notification's and never answered", `null`, `the request's "id" is null; give each request a string or an integer id`},
		{"an object", `{"a":1}`, `the id {"a":1} is neither a string nor an integer`},
		{"an array", `[1]`, `the id [1] is neither a string nor an integer`},
		{"a boolean", `true`, `the id true is neither a string nor an integer`},
		{"a fraction would be answered as its integer part", `1.5`, `the id 1.5 is not an integer within ±2^53`},
		{"an integer a float cannot keep", `9007199254740993`, `the id 9007199254740993 is not an integer within ±2^53`},
	} {
		r.send(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"tools/list"}`)
		m := r.next()
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if e == nil || e["code"] != -32600.0 || m["id"] != nil || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: id %s answered %v; want -32600, id null, %q", tc.note, tc.id, m, tc.want)
		}
		for _, leak := range []string{"map[", "interface", "float64", "[]"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the sentence names a Go type (%s): %s", tc.note, leak, msg)
			}
		}
	}
	r.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	if m := r.next(); m["id"] != "after" || m["result"] == nil {
		t.Errorf("after the odd ids, ping answered %v", m)
	}
}

// TestR2MCPReusedIDInFlightIsAnswered: a request that reuses the id of one
// not answered yet gets an error under that id, never silence; the first
// request keeps its own answer (here: none, as it is cancelled).
func TestR2MCPReusedIDInFlightIsAnswered(t *testing.T) {
	// Not parallel: the first call's process gone is not yet its id freed,
	// and under the load of parallel tests the ping came in between.
	dir := moduleDir(t, mcpPolicy)
	r := startRawMCP(t, "--policy", dir, "--workdir", dir)
	r.sleep("dup", "33.75")
	r.send(`{"jsonrpc":"2.0","id":"dup","method":"tools/list"}`)
	m := r.next()
	e, _ := m["error"].(map[string]any)
	if e == nil || m["id"] != "dup" || !strings.Contains(e["message"].(string), `the request id "dup" is already in use by a request that has not been answered yet`) {
		t.Errorf("the reused id was answered %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"dup"}}`)
	waitGone(t, "33.75")
	// Once the first is done, the id is free again. Its process gone is
	// not yet its handler returned, and a cancelled request is never
	// answered, so until then the id is still in use, and said to be.
	for deadline := time.Now().Add(20 * time.Second); ; {
		r.send(`{"jsonrpc":"2.0","id":"dup","method":"ping"}`)
		m := r.next()
		if m["id"] == "dup" && m["result"] != nil {
			break
		}
		e, _ := m["error"].(map[string]any)
		if msg, _ := e["message"].(string); !strings.Contains(msg, "already in use") || time.Now().After(deadline) {
			t.Fatalf("the id, free again, answered %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestR2MCPAnswersEveryRequestBeforeTheEnd: a client that writes its
// requests and closes its side gets every answer, the last request's too
// when it has no newline.
func TestR2MCPAnswersEveryRequestBeforeTheEnd(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"one"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n")
	cmd := exec.Command(gatewayBinary(t), "mcp", "--log-level", "error")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	ids := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct{ ID json.RawMessage }
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("frame %s: %v", sc.Bytes(), err)
		}
		ids[string(m.ID)]++
	}
	want := map[string]int{"0": 1, "1": 1, "2": 1, "null": 1, "3": 1}
	if len(ids) != len(want) {
		t.Errorf("answers by id: %v; want one each of %v", ids, want)
	}
	for id, n := range want {
		if ids[id] != n {
			t.Errorf("id %s answered %d times, want %d (all: %v)", id, ids[id], n, ids)
		}
	}
}

// TestR5UndeclaredSurfaceIsRefusedAtStart: serve and mcp refuse a surface
// the policy does not declare before they read a call, with the same
// sentence and exit 2; mcp also answers the client's initialize with it,
// so that a client (the MCP Inspector) shows why (issue 33).
func TestR5UndeclaredSurfaceIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	const sentence = `: the surface "subagent:nobody" is not declared in the policy; declared surfaces are agent; give --surface a chain the policy declares.`
	initialize := `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}` + "\n"
	for _, tc := range []struct {
		note, command, stdin string
		stdout               string // the message of the JSON-RPC error, when there is one
	}{
		{"serve refuses before the first line", "serve", `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"x"}}` + "\n", ""},
		{"mcp answers initialize with the sentence", "mcp", initialize, "aimon-gw mcp" + sentence},
	} {
		cmd := exec.Command(gatewayBinary(t), tc.command, "--log-level", "error", "--surface", "agent,subagent:nobody")
		cmd.Stdin = strings.NewReader(tc.stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != 2 {
			t.Errorf("%s: exit %d, want 2", tc.note, code)
		}
		if want := "aimon-gw " + tc.command + sentence + "\n"; stderr.String() != want {
			t.Errorf("%s: stderr %q, want %q", tc.note, stderr.String(), want)
		}
		if tc.stdout == "" {
			if stdout.Len() > 0 {
				t.Errorf("%s: stdout %q, want nothing", tc.note, stdout.String())
			}
			continue
		}
		var answer struct {
			ID    string
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal([]byte(stdout.String()), &answer); err != nil || answer.ID != "init" || answer.Error.Code != -32000 || answer.Error.Message != tc.stdout {
			t.Errorf("%s: stdout %q (%v), want the error %q for id init", tc.note, stdout.String(), err, tc.stdout)
		}
	}
}

// sleep starts a Bash call of sleep under the request id and waits until
// it runs; the seconds mark its process.
func (r *rawMCP) sleep(id, seconds string) {
	r.send(`{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"Bash","arguments":{"command":"sleep ` + seconds + `"}}}`)
	waitStarted(r.t, seconds)
}

// TestR7MCPCancelledCallsAreRecorded: a tools/call the client cancels at
// once may be dropped by the SDK before any handler sees it; it ran
// nothing, and the decision log still holds one record for it, as for
// every call (rule R7): as many records as calls, whichever ran.
func TestR7MCPCancelledCallsAreRecorded(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	const calls = 40
	lines := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for i := 1; i <= calls; i++ {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"m%d"}}}`, i, i),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, i))
	}
	cmd := exec.Command(gatewayBinary(t), "mcp", "--log-level", "error", "--cache", "off", "--decision-log", log)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	records := strings.Count(string(data), "\n") - strings.Count(string(data), `"phase":"result"`)
	if records != calls {
		t.Errorf("%d decision-log records for %d calls:\n%s", records, calls, data)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Tool    string
			Allowed bool
			Rule    string
		}
		if strings.Contains(l, `"phase":"result"`) {
			continue
		}
		if json.Unmarshal([]byte(l), &r) != nil || r.Tool != "Echo" || !r.Allowed && r.Rule != "R2" {
			t.Errorf("record %s: want Echo, allowed or cancelled before it ran (R2)", l)
		}
	}
}
