package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// guard is the transport in front of the SDK's server: newline-delimited
// JSON-RPC on a reader and a writer, as the SDK's IOTransport, except that
// no frame ends the session. A frame that is not JSON gets -32700, one that
// is not a request -32600 (id null where it has none), one over the size
// limit an error; each is answered here and the session reads on. It also
// answers calls to tools the surface may not use as serve does (rule P9),
// and drops the response to a request the client cancelled.
type guard struct {
	r   *bufio.Reader
	w   io.Writer
	max int
	// refuse answers a call of a tool the server does not list; nil when
	// the SDK should (it says unknown tool).
	refuse func(ctx context.Context, name string, args json.RawMessage) *mcp.CallToolResult
	listed func(name string) bool

	wmu       sync.Mutex
	cmu       sync.Mutex
	cancelled map[string]bool
	inFlight  map[string]bool // ids of the requests the SDK has not answered yet
	answered  chan struct{}   // a request left inFlight
	lastErr   error           // the end of input, met with the last frame (Read's only)
	closed    chan struct{}
	once      sync.Once
	frames    chan frame
}

type frame struct {
	data []byte
	err  error
}

func newGuard(r io.Reader, w io.Writer, max int) *guard {
	g := &guard{r: bufio.NewReaderSize(r, 64<<10), w: w, max: max, cancelled: map[string]bool{}, inFlight: map[string]bool{}, answered: make(chan struct{}, 1), closed: make(chan struct{}), frames: make(chan frame)}
	go g.readLoop()
	return g
}

// Connect implements mcp.Transport.
func (g *guard) Connect(context.Context) (mcp.Connection, error) { return g, nil }

func (g *guard) SessionID() string { return "" }

func (g *guard) Close() error {
	g.once.Do(func() { close(g.closed) })
	return nil
}

var errTooLong = errors.New("frame too long")

// readLoop reads frames ahead, so that Close can unblock a waiting Read.
func (g *guard) readLoop() {
	for {
		line, err := readFrame(g.r, g.max)
		select {
		case g.frames <- frame{line, err}:
		case <-g.closed:
			return
		}
		if err != nil && !errors.Is(err, errTooLong) {
			return
		}
	}
}

func readFrame(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+2 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, errTooLong
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// Read returns the next frame that is a JSON-RPC message for the SDK.
func (g *guard) Read(ctx context.Context) (jsonrpc.Message, error) {
	if g.lastErr != nil {
		return nil, g.drain(ctx, g.lastErr)
	}
	for {
		var f frame
		select {
		case f = <-g.frames:
		case <-g.closed:
			return nil, io.EOF
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if errors.Is(f.err, errTooLong) {
			g.reply(nil, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the frame is longer than the limit of %d bytes and was skipped; send smaller messages or raise --max-line-bytes", g.max))
			continue
		}
		if len(bytes.TrimSpace(f.data)) == 0 {
			if f.err != nil {
				return nil, g.drain(ctx, f.err)
			}
			continue
		}
		if msg := g.check(ctx, f.data); msg != nil {
			if f.err != nil {
				// The last frame had no newline: hand it over, and end
				// the input at the next Read.
				g.lastErr = f.err
			}
			return msg, nil
		}
		if f.err != nil {
			return nil, g.drain(ctx, f.err)
		}
	}
}

// drain holds the end of input back until every request read has been
// answered, so that a client that sends its requests and closes its side
// still gets each answer (the SDK ends the session at the end of input).
func (g *guard) drain(ctx context.Context, err error) error {
	for {
		g.cmu.Lock()
		n := len(g.inFlight)
		g.cmu.Unlock()
		if n == 0 {
			return err
		}
		select {
		case <-g.answered:
		case <-g.closed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// check answers a frame that the SDK must not see and returns nil, or
// returns the message.
func (g *guard) check(ctx context.Context, data []byte) jsonrpc.Message {
	if !json.Valid(data) {
		g.reply(nil, nil, jsonrpc.CodeParseError, "the frame is not valid JSON; send one JSON-RPC message per line")
		return nil
	}
	var env struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	trimmed := bytes.TrimSpace(data)
	switch {
	case trimmed[0] == '[':
		g.reply(nil, nil, jsonrpc.CodeInvalidRequest, "batch requests are not supported; send one JSON-RPC message per line")
		return nil
	case trimmed[0] != '{' || json.Unmarshal(data, &env) != nil:
		g.reply(nil, nil, jsonrpc.CodeInvalidRequest, "the frame is not a JSON-RPC request object")
		return nil
	case env.JSONRPC == nil || *env.JSONRPC != "2.0":
		g.reply(env.ID, nil, jsonrpc.CodeInvalidRequest, `the message lacks "jsonrpc": "2.0"`)
		return nil
	}
	if problem := idProblem(env.ID, env.Method != nil); problem != "" {
		g.reply(nil, nil, jsonrpc.CodeInvalidRequest, problem)
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		g.reply(env.ID, nil, jsonrpc.CodeInvalidRequest, "the message is not a valid JSON-RPC request or response; send an object with \"jsonrpc\": \"2.0\", a \"method\" and, for a request, an \"id\"")
		return nil
	}
	if env.Method != nil {
		switch *env.Method {
		case "notifications/cancelled":
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(env.Params, &p) == nil && len(p.RequestID) > 0 {
				g.cmu.Lock()
				g.cancelled[idKey(p.RequestID)] = true
				g.cmu.Unlock()
			}
		case "tools/call":
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if len(env.ID) > 0 && json.Unmarshal(env.Params, &p) == nil && g.refuse != nil && !g.listed(p.Name) {
				// Not listed: answered with the gateway's sentence, unknown
				// and not allowed told apart (rule P9).
				g.reply(env.ID, g.refuse(ctx, p.Name, p.Arguments), 0, "")
				return nil
			}
		}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		key := idKey(env.ID)
		g.cmu.Lock()
		reused := g.inFlight[key]
		g.inFlight[key] = true
		g.cmu.Unlock()
		if reused {
			// Answered here, so that both requests get their one answer
			// (the first one's comes when it ends).
			g.reply(env.ID, nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request id %s is already in use by a request that has not been answered yet; give each request its own id", env.ID))
			return nil
		}
	}
	return msg
}

// idProblem is the sentence for an id JSON-RPC does not allow, or "".
// The SDK reads a null id as a notification's (no answer at all), a
// fraction as its integer part and a large integer through a float, so
// each would be answered under another id or not at all.
func idProblem(raw json.RawMessage, request bool) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	const advice = "give each request a string or an integer id (a notification has no id at all)"
	switch v := v.(type) {
	case nil:
		if !request {
			return "" // a response to a request the client could not read
		}
		return `the request's "id" is null; ` + advice
	case string:
		return ""
	case json.Number:
		if n, err := strconv.ParseInt(v.String(), 10, 64); err != nil || n > 1<<53 || n < -(1<<53) {
			return fmt.Sprintf("the id %s is not an integer within ±2^53 (what a JSON number keeps exactly); %s", v, advice)
		}
		return ""
	}
	return fmt.Sprintf("the id %s is neither a string nor an integer; %s", raw, advice)
}

// idKey spells a request id for the cancelled and in-flight sets as the
// SDK reads it: 2 and "2" differ, "\u0032" and "2" do not.
func idKey(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return strings.TrimSpace(string(raw))
	}
	return keyOf(v)
}

func keyOf(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(v)
}

// reply writes a response of the guard's own: result, or an error.
func (g *guard) reply(id json.RawMessage, result any, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if result != nil {
		resp["result"] = result
	} else {
		resp["error"] = map[string]any{"code": code, "message": message}
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	g.write(b)
}

func (g *guard) write(b []byte) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_, err := g.w.Write(append(b, '\n'))
	return err
}

// Write writes the SDK's message, unless it answers a cancelled request:
// the receiver of a cancellation does not respond (MCP, "Cancellation").
func (g *guard) Write(_ context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		key := keyOf(resp.ID.Raw())
		g.cmu.Lock()
		cancelled := g.cancelled[key]
		delete(g.cancelled, key)
		delete(g.inFlight, key)
		g.cmu.Unlock()
		select {
		case g.answered <- struct{}{}:
		default:
		}
		if cancelled {
			return nil
		}
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return g.write(b)
}
