package provision

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestR4StdioReadsEachMessage: the stdio transport reads what the SDK's
// reads, one message after another on one decoder, whatever the lines;
// what is not a JSON-RPC message, or is past the bound, ends the session
// with an error that says so (the call in flight fails, rule R4, and one
// past the bound is told apart, rule R8).
func TestR4StdioReadsEachMessage(t *testing.T) {
	req := func(id any, method, params string) jsonrpc.Message {
		i, _ := jsonrpc.MakeID(id)
		return &jsonrpc.Request{ID: i, Method: method, Params: json.RawMessage(params)}
	}
	resp := func(id any, result string, err error) jsonrpc.Message {
		i, _ := jsonrpc.MakeID(id)
		r := &jsonrpc.Response{ID: i, Result: json.RawMessage(result)}
		if err != nil {
			r.Error = err
		}
		return r
	}
	for _, c := range []struct {
		note   string
		stream string
		want   []jsonrpc.Message
		err    string // the error after the messages; "" for the end of input
	}{
		{note: "one a line", stream: `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n",
			want: []jsonrpc.Message{resp(1.0, `{"content":[]}`, nil), req(nil, "notifications/tools/list_changed", "")}},
		{note: "two on one line, one over three, CRLF", stream: "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"ping\"} {\"jsonrpc\":\"2.0\",\"id\":2,\r\n \"result\":{}\r\n}\r\n",
			want: []jsonrpc.Message{req("a", "ping", ""), resp(2.0, `{}`, nil)}},
		{note: "an error response", stream: `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad","data":{"x":1}}}`,
			want: []jsonrpc.Message{resp(3.0, "", &jsonrpc.Error{Code: -32602, Message: "bad", Data: json.RawMessage(`{"x":1}`)})}},
		{note: "lenient as the SDK: a name twice, text not UTF-8", stream: "{\"jsonrpc\":\"2.0\",\"id\":4,\"id\":5,\"result\":{\"text\":\"\xff\"}}",
			want: []jsonrpc.Message{resp(5.0, "{\"text\":\"\xff\"}", nil)}},
		{note: "bad: not JSON, after a good one", stream: `{"jsonrpc":"2.0","id":1,"result":{}}` + "\nhello\n",
			want: []jsonrpc.Message{resp(1.0, `{}`, nil)}, err: "not a JSON-RPC message"},
		{note: "bad: no version", stream: `{"id":1,"result":{}}`, err: `without "jsonrpc": "2.0"`},
		{note: "bad: a response without id", stream: `{"jsonrpc":"2.0","result":{}}`, err: "without an id"},
		{note: "bad: an id that is an object", stream: `{"jsonrpc":"2.0","id":{},"result":{}}`, err: "neither a string nor a number"},
		{note: "bad: cut short", stream: `{"jsonrpc":"2.0","id":1,"res`, err: "not a JSON-RPC message"},
		{note: "bad: past the bound", stream: `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("x", 300) + `"}}`, err: "longer than 256 bytes"},
	} {
		t.Run(c.note, func(t *testing.T) {
			conn := newStdioConn(nil, strings.NewReader(c.stream), nil, 0, 256)
			for i, want := range c.want {
				got, err := conn.Read(context.Background())
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				gb, _ := jsonrpc.EncodeMessage(got)
				wb, _ := jsonrpc.EncodeMessage(want)
				if string(gb) != string(wb) {
					t.Errorf("message %d:\n got %s\nwant %s", i, gb, wb)
				}
			}
			_, err := conn.Read(context.Background())
			switch {
			case c.err == "" && err != io.EOF:
				t.Errorf("at the end: %v, want io.EOF", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want one that says %q", err, c.err)
			case strings.Contains(c.note, "bound") && !tooLarge(err):
				t.Errorf("%v is not told apart as too large", err)
			case c.err != "" && errors.Is(err, io.EOF):
				t.Errorf("%v reads as a clean end", err)
			}
		})
	}
}

// TestR4StdioCloseEndsAServerThatStays: a server that neither exits when
// its input closes nor on SIGTERM is killed, and a Read waiting on its
// output ends.
func TestR4StdioCloseEndsAServerThatStays(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" TERM; exec sleep 60`)
	conn, err := (&stdioTransport{cmd: cmd, terminate: 10 * time.Millisecond}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		read <- err
	}()
	first := conn.Close()
	if first == nil {
		t.Error("Close: nil, want the server's end by a signal")
	}
	if err := <-read; err == nil {
		t.Error("a Read after Close returned a message")
	}
	if err := conn.Close(); err != first {
		t.Errorf("a second Close: %v, want the first one's %v", err, first)
	}
}
