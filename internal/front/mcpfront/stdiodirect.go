package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call over stdio is answered here, from the frame the guard has
// read once, rather than by the SDK's server, which reads it again three
// times (its params, validateRequestMeta, extractRequestMeta) with a
// fresh 32 KiB decoder buffer each (issue 49). What the client gets is
// what the SDK's server would have answered: the same handler (handle,
// or the unlisted middleware's answer), the same result, marshalled as
// the SDK marshals it, with the result type and server info the SDK adds
// under protocol 2026-07-28. The SDK's server keeps the session
// (initialize, tools/list, notifications, the elicitation of an ask) and
// every call the guard does not answer: one before the session is
// initialized, one whose params carry more than a name, arguments and the
// _meta of protocol 2026-07-28 (a retry's request state, a progress
// token, an odd member), one whose _meta the SDK would refuse or read
// otherwise, or one that is not plainly written.

// DirectCalls counts the calls answered here, for the tests that must
// know which path a call took.
var DirectCalls atomic.Int64

// PlainResults counts the results of those written straight from the
// decision's text (plainResult), for the tests that must know it.
var PlainResults atomic.Int64

// directCalls answers the tools/call frames it takes on session, whose
// server is m's; answer writes the response. It takes none before the
// session is connected.
func (m *toolSet) directCalls(session func() *mcp.ServerSession, base context.Context) direct {
	var metas metaCache
	var pool workers
	// The server's info as the SDK writes it in a result's _meta
	// (json.Marshal's HTML escapes); nil leaves such results to the SDK.
	info, err := json.Marshal(m.impl)
	if err != nil {
		info = nil
	}
	return func(ctx context.Context, req *jsonrpc.Request, answer func(*jsonrpc.Response)) bool {
		ss := session()
		if ss == nil {
			return false
		}
		p := ss.InitializeParams()
		if p == nil || m.gw.Load() == nil {
			return false
		}
		name, args, meta, ok := plainCall(req.Params)
		if !ok {
			return false
		}
		perRequest := meta != nil
		if perRequest && !metas.valid(meta, p.ProtocolVersion) {
			return false
		}
		DirectCalls.Add(1)
		pool.run(base, func() {
			res, err := m.answer(ctx, ss, name, args)
			resp := &jsonrpc.Response{ID: req.ID, Error: err}
			if err == nil {
				// Typed whether the tool's handler answered or it is
				// not listed (a server still connecting), as the SDK's
				// path types both (completed).
				typed := res != nil && p.ProtocolVersion >= newProtocol
				if b, ok := plainResult(res, info, typed, perRequest); ok {
					resp.Result = b
					PlainResults.Add(1)
				} else if resp.Result, err = marshalResult(res, m.impl, typed, perRequest); err != nil {
					resp.Error = fmt.Errorf("marshaling the result: %w", err)
				}
			}
			answer(resp)
		})
		return true
	}
}

// metaCache knows the last _meta it found valid, which a client sends
// alike with each request.
type metaCache struct {
	last atomic.Pointer[string]
}

// valid reports whether meta is the _meta of protocol 2026-07-28 (and
// the session's version) as the SDK's validateRequestMeta accepts it: a
// protocol version, client capabilities, client info if any, that decode
// as the SDK decodes them, and nothing else; false for any other, which
// the SDK's server reads and answers as it does.
func (c *metaCache) valid(meta json.RawMessage, version string) bool {
	if last := c.last.Load(); last != nil && *last == string(meta) {
		return true
	}
	var m struct {
		Version      *string          `json:"io.modelcontextprotocol/protocolVersion"`
		Info         *json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
		Capabilities *json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	if jsonv2.Unmarshal(meta, &m, jsonv2.RejectUnknownMembers(true)) != nil ||
		m.Version == nil || *m.Version != version || version < newProtocol || m.Capabilities == nil {
		return false
	}
	var caps struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if string(*m.Capabilities) == "null" || json.Unmarshal(*m.Capabilities, &caps) != nil {
		return false
	}
	var info mcp.Implementation
	if m.Info != nil && (string(*m.Info) == "null" || json.Unmarshal(*m.Info, &info) != nil) {
		return false
	}
	s := string(meta)
	c.last.Store(&s)
	return true
}

// answer is what the SDK's server answers a call of name with args
// (callTool); an ask of a client before 2026-07-28 is turned into an
// elicitation and the handler run again with its answer, as the SDK's
// multi-round-trip middleware does.
func (m *toolSet) answer(ctx context.Context, ss *mcp.ServerSession, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	req := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: name, Arguments: args}}
	p := peerOf(ss)
	res, err := m.callTool(ctx, req, p)
	if err != nil || res == nil || res.InputRequests == nil || p.ProtocolVersion >= newProtocol {
		return res, err
	}
	if len(res.InputRequests) == 0 {
		return nil, errors.New("the server is busy, retry later")
	}
	responses := mcp.InputResponseMap{}
	for id, ir := range res.InputRequests {
		ep, ok := ir.(*mcp.ElicitParams)
		if !ok {
			return nil, fmt.Errorf("multi-round-trip: unknown input request type: %T", ir)
		}
		r, err := ss.Elicit(ctx, ep)
		if err != nil {
			return nil, fmt.Errorf("multi-round-trip: fulfilling input request %q: %w", id, err)
		}
		responses[id] = r
	}
	req.Params.InputResponses, req.Params.RequestState = responses, res.RequestState
	return m.callTool(ctx, req, p)
}

// marshalResult is res as the SDK's server writes it: marshalled as its
// jsonrpc2 marshals a result (CallToolResult's MarshalJSON has HTML
// escapes, the encoder none of its own); with the result type the SDK
// sets for a session of 2026-07-28 or later (typed), and the server's
// info in _meta for a request of that protocol (perRequest).
func marshalResult(res *mcp.CallToolResult, impl *mcp.Implementation, typed, perRequest bool) (json.RawMessage, error) {
	if perRequest {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
			res.Meta[mcp.MetaKeyServerInfo] = impl
		}
	}
	inputs := res.InputRequests
	if typed {
		res.InputRequests = nil // written after the result type, as the SDK writes it
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if !typed {
		return b, nil
	}
	b = b[:len(b)-1] // the closing brace
	if inputs == nil {
		return append(b, `,"resultType":"complete"}`...), nil
	}
	ir, err := json.Marshal(inputs)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"resultType":"input_required","inputRequests":`...)
	return append(append(b, ir...), '}'), nil
}

// plainResult is what marshalResult writes for the result every allowed
// or refused call of the gateway gives (toResult: one text, no
// structured content, no _meta, no annotations), written straight from
// the decision's text: the SDK's path encodes it three times over (the
// content's MarshalJSON, the result's, the encoder's), each scanning the
// text again, a sixth of the gateway's own time on an upstream Echo
// (issue 49). info is the server's info as json.Marshal writes it. ok is
// false for any other result, which marshalResult writes as the SDK does.
func plainResult(res *mcp.CallToolResult, info []byte, typed, perRequest bool) (b []byte, ok bool) {
	if res == nil || len(res.Content) != 1 || len(res.Meta) != 0 || res.StructuredContent != nil ||
		res.InputRequests != nil || res.RequestState != "" || (perRequest && info == nil) {
		return nil, false
	}
	t, isText := res.Content[0].(*mcp.TextContent)
	if !isText || len(t.Meta) != 0 || t.Annotations != nil {
		return nil, false
	}
	text, err := json.Marshal(t.Text) // with HTML escapes, as the content's MarshalJSON writes it
	if err != nil {
		return nil, false
	}
	b = make([]byte, 0, len(text)+len(info)+96)
	b = append(b, '{')
	if perRequest {
		b = append(append(append(b, `"_meta":{"`+mcp.MetaKeyServerInfo+`":`...), info...), "},"...)
	}
	b = append(append(append(b, `"content":[{"type":"text","text":`...), text...), "}]"...)
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	if typed {
		b = append(b, `,"resultType":"complete"`...)
	}
	return append(b, '}'), true
}

// PlainFrame is the frame of the response under id to a tools/call that
// gave res, as the SDK's session and encoder write it, written straight
// from the decision's text (plainResult, resultFrame): with the server's
// info (info, as json.Marshal writes it) in its _meta and resultType
// "complete" when the client speaks 2026-07-28 (newer), as the SDK's
// server answers it over streamable HTTP. ok is false for any other
// result, or an id the encoder spells otherwise, which the caller
// encodes with the SDK.
func PlainFrame(id jsonrpc.ID, res *mcp.CallToolResult, info []byte, newer bool) ([]byte, bool) {
	b, ok := plainResult(res, info, newer, newer)
	if !ok {
		return nil, false
	}
	return resultFrame(&jsonrpc.Response{ID: id, Result: b})
}

// plainCall reads a tools/call's params that hold a name, arguments and
// a _meta and nothing else, each once, the name a string: false for any
// other, which the SDK's server reads as it does.
func plainCall(params json.RawMessage) (name string, args, meta json.RawMessage, ok bool) {
	rd, d := decoder(params)
	defer readers.Put(rd)
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", nil, nil, false
	}
	named := false
	for d.PeekKind() == '"' {
		key, err := d.ReadToken()
		if err != nil {
			return "", nil, nil, false
		}
		switch k := key.String(); k {
		case "name":
			v, err := d.ReadToken()
			if err != nil || v.Kind() != '"' {
				return "", nil, nil, false
			}
			name, named = v.String(), true
		case "arguments", "_meta":
			start := d.InputOffset()
			if d.SkipValue() != nil {
				return "", nil, nil, false
			}
			v := bytes.TrimLeft(params[start:d.InputOffset()], " \t\r\n:")
			if k == "arguments" {
				args = v
			} else if meta = v; string(v) == "null" {
				return "", nil, nil, false
			}
		default:
			return "", nil, nil, false
		}
	}
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '}' || !named {
		return "", nil, nil, false
	}
	if _, err := d.ReadToken(); err == nil {
		return "", nil, nil, false
	}
	return name, args, meta, true
}

// direct takes a tools/call the guard read, to answer it itself with
// answer in the background under ctx (cancelled when the client cancels
// the request); false leaves it to the SDK's server.
type direct func(ctx context.Context, req *jsonrpc.Request, answer func(*jsonrpc.Response)) bool

// workers run the calls answered here on goroutines kept from the calls
// before, whose stacks have grown to a call's depth once: a goroutine of
// its own for each call grew its stack again each time, a tenth of the
// gateway's own processor time on an upstream Echo (issue 49). A call
// never waits for another: with no worker idle, it gets a new one. An
// idle worker waits for the next call until the session ends.
type workers struct {
	once sync.Once
	idle chan func()
	live sync.WaitGroup // the workers, which end with their session
}

// run runs f on an idle worker, or on a new one when none is idle; the
// workers end with ctx.
func (w *workers) run(ctx context.Context, f func()) {
	w.once.Do(func() { w.idle = make(chan func()) })
	select {
	case w.idle <- f:
	default:
		w.live.Go(func() { w.work(ctx, f) })
	}
}

// work runs f, then each call handed to it, until ctx ends.
func (w *workers) work(ctx context.Context, f func()) {
	for {
		f()
		select {
		case f = <-w.idle:
		case <-ctx.Done():
			return
		}
	}
}
