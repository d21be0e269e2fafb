package provision

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/tools"
)

// relayServer builds the in-test server of testdata/relayserver, once.
func relayServer(t testing.TB) string {
	return gobuild.Binary(t, "aimon.dev/gw/internal/runtime/provision/testdata/relayserver")
}

// A recorder is an upstream server of the relay server's tools that keeps
// every frame it receives (and over HTTP, the MCP headers of each POST,
// line for line with frames).
type recorder struct {
	tool    func(name string) *policy.Tool
	frames  func() []map[string]json.RawMessage
	headers func() []string
	again   bool // a server that died is started again (stdio)
}

// stdioRecorder runs the relay server over stdio, env added to its own.
func stdioRecorder(t *testing.T, env map[string]string) recorder {
	bin := relayServer(t)
	file := filepath.Join(t.TempDir(), "frames")
	e := map[string]string{"AIMON_TEST_FRAMES": file}
	for k, v := range env {
		e[k] = v
	}
	return recorder{
		tool: func(name string) *policy.Tool {
			return &policy.Tool{Name: "r__" + name, Upstream: &policy.Upstream{Server: "r", Tool: name, Command: []string{bin}, Env: e, NoPin: true}}
		},
		frames: func() []map[string]json.RawMessage {
			b, _ := os.ReadFile(file)
			return framesOf(t, b)
		},
		again: true,
	}
}

// httpRecorder runs the relay server over streamable HTTP, its own
// process, env added to its own; the server's calls are answered in event
// streams, or in JSON with AIMON_TEST_JSON set.
func httpRecorder(t *testing.T, env map[string]string) recorder {
	dir := t.TempDir()
	frames, headers := filepath.Join(dir, "frames"), filepath.Join(dir, "headers")
	cmd := exec.Command(relayServer(t))
	cmd.Env = append(os.Environ(), "AIMON_TEST_HTTP=1", "AIMON_TEST_FRAMES="+frames, "AIMON_TEST_HEADERS="+headers)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// The server writes its endpoint first, or exits (EOF).
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP relay server did not start: %v", err)
	}
	url = strings.TrimSpace(url)
	return recorder{
		tool: func(name string) *policy.Tool {
			return &policy.Tool{Name: "r__" + name, Upstream: &policy.Upstream{Server: "r", Tool: name, URL: url, NoPin: true}}
		},
		frames: func() []map[string]json.RawMessage {
			b, _ := os.ReadFile(frames)
			return framesOf(t, b)
		},
		headers: func() []string {
			b, _ := os.ReadFile(headers)
			return strings.Split(strings.TrimSpace(string(b)), "\n")
		},
	}
}

// with is env with k set to v.
func with(env map[string]string, k, v string) map[string]string {
	e := map[string]string{k: v}
	for n, x := range env {
		e[n] = x
	}
	return e
}

// transports are the ways an upstream server is reached: stdio, and
// streamable HTTP answering in event streams or in JSON.
var transports = []struct {
	name string
	rec  func(t *testing.T, env map[string]string) recorder
}{
	{"stdio", stdioRecorder},
	{"HTTP events", httpRecorder},
	{"HTTP JSON", func(t *testing.T, env map[string]string) recorder {
		return httpRecorder(t, with(env, "AIMON_TEST_JSON", "1"))
	}},
}

// framesOf reads a stream of JSON-RPC frames into their members.
func framesOf(t *testing.T, b []byte) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		var m map[string]json.RawMessage
		if err := d.Decode(&m); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("a frame the server received is not JSON: %v", err)
		}
		out = append(out, m)
	}
}

// calls are the tools/call frames among frames.
func calls(frames []map[string]json.RawMessage) []map[string]json.RawMessage {
	var out []map[string]json.RawMessage
	for _, f := range frames {
		if string(f["method"]) == `"tools/call"` {
			out = append(out, f)
		}
	}
	return out
}

// paths are the two ways an upstream call goes: the relay, and the SDK's
// client it replaces.
var paths = []struct {
	name string
	sdk  bool
}{{"relay", false}, {"SDK", true}}

// TestR7RelayAndSDKAgree: the same calls, through the relay and through
// the SDK's client, reach the server as the same params, byte for byte
// (the call the gateway decided, with the SDK's _meta), over HTTP with
// the same MCP headers, and come back as the same results, for each shape
// of result (texts, an image, structured content, an error result, a
// JSON-RPC error, one after a request of the server's to the client in
// the middle of the call), on each transport; the relay's frames carry
// its own ids, so the relay was the path.
func TestR7RelayAndSDKAgree(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { relayAndSDKAgree(t, tr.rec) })
	}
	// Stateless, the server speaks 2026-07-28: each request carries the
	// SDK's _meta, and its method and tool name in headers.
	t.Run("HTTP 2026-07-28", func(t *testing.T) {
		relayAndSDKAgree(t, func(t *testing.T, env map[string]string) recorder {
			return httpRecorder(t, with(env, "AIMON_TEST_STATELESS", "1"))
		})
	})
}

func relayAndSDKAgree(t *testing.T, newRecorder func(*testing.T, map[string]string) recorder) {
	inputs := []struct {
		tool string
		in   tools.Input
	}{
		{"echo", tools.Input{"text": "hello <&> \u2028 é \"q\""}},
		{"echo", tools.Input{"text": "x", "extra": []any{1.5, map[string]any{"z": nil, "a": "b"}}}},
		{"two", nil},
		{"image", tools.Input{}},
		{"structured", tools.Input{}},
		{"fails", tools.Input{}},
		{"broken", tools.Input{}},
		{"echo", tools.Input{"text": "after the error"}},
		{"roots", tools.Input{}},
	}
	var results [2][]tools.Result
	var params, headers [2][]string
	for i, p := range paths {
		rec := newRecorder(t, nil)
		up := &Upstreams{sdkCalls: p.sdk}
		defer up.Close()
		for _, c := range inputs {
			r := bind(t, up, rec.tool(c.tool)).Tool.Run(context.Background(), nil, c.in)
			r.Cause = nil
			results[i] = append(results[i], r)
		}
		frames := rec.frames()
		var hs []string
		if rec.headers != nil {
			if hs = rec.headers(); len(hs) != len(frames) {
				t.Fatalf("%s: %d header lines for %d frames", p.name, len(hs), len(frames))
			}
		}
		for k, f := range frames {
			if string(f["method"]) != `"tools/call"` {
				continue
			}
			params[i] = append(params[i], string(f["params"]))
			if hs != nil {
				headers[i] = append(headers[i], hs[k])
			}
			if own := strings.HasPrefix(string(f["id"]), `"`+relayPrefix); own == p.sdk {
				t.Errorf("%s: a call went out under the id %s", p.name, f["id"])
			}
		}
	}
	if !reflect.DeepEqual(params[0], params[1]) {
		t.Errorf("the server received other params:\nrelay %q\n  SDK %q", params[0], params[1])
	}
	if !reflect.DeepEqual(headers[0], headers[1]) {
		t.Errorf("the server received other headers:\nrelay %q\n  SDK %q", headers[0], headers[1])
	}
	if len(params[0]) != len(inputs) {
		t.Errorf("the server received %d calls, want %d", len(params[0]), len(inputs))
	}
	for k := range inputs {
		if !reflect.DeepEqual(results[0][k], results[1][k]) {
			t.Errorf("%s %v:\nrelay %+v\n  SDK %+v", inputs[k].tool, inputs[k].in, results[0][k], results[1][k])
		}
	}
	if r := results[0][6]; !r.IsError || !strings.Contains(r.Text, "broken on purpose") {
		t.Errorf("a JSON-RPC error: %+v", r)
	}
	// The server's request in the middle of the call reached the SDK's
	// client and was answered, where the protocol has such requests.
	if r := results[0][8]; r.Text != "0 roots" && !strings.Contains(r.Text, "cannot be sent while serving a request on protocol version 2026-07-28") {
		t.Errorf("a call that asks the client for its roots: %+v", r)
	}
}

// onPaths runs f on each transport and path, with its own server of env
// and pool.
func onPaths(t *testing.T, env map[string]string, f func(t *testing.T, up *Upstreams, rec recorder)) {
	for _, tr := range transports {
		for _, p := range paths {
			t.Run(tr.name+"/"+p.name, func(t *testing.T) {
				up := &Upstreams{sdkCalls: p.sdk}
				defer up.Close()
				f(t, up, tr.rec(t, env))
			})
		}
	}
}

// eventually reports whether cond holds within 30 seconds, tried again
// and again: for what a server does in its own time.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// TestR4RelayCancelsAtTheServer: a call given up on (its caller gone)
// ends at once with a sentence, and the server is told, under the call's
// own id, as the SDK tells it; the session goes on.
func TestR4RelayCancelsAtTheServer(t *testing.T) {
	onPaths(t, nil, func(t *testing.T, up *Upstreams, rec recorder) {
		slow := bind(t, up, rec.tool("slow"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan tools.Result, 1)
		go func() { done <- slow.Tool.Run(ctx, nil, tools.Input{}) }()
		var id json.RawMessage
		if !eventually(func() bool {
			if cs := calls(rec.frames()); len(cs) > 0 {
				id = cs[0]["id"]
			}
			return id != nil
		}) {
			t.Fatal("the call never reached the server")
		}
		cancel()
		if r := <-done; !r.IsError || !strings.Contains(r.Text, "context canceled") {
			t.Errorf("the cancelled call: %+v", r)
		}
		if !eventually(func() bool {
			for _, f := range rec.frames() {
				var c struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				if string(f["method"]) == `"notifications/cancelled"` && json.Unmarshal(f["params"], &c) == nil && bytes.Equal(c.RequestID, id) {
					return true
				}
			}
			return false
		}) {
			t.Errorf("the server was not told that the call %s was cancelled", id)
		}
		if r := bind(t, up, rec.tool("echo")).Tool.Run(context.Background(), nil, tools.Input{"text": "on"}); r.IsError || r.Text != "on" {
			t.Errorf("the next call: %+v", r)
		}
	})
}

// TestR4RelayAnswerUnderAnotherID: a server that answers a call under
// other ids than the call's (one of the relay's own form it was never
// sent, and one of the SDK's) leaves the call unanswered: it fails at its
// timeout with a sentence, and no answer is taken for another call's;
// over HTTP, where the relay knows that a JSON answer is the only one, at
// once.
func TestR4RelayAnswerUnderAnotherID(t *testing.T) {
	onPaths(t, map[string]string{"AIMON_TEST_OTHERID": "1"}, func(t *testing.T, up *Upstreams, rec recorder) {
		pt := rec.tool("echo")
		// The bound covers the server's start too, which takes more than
		// a moment under load.
		pt.Timeout = 3 * time.Second
		want := "failed the call of echo (context deadline exceeded)"
		if rec.headers != nil && !up.sdkCalls {
			// Over HTTP a JSON answer is the one message the call gets:
			// the relay fails it at once.
			want = "with another message than its response"
		}
		r := bind(t, up, pt).Tool.Run(context.Background(), nil, tools.Input{"text": "hello"})
		if !r.IsError || !strings.Contains(r.Text, want) {
			t.Errorf("a call answered under another id: %+v, want %q", r, want)
		}
	})
}

// TestR4RelayAnswerThatIsNotJSON: a server that answers a call with what
// is not JSON (a line over stdio, a JSON body or an event over HTTP)
// fails the call at once with a sentence, on either path, rather than at
// its timeout.
func TestR4RelayAnswerThatIsNotJSON(t *testing.T) {
	onPaths(t, map[string]string{"AIMON_TEST_GARBAGE": "1"}, func(t *testing.T, up *Upstreams, rec recorder) {
		pt := rec.tool("echo")
		pt.Timeout = time.Minute
		r := bind(t, up, pt).Tool.Run(context.Background(), nil, tools.Input{"text": "hello"})
		if !r.IsError || !strings.Contains(r.Text, "failed the call of echo (") || strings.Contains(r.Text, "deadline exceeded") {
			t.Errorf("a call answered with what is not JSON: %+v", r)
		}
	})
}

// TestR4RelayServerDiesMidCall: a server that exits in the middle of a
// call fails that call with a sentence, on either path and transport, and
// the next call runs on a new process (stdio: over HTTP the server is
// gone).
func TestR4RelayServerDiesMidCall(t *testing.T) {
	onPaths(t, nil, func(t *testing.T, up *Upstreams, rec recorder) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := bind(t, up, rec.tool("die")).Tool.Run(ctx, nil, tools.Input{})
		if !r.IsError || !strings.Contains(r.Text, "failed the call of die") || ctx.Err() != nil {
			t.Errorf("a call whose server died: %+v", r)
		}
		if !rec.again {
			return
		}
		if r := bind(t, up, rec.tool("echo")).Tool.Run(ctx, nil, tools.Input{"text": "again"}); r.IsError || r.Text != "again" {
			t.Errorf("the next call: %+v", r)
		}
	})
}

// TestR8RelayAnswerPastTheBound: an answer past MaxMessage (a line over
// stdio, a JSON body or an event over HTTP) is dropped unread with the
// sentence that says so, on either path, and the server answers the next
// call.
func TestR8RelayAnswerPastTheBound(t *testing.T) {
	onPaths(t, nil, func(t *testing.T, up *Upstreams, rec recorder) {
		r := bind(t, up, rec.tool("big")).Tool.Run(context.Background(), nil, tools.Input{"size": MaxMessage + 1})
		if want := fmt.Sprintf("with more than %d bytes", MaxMessage); !r.IsError || !strings.Contains(r.Text, want) {
			t.Errorf("an answer past the bound: %.300s, want %q", r.Text, want)
		}
		if r := bind(t, up, rec.tool("echo")).Tool.Run(context.Background(), nil, tools.Input{"text": "next"}); r.IsError || r.Text != "next" {
			t.Errorf("the next call: %+v", r)
		}
	})
}

// TestR7HeaderBoundCallsKeepTheSDKsCall: over HTTP at 2026-07-28, a call
// of a tool whose input binds a parameter to a header (x-mcp-header) goes
// through the SDK's client, which sets the header from the definition it
// keeps, and the server gets it; the session's other calls are relayed.
func TestR7HeaderBoundCallsKeepTheSDKsCall(t *testing.T) {
	rec := httpRecorder(t, map[string]string{"AIMON_TEST_STATELESS": "1"})
	up := &Upstreams{}
	defer up.Close()
	if r := bind(t, up, rec.tool("headed")).Tool.Run(context.Background(), nil, tools.Input{"region": "eu"}); r.IsError || r.Text != "eu" {
		t.Fatalf("a header-bound call: %+v", r)
	}
	if r := bind(t, up, rec.tool("echo")).Tool.Run(context.Background(), nil, tools.Input{"text": "x"}); r.IsError || r.Text != "x" {
		t.Fatalf("a call: %+v", r)
	}
	frames, headers := rec.frames(), rec.headers()
	var ids []string
	for k, f := range frames {
		if string(f["method"]) != `"tools/call"` {
			continue
		}
		ids = append(ids, string(f["id"]))
		var h map[string]string
		json.Unmarshal([]byte(headers[k]), &h)
		if strings.Contains(string(f["params"]), `"headed"`) && h["Mcp-Param-Region"] != "eu" {
			t.Errorf("the header-bound call came with the headers %s", headers[k])
		}
	}
	if len(ids) != 2 || strings.HasPrefix(ids[0], `"`+relayPrefix) || !strings.HasPrefix(ids[1], `"`+relayPrefix) {
		t.Errorf("the calls went out under the ids %v: want the SDK's, then the relay's", ids)
	}
}
