package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestR2MCPFramesReadAlikeOnEveryTransport: stdio and streamable HTTP read
// an MCP frame with the one reader (issue 47 item 3). A name given twice,
// at the top or deep in the arguments, is refused -32600 with the same
// sentence on both, under the request's own id when that id is given once
// (id null when the id itself is given twice), and is never decided: the
// duplicated name is not read as its last value (over HTTP,
// {"name":"Echo","name":"Read"} was decided as Read), no record is written
// and Bash's command does not run.
func TestR2MCPFramesReadAlikeOnEveryTransport(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	mark := filepath.Join(wd, "ran")
	frames := []struct {
		note, frame string
		id          any // the id the refusal carries
		says        string
	}{
		{"the tool's name twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"Echo","name":"Bash","arguments":{"message":"x","command":"sleep 0; touch ` + mark + `"}}}`, 7.0, `gives the name "name" twice`},
		{"an argument twice", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"Bash","arguments":{"command":"sleep 0","command":"touch ` + mark + `"}},"id":"late"}`, "late", `gives the name "command" twice`},
		{"the id twice", `{"jsonrpc":"2.0","id":9,"id":10,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"x"}}}`, nil, `gives the name "id" twice`},
		{"a batch", `[{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"x"}}}]`, nil, "batch requests are not supported"},
	}

	stdioLog := filepath.Join(t.TempDir(), "stdio.jsonl")
	stdio := startRawMCP(t, "--policy", dir, "--workdir", wd, "--decision-log", stdioLog)
	httpLog := filepath.Join(t.TempDir(), "http.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--decision-log", httpLog)
	for _, tc := range frames {
		stdio.send(tc.frame)
		overStdio := stdio.next()
		status, _, body := g.post("/mcp", "tok-alice", tc.frame)
		var overHTTP map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &overHTTP); err != nil {
			t.Errorf("%s: over HTTP (%d) the answer is not one JSON-RPC response: %q", tc.note, status, body)
			continue
		}
		for transport, m := range map[string]map[string]any{"stdio": overStdio, "HTTP": overHTTP} {
			e, _ := m["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if e == nil || e["code"] != -32600.0 || m["id"] != tc.id || !strings.Contains(msg, tc.says) {
				t.Errorf("%s over %s: answered %v; want -32600 under id %v saying %q", tc.note, transport, m, tc.id, tc.says)
			}
		}
		if overStdio["error"].(map[string]any)["message"] != overHTTP["error"].(map[string]any)["message"] {
			t.Errorf("%s: the transports' sentences differ:\n%v\n%v", tc.note, overStdio, overHTTP)
		}
		if (tc.id == nil) != (status == http.StatusBadRequest) {
			t.Errorf("%s: HTTP status %d; want 400 only for a refusal that answers no id", tc.note, status)
		}
	}
	stdio.send(`{"jsonrpc":"2.0","id":"after","method":"ping"}`)
	if m := stdio.next(); m["id"] != "after" || m["result"] == nil {
		t.Errorf("after the refused frames, ping answered %v", m)
	}
	g.stop()
	if _, err := os.Stat(mark); err == nil {
		t.Error("a refused frame's command ran")
	}
	for _, log := range []string{stdioLog, httpLog} {
		if b, _ := os.ReadFile(log); len(b) != 0 {
			t.Errorf("a refused frame was decided: %s", b)
		}
	}
}
