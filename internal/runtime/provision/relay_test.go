package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
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
// every frame it receives.
type recorder struct {
	tool   func(name string) *policy.Tool
	frames func() []map[string]json.RawMessage
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
	}
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
// (the call the gateway decided, with the SDK's _meta), and come back as
// the same results, for each shape of result (texts, an image, structured
// content, an error result, a JSON-RPC error); the relay's frames carry
// its own ids, so the relay was the path.
func TestR7RelayAndSDKAgree(t *testing.T) {
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
	}
	var results [2][]tools.Result
	var params [2][]string
	for i, p := range paths {
		rec := stdioRecorder(t, nil)
		up := &Upstreams{sdkCalls: p.sdk}
		defer up.Close()
		for _, c := range inputs {
			r := bind(t, up, rec.tool(c.tool)).Tool.Run(context.Background(), nil, c.in)
			r.Cause = nil
			results[i] = append(results[i], r)
		}
		for _, f := range calls(rec.frames()) {
			params[i] = append(params[i], string(f["params"]))
			if own := strings.HasPrefix(string(f["id"]), `"`+relayPrefix); own == p.sdk {
				t.Errorf("%s: a call went out under the id %s", p.name, f["id"])
			}
		}
	}
	if !reflect.DeepEqual(params[0], params[1]) {
		t.Errorf("the server received other params:\nrelay %q\n  SDK %q", params[0], params[1])
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
}

// onPaths runs f on each path, with its own server of env and pool.
func onPaths(t *testing.T, env map[string]string, f func(t *testing.T, up *Upstreams, rec recorder)) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			up := &Upstreams{sdkCalls: p.sdk}
			defer up.Close()
			f(t, up, stdioRecorder(t, env))
		})
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
// timeout with a sentence, and no answer is taken for another call's.
func TestR4RelayAnswerUnderAnotherID(t *testing.T) {
	onPaths(t, map[string]string{"AIMON_TEST_OTHERID": "1"}, func(t *testing.T, up *Upstreams, rec recorder) {
		pt := rec.tool("echo")
		// The bound covers the server's start too, which takes more than
		// a moment under load.
		pt.Timeout = 3 * time.Second
		r := bind(t, up, pt).Tool.Run(context.Background(), nil, tools.Input{"text": "hello"})
		if !r.IsError || !strings.Contains(r.Text, "failed the call of echo (context deadline exceeded)") {
			t.Errorf("a call answered under another id: %+v", r)
		}
	})
}

// TestR4RelayServerDiesMidCall: a server that exits in the middle of a
// call fails that call with a sentence, on either path, and the next call
// runs on a new process.
func TestR4RelayServerDiesMidCall(t *testing.T) {
	onPaths(t, nil, func(t *testing.T, up *Upstreams, rec recorder) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := bind(t, up, rec.tool("die")).Tool.Run(ctx, nil, tools.Input{})
		if !r.IsError || !strings.Contains(r.Text, "failed the call of die") || ctx.Err() != nil {
			t.Errorf("a call whose server died: %+v", r)
		}
		if r := bind(t, up, rec.tool("echo")).Tool.Run(ctx, nil, tools.Input{"text": "again"}); r.IsError || r.Text != "again" {
			t.Errorf("the next call: %+v", r)
		}
	})
}
