package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/tools"
)

// The relay carries an upstream tools/call beside the SDK's client
// session, on the same connection (stdio pipes, or streamable HTTP as
// httprelay.go says): the
// call the gateway decided is written as one frame, under an id of the
// relay's own, and its answer is taken off the connection before the SDK
// sees it and read once. The SDK keeps everything else (initialisation,
// listing, notifications, the server's requests), which it does once per
// session; a call through it costs about six Unmarshals, each with a
// fresh 32 KiB decoder buffer, and a remarshal (issue 49).
//
// The relay's ids are strings with relayPrefix; the SDK's client numbers
// its own requests, so the two never meet.
const relayPrefix = "aimon-gw/"

// relayTransport is t with a relay on its connection.
type relayTransport struct {
	t    mcp.Transport
	conn *relayConn // set by Connect
}

func (r *relayTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.t.Connect(ctx)
	if err != nil {
		return nil, err
	}
	r.conn = &relayConn{Connection: c, pending: map[string]chan relayAnswer{}}
	return r.conn, nil
}

// relayConn is the SDK's connection, less the answers to the relay's calls.
type relayConn struct {
	mcp.Connection
	http bool // the SDK's streamable connection, whose answers take takes (httprelay.go)
	seq  atomic.Int64

	mu      sync.Mutex
	pending map[string]chan relayAnswer // by id, the calls awaiting their answer
	ended   error                       // why the connection ended: every later call fails with it
	meta    mcp.Meta                    // the _meta the SDK puts on each request (protocol 2026-07-28), nil before
}

type relayAnswer struct {
	result jsontext.Value
	err    error
}

// Read passes the SDK every message but the answers to the relay's calls.
func (c *relayConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.end(err)
			}
			return nil, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return msg, nil
		}
		id, ok := resp.ID.Raw().(string)
		if !ok || len(id) <= len(relayPrefix) || id[:len(relayPrefix)] != relayPrefix {
			return msg, nil
		}
		a := relayAnswer{result: jsontext.Value(resp.Result)}
		if resp.Error != nil {
			a.err = fmt.Errorf("calling %q: %w", "tools/call", resp.Error) // as the SDK's call says it
		}
		c.deliver(id, a)
	}
}

// deliver hands a to the call id awaiting it; the answer to a call given
// up on, or one already answered, is dropped.
func (c *relayConn) deliver(id string, a relayAnswer) {
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- a
	}
}

// Write notes the _meta of the SDK's requests, which the relay's calls
// carry as the SDK's would.
func (c *relayConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "tools/list" {
		var p struct {
			Meta mcp.Meta `json:"_meta"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			c.mu.Lock()
			c.meta = p.Meta
			c.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *relayConn) Close() error {
	c.end(errors.New("the session with the server was closed"))
	return c.Connection.Close()
}

// end fails the calls awaiting an answer, and those after, with err.
func (c *relayConn) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended == nil {
		c.ended = fmt.Errorf("%w: calling %q: %v", mcp.ErrConnectionClosed, "tools/call", err)
	}
	for id, ch := range c.pending {
		ch <- relayAnswer{err: c.ended}
		delete(c.pending, id)
	}
}

// notifyTimeout bounds writing the cancellation of a call given up on.
const notifyTimeout = 5 * time.Second

// call writes the call of name with args as one frame, as the SDK's
// client would write it, and waits for its answer or the end of ctx;
// a call given up on is cancelled at the server, as the SDK cancels it.
func (c *relayConn) call(ctx context.Context, name string, args tools.Input) (jsontext.Value, error) {
	id := relayPrefix + strconv.FormatInt(c.seq.Add(1), 10)
	ch := make(chan relayAnswer, 1)
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		return nil, c.ended
	}
	c.pending[id] = ch
	meta := c.meta
	c.mu.Unlock()
	params, err := marshalParams(&mcp.CallToolParams{Meta: meta, Name: name, Arguments: args})
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("the call's arguments cannot be sent as JSON: %v", err)
	}
	rid, _ := jsonrpc.MakeID(id)
	wctx := ctx
	if c.http {
		wctx = context.WithValue(ctx, relayCallKey{}, relayCall{c: c, id: id})
	}
	// Over HTTP, Write returns once the server begins its answer.
	if err := c.Connection.Write(wctx, &jsonrpc.Request{ID: rid, Method: "tools/call", Params: params}); err != nil {
		if ctx.Err() != nil {
			return nil, c.cancel(ctx, id)
		}
		c.forget(id)
		return nil, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	select {
	case a := <-ch:
		return a.result, a.err
	case <-ctx.Done():
		return nil, c.cancel(ctx, id)
	}
}

// cancel gives up on the call id, and tells the server so in the
// background, as the SDK does, so that a server that does not read
// delays no caller; it returns why.
func (c *relayConn) cancel(ctx context.Context, id string) error {
	c.forget(id)
	go func() {
		nctx, stop := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
		defer stop()
		p, _ := marshalParams(&mcp.CancelledParams{Reason: ctx.Err().Error(), RequestID: id})
		c.Connection.Write(nctx, &jsonrpc.Request{Method: "notifications/cancelled", Params: p})
	}()
	return ctx.Err()
}

func (c *relayConn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// marshalParams is params as the SDK's jsonrpc2 marshals them: without
// HTML escapes.
func marshalParams(params any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(params); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// wireResult is what the gateway takes of a CallToolResult: its text
// contents, its structured content, whether it is an error.
type wireResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured jsontext.Value `json:"structuredContent"`
	IsError    bool           `json:"isError"`
	ResultType string         `json:"resultType"`
}

// lenient reads what a server writes as the SDK's client does: a name
// twice (the last counts), text that is not UTF-8 (replaced), names
// matched exactly.
var lenient = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// readResult reads a tools/call's result once into the gateway's result.
// A result with other content than text is read by the SDK instead, so
// that each kind of content is passed on as the SDK's client reads it.
func readResult(raw jsontext.Value) (tools.Result, error) {
	var w wireResult
	if err := jsonv2.Unmarshal(raw, &w, lenient); err != nil {
		return tools.Result{}, fmt.Errorf("calling %q: the server's result is not a CallToolResult: %v", "tools/call", err)
	}
	if w.ResultType != "" && w.ResultType != "complete" {
		return tools.Result{}, fmt.Errorf("calling %q: the server asked for input in the middle of the call (resultType %q), which the gateway does not relay", "tools/call", w.ResultType)
	}
	r := tools.Result{IsError: w.IsError}
	texts := make([]string, 0, len(w.Content))
	for _, c := range w.Content {
		if c.Type != "text" {
			return readSDKResult(raw)
		}
		texts = append(texts, c.Text)
	}
	r.Text = strings.Join(texts, "\n")
	if len(w.Structured) > 0 && string(w.Structured) != "null" {
		if err := json.Unmarshal(w.Structured, &r.Structured); err != nil {
			return tools.Result{}, fmt.Errorf("calling %q: the server's structured content is not JSON: %v", "tools/call", err)
		}
	}
	return r, nil
}

// readSDKResult reads a result as the SDK's client does, for content of
// other kinds than text.
func readSDKResult(raw jsontext.Value) (tools.Result, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return tools.Result{}, fmt.Errorf("calling %q: %w", "tools/call", err)
	}
	return fromSDK(&res), nil
}

// fromSDK is the gateway's result of an SDK CallToolResult: text content
// as it is, other content as its JSON, one a line.
func fromSDK(res *mcp.CallToolResult) tools.Result {
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		} else if b, err := json.Marshal(c); err == nil {
			texts = append(texts, string(b))
		}
	}
	return tools.Result{Text: strings.Join(texts, "\n"), IsError: res.IsError, Structured: res.StructuredContent}
}
