// Package mcpfront serves the gateway to MCP clients over the official Go
// SDK: the surface's tools with their annotations, every call through the
// same gate and permission as a line of serve, and a transport in front of
// the SDK so that no bad frame ends the session.
package mcpfront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
)

// Options configure Serve.
type Options struct {
	// Reload starts the gateway (its Gateway.Chain is the surface).
	Reload reload.Options
	// In and Out carry the session (standard input and output); Transport,
	// when set, replaces them (an in-memory pair in tests).
	In        io.Reader
	Out       io.Writer
	Transport mcp.Transport
	// MaxFrameBytes bounds one frame; 0 means 16 MiB.
	MaxFrameBytes int
	// Version is the server's version in serverInfo.
	Version string
	// SDKCalls leaves every tools/call to the SDK's server, as before the
	// guard answered them (stdiodirect.go): the other path of the tests that
	// compare the two, and a benchmark's anchor.
	SDKCalls bool
}

// sdkCallsKey marks a context whose sessions leave every tools/call to the
// SDK's server (WithSDKCalls).
type sdkCallsKey struct{}

// WithSDKCalls is ctx with every tools/call of the sessions served under
// it left to the SDK's server (Options.SDKCalls): how a test of the
// command, which serves through the public gateway, takes the other path.
func WithSDKCalls(ctx context.Context) context.Context {
	return context.WithValue(ctx, sdkCallsKey{}, true)
}

// ErrSurface is wrapped by Serve's error when the surface cannot run under
// the policy (an undeclared surface, lists with no tool in common).
var ErrSurface = errors.New("the surface cannot run under this policy")

// ErrStart is wrapped by Serve's error when the session never started (the
// policy does not load, or the surface cannot run): the client's first
// request is still unanswered, and Refuse can answer it.
var ErrStart = errors.New("the MCP session did not start")

// startError is the error of a session that did not start; its text is
// the cause's sentence alone.
type startError struct {
	err     error
	surface bool
}

func (e startError) Error() string { return e.err.Error() }
func (e startError) Unwrap() error { return e.err }
func (e startError) Is(target error) bool {
	return target == ErrStart || e.surface && target == ErrSurface
}

// Serve serves one MCP session until it ends or ctx is done.
func Serve(ctx context.Context, o Options) error {
	surfaces, rt, err := Start(ctx, ctx, o.Reload, o.Version)
	if err != nil {
		return startError{err: err}
	}
	defer rt.Close()
	return ServeSession(ctx, surfaces, o.Reload.Gateway.Chain, o)
}

// ServeSession serves one MCP session of chain's tools, from s, over o's
// In and Out (or Transport) until it ends or ctx is done; o.Reload is not
// read. A chain that cannot run is an error that wraps ErrStart and
// ErrSurface.
func ServeSession(ctx context.Context, s *Surfaces, chain []string, o Options) error {
	ts, err := s.toolSet(chain)
	if err != nil {
		return startError{err: err, surface: true}
	}
	o.SDKCalls = o.SDKCalls || ctx.Value(sdkCallsKey{}) != nil
	var session atomic.Pointer[mcp.ServerSession]
	t := o.Transport
	if t == nil {
		max := o.MaxFrameBytes
		if max <= 0 {
			max = 16 << 20
		}
		g := newGuard(o.In, o.Out, max)
		g.dropped = ts.dropped
		if !o.SDKCalls {
			g.direct = ts.directCalls(session.Load, g.base)
		}
		// No answer is written after Serve returns: the calls it answers
		// itself end with the session (Close cancels them).
		defer g.answers.Wait()
		t = g
	}
	if err := run(ctx, ts.server, t, &session); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// run is the SDK's Server.Run, with the session kept for the calls the
// guard answers.
func run(ctx context.Context, server *mcp.Server, t mcp.Transport, session *atomic.Pointer[mcp.ServerSession]) error {
	ss, err := server.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	session.Store(ss)
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	select {
	case <-ctx.Done():
		ss.Close()
		<-ended
		return ctx.Err()
	case err := <-ended:
		return err
	}
}

// toolSet keeps the MCP server's tool list equal to the surface's in the
// generation in force; a reload that changes it notifies the client.
type toolSet struct {
	ctx    context.Context // the process's: a signal cancels every call
	server *mcp.Server
	chain  []string
	log    *slog.Logger
	seq    *atomic.Int64                   // the calls' ids, shared by the surfaces
	oob    OutOfBand                       // nil: every ask goes to the client
	impl   *mcp.Implementation             // the server's, for the calls answered without it
	gw     atomic.Pointer[gateway.Gateway] // the generation's in force, for dropped calls

	mu     sync.Mutex
	listed map[string]bool
	// headed are the listed tools whose input schema binds a parameter
	// to an HTTP header (x-mcp-header), which the SDK checks.
	headed map[string]bool
	gen    *provision.Generation // whose tools are listed
}

// behind reports whether the generation in force is not the one whose
// tools the server lists.
func (m *toolSet) behind(gw *gateway.Gateway) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen != gw.Current()
}

func (m *toolSet) isListed(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listed[name]
}

// unlisted answers a call of a tool the server does not list with the
// gateway's sentence, unknown and not allowed told apart (rule P9), and
// one decision-log record, as serve does, whatever the transport; the SDK
// would say "unknown tool" in a protocol error.
func (m *toolSet) unlisted(gw *gateway.Gateway) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if _, ok := req.(*mcp.ListToolsRequest); ok {
				// A listing waits for the MCP servers the first
				// generation still waits for, each within its bound, so
				// that a client that lists once sees their tools; calls
				// of the others are answered meanwhile (rule R10).
				gw.Await(ctx)
				if m.behind(gw) {
					m.sync(gw) // the swap's own sync may not have run yet
				}
			}
			if call, ok := req.(*mcp.CallToolRequest); ok && call.Params != nil && !m.isListed(call.Params.Name) {
				res := toResult(m.call(withToken(ctx, call), gw, principalOf(call), call.Params.Name, call.Params.Arguments))
				if typedFor(call.Session) {
					res = completed(res)
				}
				return res, nil
			}
			return next(ctx, method, req)
		}
	}
}

// call runs one call through the gateway, cancelled with the process;
// principal is who called, "" when the session says nothing of it (stdio).
func (m *toolSet) call(ctx context.Context, gw *gateway.Gateway, principal, name string, input json.RawMessage, approvals ...string) gateway.CallResult {
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}") // MCP lets a call without parameters omit them
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(m.ctx, cancel)()
	if carrier, ok := ctx.Value(carrierKey{}).(context.Context); ok {
		// The SDK detaches a handler from its HTTP request (before the
		// 2026-07-28 protocol): the front end says when it ends.
		defer context.AfterFunc(carrier, cancel)()
	}
	gw.Await(ctx, name) // its parameters are the server's, once it answered
	input = dropClientParameters(gw.Current(), name, input)
	c := gateway.Call{ID: m.nextID(), Name: name, Input: input, Approvals: approvals, Principal: principal, Caller: callerOf(ctx)}
	c.Session, _ = ctx.Value(sessionKey{}).(gateway.Session)
	return gw.CallApproved(ctx, m.chain, c)
}

// nextID is the id of the session's next call, for the decision log.
func (m *toolSet) nextID() string { return "mcp_" + strconv.FormatInt(m.seq.Add(1), 10) }

// handle answers a tools/call. A call that needs a person's approval (rule
// P15) is answered with an input request (MCP's multi round-trip, which
// the SDK turns into an elicitation for clients before 2026-07-28) whose
// request state is the sealed approval token; the call sent back with the
// person's answer and that state runs only if the person approved. A
// client that declares no elicitation cannot be asked: the call is refused
// with a sentence.
//
// Over HTTP a policy's sessions (rule P18) are sealed handles: the call's
// _meta names its session's (gateway.SessionMeta), or none to begin one,
// and its result carries the handle to send back; a handle the gateway
// did not seal, or sealed for another caller, is refused with a sentence.
func (m *toolSet) handle(ctx context.Context, gw *gateway.Gateway, req *mcp.CallToolRequest, p Peer) (*mcp.CallToolResult, error) {
	sent, _ := req.Params.Meta[gateway.SessionMeta].(string)
	sess, handle, err := gw.OpenSession(principalOf(req), sent)
	if err != nil {
		// Decided as any call is, so that the decision log records the
		// refusal once, with its rule.
		d := rule.Refused(rule.P18, err.Error())
		_, d = gw.DecideContext(ctx, m.chain, gateway.Call{ID: m.nextID(), Name: req.Params.Name, Input: req.Params.Arguments, Principal: principalOf(req), Caller: callerOf(ctx), Refusal: &d})
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: d.Reason}}}, nil
	}
	res, err := m.handleCall(context.WithValue(ctx, sessionKey{}, sess), gw, req, p)
	if res != nil && handle != "" {
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[gateway.SessionMeta] = handle
	}
	return res, err
}

type sessionKey struct{}

func (m *toolSet) handleCall(ctx context.Context, gw *gateway.Gateway, req *mcp.CallToolRequest, p Peer) (*mcp.CallToolResult, error) {
	name, args, principal := req.Params.Name, req.Params.Arguments, principalOf(req)
	ctx = withToken(ctx, req)
	oob := OutOfBandCall{Request: req, Chain: m.chain, Legacy: p.stateless(), Capabilities: p.Capabilities,
		Run: func(token string) gateway.CallResult { return m.call(ctx, gw, principal, name, args, token) }}
	if state := req.Params.RequestState; state != "" && m.oob != nil {
		if res, err, ok := m.oob.Resume(ctx, state, oob); ok {
			return res, err
		}
	}
	if state := req.Params.RequestState; state != "" {
		answer, _ := req.Params.InputResponses[approveKey].(*mcp.ElicitResult)
		if answer == nil || answer.Action != "accept" || answer.Content["approve"] != true {
			action := "no answer"
			if answer != nil {
				action = answer.Action
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s needs a person's approval, and the person did not approve it (%s), so the call was not run.", name, action)}}}, nil
		}
		return reply(m.call(ctx, gw, principal, name, args, state))
	}
	r := m.call(ctx, gw, principal, name, args)
	if r.Approval == "" {
		return reply(r)
	}
	if m.oob != nil && principal != "" {
		oob.Asked = r
		if res, err := m.oob.Ask(ctx, oob); res != nil || err != nil {
			return res, err
		}
	}
	reason, _, _ := strings.Cut(r.Text, " A person must approve it")
	if p.stateless() {
		return reply(gateway.CallResult{IsError: true, Text: reason + " This call came over stateless HTTP under MCP protocol " + p.ProtocolVersion + ", where every request is a session of its own: the gateway cannot send the client an elicitation in the middle of the call, so no person can be asked, whatever the client declared, and the call is refused; approve it over stdio (aimon-gw mcp), through a client of protocol 2026-07-28 or later, or change the policy."})
	}
	if p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return reply(gateway.CallResult{IsError: true, Text: reason + " This MCP client declares no elicitation, so no person can be asked, and the call is refused; approve it through a client that can ask, or change the policy."})
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approveKey: &mcp.ElicitParams{
			Message: reason + " Approve this call?",
			RequestedSchema: map[string]any{"type": "object", "required": []string{"approve"},
				"properties": map[string]any{"approve": map[string]any{"type": "boolean", "title": "Approve " + name}}},
		}},
		RequestState: r.Approval,
	}, nil
}

// Peer is what the session of a call says of its client: the protocol
// version and the capabilities it declared. Over stateless HTTP before
// 2026-07-28 a request is a session of its own and declares none.
type Peer struct {
	ProtocolVersion string
	Capabilities    *mcp.ClientCapabilities
	// Stateless is a request of stateless HTTP: before 2026-07-28 its
	// client's initialize was another request.
	Stateless bool
}

// stateless reports whether the call is one request of stateless HTTP
// under a protocol before 2026-07-28, whose client can be sent no input
// request.
func (p Peer) stateless() bool { return p.Stateless && p.ProtocolVersion < newProtocol }

// newProtocol is the first MCP version whose requests each carry their
// client's version and capabilities (SEP-2575).
const newProtocol = "2026-07-28"

// peerOf is what session says of its client. Over stateless HTTP before
// 2026-07-28 the SDK makes up its initialize parameters (a version, no
// client, no capabilities), since the client's initialize was another
// request.
func peerOf(session *mcp.ServerSession) Peer {
	if session == nil {
		return Peer{}
	}
	p := session.InitializeParams()
	if p == nil {
		return Peer{}
	}
	return Peer{ProtocolVersion: p.ProtocolVersion, Capabilities: p.Capabilities, Stateless: p.ClientInfo == nil && p.Capabilities == nil}
}

// OutOfBand has the asked calls of HTTP callers approved by the people
// the policy names (approvers), on a page of the gateway's, instead of by
// the caller's client (rule P15).
type OutOfBand interface {
	// Ask answers an asked call (c.Asked) that an approver covers: a
	// pending approval, or what its decision leads to (as Reply); nil and
	// nil when none covers it, and the client is asked as before.
	Ask(ctx context.Context, c OutOfBandCall) (*mcp.CallToolResult, error)
	// Resume answers a retry that carries state, when the state is one
	// that Ask gave (ok); ok is false for any other.
	Resume(ctx context.Context, state string, c OutOfBandCall) (res *mcp.CallToolResult, err error, ok bool)
}

// OutOfBandCall is a call as OutOfBand sees it.
type OutOfBandCall struct {
	Request *mcp.CallToolRequest
	// Chain is the surface chain the call runs on.
	Chain []string
	// Legacy is a stateless request of a protocol before 2026-07-28: the
	// client can be sent no input request.
	Legacy bool
	// Capabilities are what the client declared; nil when it declared
	// none.
	Capabilities *mcp.ClientCapabilities
	// Asked is the ask's result (Ask only).
	Asked gateway.CallResult
	// Run runs the call again with the approval token given.
	Run func(token string) gateway.CallResult
}

// SetOutOfBand makes o answer the asks of the servers made from now on;
// call it before the first.
func (s *Surfaces) SetOutOfBand(o OutOfBand) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.oob = o
}

// Reply is r as the answer to a tools/call: a tool result, or the
// JSON-RPC error of a call a limit refused (rule P19).
func Reply(r gateway.CallResult) (*mcp.CallToolResult, error) { return reply(r) }

type carrierKey struct{}

// WithCarrier is ctx with the context of what carries its requests (an
// HTTP request, cancelled when the client closes the connection or sends
// notifications/cancelled): a tool call it carries stops when it ends, as
// over stdio.
func WithCarrier(ctx, carrier context.Context) context.Context {
	return context.WithValue(ctx, carrierKey{}, carrier)
}

// dropClientParameters drops from input the parameters the policy names
// as added by clients (mcp.clientParameters) that the tool does not
// declare itself; any other unknown parameter is left for the gate.
func dropClientParameters(cur *provision.Generation, name string, input json.RawMessage) json.RawMessage {
	if cur == nil || len(cur.ClientParameters) == 0 || cur.Tools[name] == nil {
		return input
	}
	// jsonv2 refuses duplicate names: such an input goes to the gate as sent.
	var args map[string]jsontext.Value
	if jsonv2.Unmarshal(input, &args) != nil {
		return input
	}
	var declared struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	dropped := false
	for _, p := range cur.ClientParameters {
		if _, ok := args[p]; !ok {
			continue
		}
		if declared.Properties == nil {
			js, err := cur.Tools[name].JSONSchema()
			if err != nil || json.Unmarshal(js, &declared) != nil {
				return input
			}
			if declared.Properties == nil {
				declared.Properties = map[string]json.RawMessage{}
			}
		}
		if _, own := declared.Properties[p]; !own {
			delete(args, p)
			dropped = true
		}
	}
	if !dropped {
		return input
	}
	out, err := jsonv2.Marshal(args, jsonv2.Deterministic(true))
	if err != nil {
		return input
	}
	return out
}

// principalOf is who made the request, as the HTTP front authenticated
// it; "" over stdio.
// callerOf is the claims of the token the call came with (HTTP), for the
// limits (rule P19); nil over stdio.
func callerOf(ctx context.Context) *policy.Claims {
	ti, _ := ctx.Value(tokenKey{}).(*auth.TokenInfo)
	if c, ok := authn.Claims(ti); ok {
		return &c
	}
	return nil
}

type tokenKey struct{}

// withToken is ctx with the token the request came with, for callerOf.
func withToken(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		return context.WithValue(ctx, tokenKey{}, req.Extra.TokenInfo)
	}
	return ctx
}

func principalOf(req *mcp.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return ""
}

// approveKey names the one input request of an ask.
const approveKey = "approve"

// LimitedCode is the JSON-RPC error of a call a limit refused (rule P19),
// as ToolHive answers it: its data says when to retry.
const LimitedCode = -32029

// reply is a call's result; a call a limit refused is the JSON-RPC error
// LimitedCode with the sentence and {"retryAfterSeconds": N} as its data,
// so that a client can wait rather than have the model try again at once.
func reply(r gateway.CallResult) (*mcp.CallToolResult, error) {
	if r.RetryAfter > 0 {
		data, _ := json.Marshal(map[string]any{"retryAfterSeconds": r.RetryAfter})
		return nil, &jsonrpc.Error{Code: LimitedCode, Message: r.Text, Data: data}
	}
	return toResult(r), nil
}

// typedFor reports whether the SDK types a tool's result for session
// (its multi round-trip, 2026-07-28 on): a session that did not
// initialize is taken at the SDK's latest version, as the SDK takes it.
func typedFor(session *mcp.ServerSession) bool {
	if session == nil {
		return false
	}
	p := session.InitializeParams()
	return p == nil || p.ProtocolVersion >= newProtocol
}

// completed is res typed "complete", as the SDK's callTool types a listed
// tool's result for a client of 2026-07-28: a call of a tool not listed
// (a server still connecting, an unknown name) is answered before the
// SDK's callTool, and was answered without a resultType. The SDK keeps
// the type unexported and sets it from JSON only.
func completed(res *mcp.CallToolResult) *mcp.CallToolResult {
	b, err := res.MarshalJSON()
	if err != nil || len(b) < 2 || bytes.Contains(b, []byte(`"resultType"`)) {
		return res
	}
	typed := append(b[:len(b)-1:len(b)-1], `,"resultType":"complete"}`...)
	if len(b) == 2 {
		typed = []byte(`{"resultType":"complete"}`)
	}
	var out mcp.CallToolResult
	if out.UnmarshalJSON(typed) != nil {
		return res
	}
	return &out
}

func toResult(r gateway.CallResult) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError, StructuredContent: r.Structured}
}

// dropped records a call that the client cancelled before any handler
// saw it, under the generation in force: decided as cancelled before it
// ran, and not run (rules R2, R7). A call without a tool name is no call.
func (m *toolSet) dropped(params json.RawMessage) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	gw := m.gw.Load()
	if gw == nil || json.Unmarshal(params, &p) != nil || p.Name == "" {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.call(ctx, gw, "", p.Name, p.Arguments)
}

func (m *toolSet) sync(gw *gateway.Gateway) {
	m.gw.Store(gw)
	// Listed under the lock: a listing's sync and a swap's end with the
	// tools of the newer generation.
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen = gw.Current()
	defs, err := gw.Tools(m.chain)
	if err != nil {
		m.log.Warn("mcp: the surface has no tools under this policy", "error", err)
	}
	now, headed := map[string]bool{}, map[string]bool{}
	for _, d := range defs {
		if bytes.Contains(d.InputSchema, []byte("x-mcp-header")) {
			headed[d.Name] = true
		}
		tool, err := d.MCP()
		if err != nil {
			m.log.Error("mcp: leaving a tool out", "tool", d.Name, "error", err)
			continue
		}
		name := d.Name
		now[name] = true
		m.server.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return m.handle(ctx, gw, req, peerOf(req.Session))
		})
	}
	var gone []string
	for name := range m.listed {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		m.server.RemoveTools(gone...)
	}
	m.listed, m.headed = now, headed
}

// codeNotServing is the JSON-RPC error (in the range left to servers) of a
// session refused at start.
const codeNotServing = -32000

// Refuse answers the client's first request with an error that carries the
// sentence, so that a client (the MCP Inspector) shows why the server is
// about to exit rather than "Connection closed". It waits for that request
// at most wait; at the end of input it returns at once.
func Refuse(in io.Reader, out io.Writer, sentence string, wait time.Duration) {
	g := newGuard(in, out, 1<<20)
	g.started.Do(func() { go g.readLoop(false) })
	defer g.Close()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		var f frame
		select {
		case f = <-g.frames:
		case <-timer.C:
			return
		}
		if env, p := readEnvelope(f.data); p == nil {
			if req, ok := env.msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
				g.reply(env.id, codeNotServing, sentence)
				return
			}
		}
		if f.err != nil && !errors.Is(f.err, errTooLong) {
			return
		}
	}
}
