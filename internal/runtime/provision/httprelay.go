package provision

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over streamable HTTP the relay's call goes out through the SDK's own
// connection, which the client session holds unwrapped: the session tells
// its connection the protocol it agreed (for the MCP-Protocol-Version
// header) through an interface of the SDK's own package, which a wrapper
// cannot carry. Write sets every header the SDK sets on a call (the
// session's id, the protocol version, Mcp-Method and Mcp-Name) and posts
// the relay's frame; the answer is taken off the HTTP response in the
// round tripper (take), before the connection reads it, and read once.
// The connection gets an event stream without the answer (the server's
// requests and notifications during the call, which the SDK's client
// handles as before), whose end it answers under the relay's id, which
// no call of the SDK's awaits and the SDK drops. A stream cut before the
// answer is not resumed (the SDK's would be, with Last-Event-ID): the
// call fails with a sentence. A tool whose input binds a parameter to a
// header (x-mcp-header) is called through the SDK's client, which sets
// those headers from the tool's definition it keeps (upstream.call).

// captureTransport is t, keeping the connection it made.
type captureTransport struct {
	t    mcp.Transport
	conn mcp.Connection
}

func (c *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.t.Connect(ctx)
	c.conn = conn
	return conn, err
}

// relayCallKey marks the context of a relay call's Write, so that the
// round tripper takes its answer.
type relayCallKey struct{}

type relayCall struct {
	c  *relayConn
	id string
}

// noteMeta keeps the _meta of the SDK's tools/list request r, which the
// relay's calls carry as the SDK's would; only a request of protocol
// 2026-07-28 carries one, and names its method in a header.
func (c *relayConn) noteMeta(r *http.Request) {
	if r.Header.Get("Mcp-Method") != "tools/list" || r.GetBody == nil {
		return
	}
	body, err := r.GetBody()
	if err != nil {
		return
	}
	defer body.Close()
	var m struct {
		Params struct {
			Meta mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.NewDecoder(io.LimitReader(body, int64(MaxMessage))).Decode(&m) == nil {
		c.mu.Lock()
		c.meta = m.Params.Meta
		c.mu.Unlock()
	}
}

// take takes the answer to the relay's call id off resp, a success, and
// returns what the SDK's connection reads in its place: an event stream
// of the rest. A body of another kind is left to the SDK, which refuses
// it, and Write fails the call.
func (c *relayConn) take(id string, resp *http.Response) *http.Response {
	kind, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	out := *resp
	out.Header = resp.Header.Clone()
	out.Header.Set("Content-Type", "text/event-stream")
	out.ContentLength = -1
	switch kind {
	case "application/json":
		// One message, read whole (bounded by boundedBody).
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			c.deliver(id, relayAnswer{err: fmt.Errorf("calling %q: reading the server's answer: %w", "tools/call", err)})
		} else {
			c.deliver(id, answerIn(id, body))
		}
		out.Body = http.NoBody
		return &out
	case "text/event-stream":
		pr, pw := io.Pipe()
		go c.stream(id, resp.Body, pw)
		out.Body = pr
		return &out
	}
	return resp
}

// stream reads the events of body until the answer to id, which it
// delivers; it writes each other message to w for the SDK's connection,
// without its event id, and closes w when the answer came or body ended.
func (c *relayConn) stream(id string, body io.ReadCloser, w *io.PipeWriter) {
	defer func() {
		// Read to its end, as the SDK's connection reads a stream, so
		// that the HTTP connection is kept for the next request.
		io.Copy(io.Discard, body)
		body.Close()
	}()
	defer w.Close()
	answered := false
	err := events(body, MaxMessage, func(data []byte) bool {
		if a, ours := answerOf(id, data); ours {
			c.deliver(id, a)
			answered = true
			return false
		}
		// Another message of the server's: the SDK's, in the SSE form it reads.
		if _, err := fmt.Fprintf(w, "data: %s\n\n", bytes.ReplaceAll(data, []byte("\n"), []byte("\ndata: "))); err != nil {
			return false // the SDK's reader is gone: the call was given up on
		}
		return true
	})
	if answered {
		return
	}
	if err == nil {
		err = errors.New("the server's event stream ended before it answered the call")
	}
	c.deliver(id, relayAnswer{err: fmt.Errorf("calling %q: %w", "tools/call", err)})
}

// events calls f with the data of each message event of an event stream
// (text/event-stream, as the SDK's client reads it: events of other names
// and empty data skipped), each at most max bytes, until f returns false
// (nil then) or the stream ends (io.EOF's end is an error of its own).
func events(r io.Reader, max int, f func(data []byte) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), max+len("data: \r\n"))
	var data []byte
	name := ""
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if len(line) == 0 { // the end of an event
			if len(data) > 0 && (name == "" || name == "message") && !f(data) {
				return nil
			}
			data, name = data[:0], ""
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if len(data) > 0 {
				data = append(data, '\n')
			}
			if data = append(data, value...); len(data) > max {
				return errTooLarge
			}
		case "event":
			name = string(value)
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return errTooLarge
	}
	if sc.Err() != nil {
		return fmt.Errorf("reading the server's event stream: %w", sc.Err())
	}
	if len(data) > 0 && (name == "" || name == "message") && !f(data) {
		return nil
	}
	return nil
}

// answerIn is the answer to id in body, the one message of a JSON
// answer: another id, or no response, fails the call, since nothing
// else comes on that answer.
func answerIn(id string, body []byte) relayAnswer {
	if a, ours := answerOf(id, body); ours {
		return a
	}
	return relayAnswer{err: fmt.Errorf("calling %q: the server answered the call with another message than its response (under id %q): %.200s", "tools/call", id, body)}
}

// answerOf reads data, one JSON-RPC message, once: ours when it is the
// response under id (a message that is not JSON-RPC is ours too, failed).
func answerOf(id string, data []byte) (relayAnswer, bool) {
	var w wireMessage
	if err := jsonv2.Unmarshal(data, &w, lenient); err != nil {
		return relayAnswer{err: fmt.Errorf("calling %q: the server wrote what is not a JSON-RPC message: %v", "tools/call", err)}, true
	}
	if got, ok := w.ID.(string); !ok || got != id || w.Method != nil {
		return relayAnswer{}, false
	}
	if w.Version != "2.0" {
		return relayAnswer{err: fmt.Errorf("calling %q: the server wrote a message without \"jsonrpc\": \"2.0\" (%q)", "tools/call", w.Version)}, true
	}
	if w.Error != nil {
		return relayAnswer{err: fmt.Errorf("calling %q: %w", "tools/call", w.Error)}, true
	}
	return relayAnswer{result: jsontext.Value(w.Result)}, true
}
