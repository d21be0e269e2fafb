package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
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
// limit an error; each is answered here and the session reads on. It
// drops the response to a request the client cancelled. Calls of tools the
// surface may not use are answered in the server's receiving middleware,
// whatever the transport (rule P9).
type guard struct {
	r   *bufio.Reader
	w   io.Writer
	max int

	wmu       sync.Mutex
	cmu       sync.Mutex
	cancelled map[string]bool
	inFlight  map[string]bool            // ids of the requests the SDK has not answered yet
	calls     map[string]json.RawMessage // the params of the tools/call requests in flight
	// dropped records a tools/call that the client cancelled before any
	// handler saw it: the SDK answers it with an error, and nothing else
	// would record it (rule R7).
	dropped func(params json.RawMessage)
	// direct answers a tools/call itself, instead of the SDK's server;
	// running cancels each it answers, by key, when the client cancels it.
	direct   direct
	running  map[string]context.CancelFunc
	base     context.Context // the direct calls', cancelled by Close
	stop     context.CancelFunc
	answers  sync.WaitGroup // the direct calls not yet answered
	answered chan struct{}  // a request left inFlight
	lastErr  error          // the end of input, met with the last frame (Read's only)
	closed   chan struct{}
	once     sync.Once
	started  sync.Once // the read loop's start
	frames   chan frame
}

// frame is a frame as read (data), or, where the read loop checks what
// it reads, the message it holds for the SDK (msg); err is the end of
// input met with it.
type frame struct {
	data []byte
	msg  jsonrpc.Message
	err  error
}

func newGuard(r io.Reader, w io.Writer, max int) *guard {
	g := &guard{r: bufio.NewReaderSize(r, 64<<10), w: w, max: max, cancelled: map[string]bool{}, inFlight: map[string]bool{}, calls: map[string]json.RawMessage{}, running: map[string]context.CancelFunc{}, answered: make(chan struct{}, 1), closed: make(chan struct{}), frames: make(chan frame)}
	g.base, g.stop = context.WithCancel(context.Background())
	return g
}

// Connect implements mcp.Transport; the frames are read from here on.
func (g *guard) Connect(context.Context) (mcp.Connection, error) {
	g.started.Do(func() { go g.readLoop(true) })
	return g, nil
}

func (g *guard) SessionID() string { return "" }

func (g *guard) Close() error {
	g.once.Do(func() { close(g.closed); g.stop() })
	return nil
}

var errTooLong = errors.New("frame too long")

// readLoop reads frames ahead, so that Close can unblock a waiting Read;
// started once g is set up (direct). checked, it checks each frame as it
// reads it, so that a tools/call the guard answers itself starts on the
// goroutine that read it rather than after a hand-over to the SDK's
// reading goroutine, a wake-up less on each call (issue 49); frames then
// carries only the messages for the SDK and the end of input.
func (g *guard) readLoop(checked bool) {
	for {
		line, err := readFrame(g.r, g.max)
		f := frame{data: line, err: err}
		if checked {
			var ok bool
			if f, ok = g.checkFrame(line, err); !ok {
				continue
			}
		}
		select {
		case g.frames <- f:
		case <-g.closed:
			return
		}
		if err != nil && !errors.Is(err, errTooLong) {
			return
		}
	}
}

// checkFrame answers the frame the guard must answer itself and returns
// false when nothing is left for the SDK: no message, no end of input.
func (g *guard) checkFrame(line []byte, err error) (frame, bool) {
	if errors.Is(err, errTooLong) {
		g.reply(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the frame is longer than the limit of %d bytes and was skipped; send smaller messages or raise --max-line-bytes", g.max))
		return frame{}, false
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return frame{err: err}, err != nil
	}
	msg := g.check(line)
	return frame{msg: msg, err: err}, msg != nil || err != nil
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
	var f frame
	select {
	case f = <-g.frames:
	case <-g.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.msg == nil {
		return nil, g.drain(ctx, f.err)
	}
	if f.err != nil {
		// The last frame had no newline: hand it over, and end the
		// input at the next Read.
		g.lastErr = f.err
	}
	return f.msg, nil
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
// returns the message. The frame is read once (readEnvelope); only a
// cancellation's params are read again, for its request id.
func (g *guard) check(data []byte) jsonrpc.Message {
	env, problem := readEnvelope(data)
	if problem != nil {
		g.write(problem.response())
		return nil
	}
	req, ok := env.msg.(*jsonrpc.Request)
	if !ok {
		return env.msg
	}
	if req.Method == "notifications/cancelled" {
		if key, ok := cancelledKey(req.Params); ok {
			g.cmu.Lock()
			// Only a request in flight is cancelled: a mark for one
			// already answered, or never sent, would stay and drop the
			// answer of the next request that reuses its id (rule R2).
			if g.inFlight[key] {
				g.cancelled[key] = true
			}
			cancel := g.running[key]
			g.cmu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
	if req.ID.IsValid() {
		key := keyOf(req.ID.Raw())
		g.cmu.Lock()
		reused := g.inFlight[key]
		g.inFlight[key] = true
		if !reused && req.Method == "tools/call" {
			g.calls[key] = req.Params
		}
		g.cmu.Unlock()
		if reused {
			// Answered here, so that both requests get their one answer
			// (the first one's comes when it ends).
			g.reply(env.id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("the request id %s is already in use by a request that has not been answered yet; give each request its own id", env.id))
			return nil
		}
		if req.Method == "tools/call" && g.direct != nil && g.answer(key, req) {
			return nil
		}
	}
	return env.msg
}

// answer has direct answer the call req, registered under key so that a
// cancellation reaches it; false leaves it to the SDK.
func (g *guard) answer(key string, req *jsonrpc.Request) bool {
	ctx, cancel := context.WithCancel(g.base)
	g.cmu.Lock()
	g.running[key] = cancel
	g.cmu.Unlock()
	g.answers.Add(1)
	answer := func(resp *jsonrpc.Response) {
		defer g.answers.Done()
		g.writeResponse(ctx, resp)
	}
	if g.direct(ctx, req, answer) {
		return true
	}
	g.answers.Done()
	g.cmu.Lock()
	delete(g.running, key)
	g.cmu.Unlock()
	cancel()
	return false
}

// keyOf spells a request id for the cancelled and in-flight sets as the
// SDK reads it: 2 and "2" differ, "\u0032" and "2" do not.
func keyOf(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(v)
}

// reply writes an error response of the guard's own.
func (g *guard) reply(id json.RawMessage, code int, message string) {
	g.write((&problem{id: id, code: code, message: message}).response())
}

func (g *guard) write(b []byte) error {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_, err := g.w.Write(append(b, '\n'))
	return err
}

// Write writes the SDK's message, unless it answers a cancelled request:
// the receiver of a cancellation does not respond (MCP, "Cancellation").
// A cancelled tools/call answered with an error never reached a handler
// (one that ran answers with a result), and is recorded as dropped before
// the request leaves the in-flight set, so before the session can end.
func (g *guard) Write(_ context.Context, msg jsonrpc.Message) error {
	if g.settle(msg) {
		return nil
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error != nil {
		plain := *resp
		plain.Error = plainError(resp.Error)
		msg = &plain
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	return g.write(b)
}

// writeResponse writes the answer to a call the guard's path answered,
// as Write does; a result is framed straight, as EncodeMessage frames
// it, without encoding the result's bytes again (issue 49).
func (g *guard) writeResponse(ctx context.Context, resp *jsonrpc.Response) error {
	frame, ok := resultFrame(resp)
	if !ok {
		return g.Write(ctx, resp)
	}
	if g.settle(resp) {
		return nil
	}
	return g.write(frame)
}

// resultFrame is the frame jsonrpc.EncodeMessage writes for resp, a
// result whose bytes are compact JSON (the encoder's): false for an
// error, or an id whose spelling the encoder would write otherwise than
// here (a string with <, > or &, which it leaves unescaped).
func resultFrame(resp *jsonrpc.Response) ([]byte, bool) {
	if resp.Error != nil || len(resp.Result) == 0 || !resp.ID.IsValid() {
		return nil, false
	}
	b := make([]byte, 0, len(resp.Result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	switch id := resp.ID.Raw().(type) {
	case int64:
		b = strconv.AppendInt(b, id, 10)
	case string:
		q, err := json.Marshal(id)
		if err != nil || strings.ContainsAny(id, "<>&") {
			return nil, false
		}
		b = append(b, q...)
	default:
		return nil, false
	}
	b = append(append(b, `,"result":`...), resp.Result...)
	return append(b, '}'), true
}

// settle takes msg, a response, off the requests in flight; true when it
// answers a cancelled request, and is not written.
func (g *guard) settle(msg jsonrpc.Message) bool {
	if resp, ok := msg.(*jsonrpc.Response); ok && resp.ID.IsValid() {
		key := keyOf(resp.ID.Raw())
		g.cmu.Lock()
		cancelled, params, call, cancel := g.cancelled[key], g.calls[key], g.calls[key] != nil, g.running[key]
		delete(g.running, key)
		g.cmu.Unlock()
		if cancel != nil {
			cancel()
		}
		if cancelled && call && resp.Error != nil && g.dropped != nil {
			g.dropped(params)
		}
		g.cmu.Lock()
		delete(g.cancelled, key)
		delete(g.inFlight, key)
		delete(g.calls, key)
		g.cmu.Unlock()
		select {
		case g.answered <- struct{}{}:
		default:
		}
		return cancelled
	}
	return false
}

// handlingRE is the method the SDK names in its error answer; early its
// answer to a request before initialize.
var (
	handlingRE = regexp.MustCompile(`^handling '([^']*)': `)
	early      = regexp.MustCompile(`method "([^"]*)" is invalid during session initialization$`)
)

// plainError is the SDK's error answer in words a client can act on:
// params the SDK could not decode are told by method and member in
// JSON's words, not by the Go type they were decoded into; an error with
// no JSON-RPC code, which the SDK sends as code 0 (no code of
// JSON-RPC's), gets one: -32600 for a request before initialize or a
// second initialize, -32603 for any other.
func plainError(err error) error {
	var we *jsonrpc.Error
	wire := errors.As(err, &we)
	msg := err.Error()
	var te *json.UnmarshalTypeError
	switch {
	case wire && we.Code == jsonrpc.CodeInvalidParams && errors.As(err, &te):
		method := "the request"
		if m := handlingRE.FindStringSubmatch(msg); m != nil {
			method = m[1]
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: unreadableParams(method, te)}
	case !wire && early.MatchString(msg):
		method := early.FindStringSubmatch(msg)[1]
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf("%s came before the session was initialized; send initialize first, then notifications/initialized, then %s", method, method)}
	case !wire && strings.HasSuffix(msg, `duplicate "initialize" received`):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "the session is already initialized; send initialize once, as the session's first request"}
	case !wire || we.Code == 0:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	}
	return err
}
