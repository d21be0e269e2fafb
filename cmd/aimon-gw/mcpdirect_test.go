package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/front/mcpfront"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/testkit/policydir"
)

const relayServerPkg = "aimon.dev/gw/internal/runtime/provision/testdata/relayserver"

// records is a session's decision log, a file (set up by startMCPLog) with
// detail (none by default) the detail a --decision-log-calls file records.
type records struct {
	detail gateway.DecisionLogOptions
	path   string
}

// open opens the file of the log in a new directory.
func (r *records) open(t *testing.T) *gateway.DecisionLog {
	t.Helper()
	r.path = filepath.Join(t.TempDir(), "decisions.jsonl")
	l, err := gateway.OpenDecisionLog(r.path, r.detail)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// lines are the records as JSON, without what differs from run to run.
func (r *records) lines() []string {
	data, _ := os.ReadFile(r.path)
	var out []string
	for line := range strings.Lines(string(data)) {
		var rec decisionlog.Record
		json.Unmarshal([]byte(line), &rec)
		rec.Time, rec.DurationMS = time.Time{}, 0
		b, _ := json.Marshal(rec)
		out = append(out, string(b))
	}
	return out
}

// mcpSession runs mcp in this process over pipes, with every tools/call
// left to the SDK's server or not, and sends it frames one at a time.
type mcpSession struct {
	in   io.WriteCloser
	out  *bufio.Reader
	done chan error
	log  *records
}

// startMCP serves the policy of dir in the working directory wd.
func startMCP(t *testing.T, dir, wd string, sdkCalls bool) *mcpSession {
	return startMCPLog(t, dir, wd, sdkCalls, &records{})
}

// startMCPLog is startMCP recording its decisions in log.
func startMCPLog(t *testing.T, dir, wd string, sdkCalls bool, log *records) *mcpSession {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &mcpSession{in: inW, out: bufio.NewReader(outR), done: make(chan error, 1), log: log}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if sdkCalls {
		ctx = mcpfront.WithSDKCalls(ctx)
	}
	dlog := log.open(t)
	go func() {
		err := serveMCP(ctx, mcpParams{Policy: dir, Surface: "agent", Workdir: wd, Stdin: inR, Stdout: outW, Log: discard, LoadTimeout: time.Minute, Decisions: dlog})
		s.done <- err
		inR.CloseWithError(fmt.Errorf("mcp has returned: %v", err))
		outW.Close()
	}()
	return s
}

// send writes frame and returns the answer; a notification has none.
// The server's notifications (tools/list_changed after a load) are
// skipped: they come when they come.
func (s *mcpSession) send(t *testing.T, frame string) string {
	t.Helper()
	if _, err := io.WriteString(s.in, frame+"\n"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(frame, `"id"`) {
		return ""
	}
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to %s: %v", frame, err)
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != nil {
			return strings.TrimSpace(line)
		}
	}
}

// end closes the session's input and waits for mcp to return, reading
// what it still writes.
func (s *mcpSession) end(t *testing.T) {
	t.Helper()
	go io.Copy(io.Discard, s.out)
	s.in.Close()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		buf := make([]byte, 1<<20)
		t.Fatalf("mcp did not return a minute after its input ended:\n%s", buf[:runtime.Stack(buf, true)])
	}
}

// TestR7MCPDirectAndSDKAnswerAlike: the same frames, through the front
// end that answers a tools/call from the frame it read once and through
// the SDK's server alone, get the same answers byte for byte, reach the
// upstream as the same frames, and leave the same decision log, under a
// protocol before 2026-07-28 and under 2026-07-28 (whose requests carry
// their _meta): upstream tools, unlisted ones, a refused
// input, missing and null arguments, odd ids and escaped names, and calls
// the guard leaves to the SDK (a retry's request state, an unknown
// member, a _meta the SDK refuses).
func TestR7MCPDirectAndSDKAnswerAlike(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "frames")
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": fmt.Sprintf(`package policy

servers: r: {command: [%q], env: AIMON_TEST_FRAMES: %q, expose: ["echo", "two", "image", "structured", "fails", "broken"], pin: false}
agent: "allowed-tools": ["r__echo", "r__two", "r__image", "r__structured", "r__fails", "r__broken"]
`, binary(t, relayServerPkg), got)})
	for _, version := range []string{"2025-06-18", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			meta := ""
			if version >= "2026-07-28" {
				meta = `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
			}
			call := func(id, params string) string {
				return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{` + params + meta + `}}`
			}
			frames := []string{
				`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				// A listing waits for the upstream (the first load does
				// not): every call after is decided on its listed tools,
				// as both paths answer a call the same way only then.
				`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`,
				call(`1`, `"name":"r__echo","arguments":{"text":"hello <&> \u2028 é"}`),
				call(`"a"`, `"arguments":{"text":"args first"},"name":"r__echo"`),
				call(`"\u0033"`, `"name":"r\u005f_two"`),
				call(`4`, `"name":"r__image","arguments":null`),
				call(`5`, `"name":"r__structured","arguments":{}`),
				call(`6`, `"name":"r__fails","arguments":{}`),
				call(`7`, `"name":"r__broken","arguments":{}`),
				call(`8`, `"name":"r__echo","arguments":{"text":5}`),
				call(`9`, `"name":"nope__tool","arguments":{}`),
				call(`10`, `"name":"Read","arguments":{"file_path":"`+dir+`/f.txt"}`),
				`{"jsonrpc":"2.0","id":15,"method":"tools/list"}`,
				call(`11`, `"name":"r__echo","arguments":{"text":"x"},"requestState":"not a token"`),
				call(`12`, `"name":"r__echo","arguments":{"text":"x"},"extra":1`),
				`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"r__echo","arguments":{"text":"bad meta"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5}}}`,
				call(`14`, `"name":"r__echo","arguments":{"text":"after"}`),
			}
			var answers [2][]string
			var received [2][]string
			var logs [2][]string
			var direct [2]int64
			for i, sdk := range []bool{false, true} {
				os.Remove(got)
				s := startMCP(t, dir, dir, sdk)
				before := mcpfront.DirectCalls.Load()
				for _, f := range frames {
					answers[i] = append(answers[i], s.send(t, f))
				}
				direct[i] = mcpfront.DirectCalls.Load() - before
				s.end(t)
				b, _ := os.ReadFile(got)
				for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
					var m map[string]json.RawMessage
					if json.Unmarshal([]byte(line), &m) == nil && string(m["method"]) == `"tools/call"` {
						received[i] = append(received[i], string(m["params"]))
					}
				}
				logs[i] = s.log.lines()
			}
			for k := range frames {
				if answers[0][k] != answers[1][k] {
					t.Errorf("%s\n  direct %s\n     SDK %s", frames[k], answers[0][k], answers[1][k])
				}
			}
			if strings.Join(received[0], "\n") != strings.Join(received[1], "\n") || len(received[0]) < 6 {
				t.Errorf("the upstream received other calls:\ndirect %s\n   SDK %s", received[0], received[1])
			}
			if strings.Join(logs[0], "\n") != strings.Join(logs[1], "\n") {
				t.Errorf("the decision logs differ:\ndirect %s\n   SDK %s", strings.Join(logs[0], "\n"), strings.Join(logs[1], "\n"))
			}
			if direct[0] != 11 || direct[1] != 0 {
				t.Errorf("the guard answered %d calls itself (the SDK path %d), want 11 (and 0): every plain call", direct[0], direct[1])
			}
		})
	}
}

// TestP15MCPDirectElicitsApproval: an asked call of a client before
// 2026-07-28 that the guard answers itself is elicited as the SDK's
// multi-round-trip middleware elicits it, and runs once the person
// approves; the elicitation and the answers are the SDK path's, byte for
// byte, and a decline runs nothing.
func TestP15MCPDirectElicitsApproval(t *testing.T) {
	dir, wd := askSetup(t)
	for _, c := range []struct {
		answer, want string
	}{
		{`{"action":"accept","content":{"approve":true}}`, "the secret"},
		{`{"action":"decline"}`, "did not approve it (decline)"},
	} {
		var frames [2][]string
		for i, sdk := range []bool{false, true} {
			s := startMCP(t, dir, wd, sdk)
			s.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
			s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			before := mcpfront.DirectCalls.Load()
			ask := s.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Read","arguments":{"file_path":"secret/a"}}}`)
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal([]byte(ask), &req) != nil || req.Method != "elicitation/create" {
				t.Fatalf("sdk %v: the asked call was answered %s, want an elicitation", sdk, ask)
			}
			answer := s.send(t, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+c.answer+`}`)
			if !strings.Contains(answer, c.want) || !strings.Contains(answer, `"id":1`) {
				t.Errorf("sdk %v: after %s: %s, want %q", sdk, c.answer, answer, c.want)
			}
			if took := mcpfront.DirectCalls.Load() - before; took != map[bool]int64{false: 1, true: 0}[sdk] {
				t.Errorf("sdk %v: the guard answered %d calls itself", sdk, took)
			}
			frames[i] = []string{ask, answer}
			s.end(t)
		}
		if frames[0][0] != frames[1][0] || frames[0][1] != frames[1][1] {
			t.Errorf("the paths differ:\ndirect %q\n   SDK %q", frames[0], frames[1])
		}
	}
}

// TestR2MCPCancelledUpstreamCallReachesTheServer: a client's cancellation
// of an upstream call through mcp, on either path, reaches the upstream
// server as a cancellation of the call it received, under that call's id;
// the cancelled call is not answered, decided once, and the session goes
// on.
func TestR2MCPCancelledUpstreamCallReachesTheServer(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "frames")
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": fmt.Sprintf(`package policy

servers: r: {command: [%q], env: AIMON_TEST_FRAMES: %q, expose: ["slow"], pin: false}
agent: "allowed-tools": ["r__slow"]
`, binary(t, relayServerPkg), got)})
	upstream := func(method string) []map[string]json.RawMessage {
		b, _ := os.ReadFile(got)
		var out []map[string]json.RawMessage
		for _, line := range strings.Split(string(b), "\n") {
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(line), &m) == nil && string(m["method"]) == `"`+method+`"` {
				out = append(out, m)
			}
		}
		return out
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s did not happen within 30s", what)
			}
		}
	}
	for _, sdk := range []bool{false, true} {
		os.Remove(got)
		s := startMCP(t, dir, dir, sdk)
		s.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		// Not send: the call gets no answer.
		io.WriteString(s.in, `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"r__slow","arguments":{}}}`+"\n")
		var id json.RawMessage
		eventually("the call's reaching the upstream", func() bool {
			if cs := upstream("tools/call"); len(cs) > 0 {
				id = cs[0]["id"]
			}
			return id != nil
		})
		s.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow","reason":"test"}}`)
		eventually("the upstream's being told of the cancellation", func() bool {
			for _, c := range upstream("notifications/cancelled") {
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				if json.Unmarshal(c["params"], &p) == nil && string(p.RequestID) == string(id) {
					return true
				}
			}
			return false
		})
		if answer := s.send(t, `{"jsonrpc":"2.0","id":"ping","method":"ping"}`); !strings.Contains(answer, `"id":"ping"`) {
			t.Errorf("sdk %v: the first answer after the cancellation is %s; the cancelled call must get none", sdk, answer)
		}
		s.end(t)
		if n := strings.Count(strings.Join(s.log.lines(), "\n"), `"phase":"running","call_id":"mcp_1","tool":"r__slow"`); n != 1 {
			t.Errorf("sdk %v: the cancelled call was decided %d times, want once:\n%s", sdk, n, strings.Join(s.log.lines(), "\n"))
		}
	}
}

// TestP18MCPDirectWritesTheRedactedResult: under a policy whose label
// redacts a token, an upstream result that holds one reaches the client
// redacted on the guard's path, whose answer is written straight from the
// decision's text (not from the upstream's bytes), byte for byte as the
// SDK's path answers it; the session is labelled, the decision log's
// records are the SDK path's, and a clean result is written straight too.
func TestP18MCPDirectWritesTheRedactedResult(t *testing.T) {
	dir := t.TempDir()
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": fmt.Sprintf(`package policy

servers: r: {command: [%q], expose: ["echo"], pin: false}
labels: secret: {content: ["aws-access-key"], redact: true}
agent: "allowed-tools": ["r__echo"]
`, binary(t, relayServerPkg))})
	const token = "AKIAIOSFODNN7EXAMPLE"
	frames := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"list","method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"r__echo","arguments":{"text":"key AWS_ACCESS_KEY_ID=` + token + ` <&>"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"r__echo","arguments":{"text":"clean"}}}`,
	}
	var answers, logs [2][]string
	var plain [2]int64
	for i, sdk := range []bool{false, true} {
		s := startMCPLog(t, dir, dir, sdk, &records{detail: gateway.DecisionLogOptions{Calls: true}})
		before := mcpfront.PlainResults.Load()
		for _, f := range frames {
			answers[i] = append(answers[i], s.send(t, f))
		}
		plain[i] = mcpfront.PlainResults.Load() - before
		s.end(t)
		logs[i] = s.log.lines()
	}
	for k := range frames {
		if answers[0][k] != answers[1][k] {
			t.Errorf("%s\n  direct %s\n     SDK %s", frames[k], answers[0][k], answers[1][k])
		}
	}
	if got := answers[0][3]; strings.Contains(got, token) || !strings.Contains(got, `AWS_ACCESS_KEY_ID=[redacted aws-access-key] \u003c\u0026\u003e`) {
		t.Errorf("the upstream's token reached the client, or not as redacted: %s", got)
	}
	if got := answers[0][4]; !strings.Contains(got, `"text":"clean"`) {
		t.Errorf("the clean call was answered %s", got)
	}
	// Each session is named afresh; the rest is the SDK path's.
	named := regexp.MustCompile(`"session":"[0-9a-f]+"`)
	if a, b := named.ReplaceAllString(strings.Join(logs[0], "\n"), `"session":""`), named.ReplaceAllString(strings.Join(logs[1], "\n"), `"session":""`); a != b {
		t.Errorf("the decision logs differ:\ndirect %s\n   SDK %s", a, b)
	}
	// The Result record of the call that read the token: labelled, and
	// the digest of the redacted text the client got.
	sum := sha256.Sum256([]byte("key AWS_ACCESS_KEY_ID=[redacted aws-access-key] <&>"))
	if log := strings.Join(logs[0], "\n"); !strings.Contains(log, `"labels":["secret"],"text_sha256":"sha256:`+hex.EncodeToString(sum[:])+`"`) {
		t.Errorf("no Result record of the call that read the token, labelled, with the redacted text's digest:\n%s", log)
	}
	if plain[0] != 2 || plain[1] != 0 {
		t.Errorf("%d results written straight on the guard's path (the SDK's %d), want 2 (and 0)", plain[0], plain[1])
	}
}
