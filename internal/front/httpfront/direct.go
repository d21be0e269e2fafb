package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/front/mcpfront"
)

// The SDK's stateless streamable-HTTP handler connects a session to the
// chain's server for every POST, and that costs as much as the rest of a
// call (issue 49). A tools/call the SDK would take as it stands is
// answered here instead, by the chain's server made once (mcpfront's
// CallTool, the handler the SDK would call), with what the SDK's session
// would have told it (the protocol version, the capabilities a 2026-07-28
// request declares), and answered as the SDK's transport answers it: one
// server-sent event. Anything else the SDK would question (a batch, a
// header it checks, a version it does not speak, a body it would refuse)
// goes to the SDK's path as before, so that its answer stays the SDK's.

// newProtocol is the first MCP version whose requests each carry the
// client's version and capabilities in _meta (SEP-2575).
const newProtocol = "2026-07-28"

// direct answers r's tools/call m, read already, with ctx the call's
// context (its carrier); false when it leaves the request to the SDK,
// having written nothing.
func (f *front) direct(ctx context.Context, w http.ResponseWriter, r *http.Request, who caller, m mcpfront.Frame) bool {
	id := m.RequestID
	if !id.IsValid() || len(m.Params) == 0 || m.Params[0] != '{' || !sdkWouldTake(r) {
		return false
	}
	var params mcp.CallToolParamsRaw
	if jsonv2.Unmarshal(m.Params, &params) != nil {
		return false
	}
	peer, ok := peerOf(r, &params)
	if !ok {
		return false
	}
	req := &mcp.CallToolRequest{Params: &params, Extra: &mcp.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header}}
	res, err := f.surfaces.CallTool(ctx, who.chain, req, peer)
	if errors.Is(err, mcpfront.ErrNotDirect) {
		return false
	}
	newer := peer.ProtocolVersion >= newProtocol
	if err == nil {
		// The gateway's plain result, framed straight from its text: the
		// SDK's encoders write the same bytes, scanning the text three
		// times over (issue 49).
		if data, ok := mcpfront.PlainFrame(id, res, f.serverInfo(), newer); ok {
			writeEvent(w, data)
			return true
		}
	}
	writeEvent(w, f.encodedAnswer(id, res, err, newer))
	return true
}

// serverInfo is the gateway's info as the SDK writes it in a result's
// _meta (json.Marshal's, with HTML escapes); nil when it cannot be
// written, which leaves every result to the SDK's encoders.
func (f *front) serverInfo() []byte {
	f.infoOnce.Do(func() {
		if b, err := json.Marshal(f.implementation()); err == nil {
			f.info = b
		}
	})
	return f.info
}

func (f *front) implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "aimon-gw", Version: f.o.Version}
}

// encodedAnswer is the response under id to a call that gave res or err,
// encoded as the SDK's session and transport encode it; newer when the
// client speaks 2026-07-28.
func (f *front) encodedAnswer(id jsonrpc.ID, res *mcp.CallToolResult, err error, newer bool) []byte {
	resp := &jsonrpc.Response{ID: id, Error: err}
	if err == nil {
		if newer {
			// As the SDK's session answers a 2026-07-28 request: the
			// server names itself in the result's _meta.
			if res.Meta == nil {
				res.Meta = mcp.Meta{}
			}
			if _, ok := res.Meta[mcp.MetaKeyServerInfo]; !ok {
				res.Meta[mcp.MetaKeyServerInfo] = f.implementation()
			}
		}
		b, merr := res.MarshalJSON()
		if merr != nil {
			resp.Error = merr
		} else {
			resp.Result = b
			if newer {
				resp.Result = withResultType(b, res)
			}
		}
	}
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		data, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: err})
	}
	return data
}

// writeEvent answers with the one server-sent event data, as the SDK's
// stateless transport answers a request.
func writeEvent(w http.ResponseWriter, data []byte) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Connection", "keep-alive")
	out := make([]byte, 0, len(data)+len("event: message\ndata: \n\n"))
	out = append(append(append(out, "event: message\ndata: "...), data...), "\n\n"...)
	w.Write(out)
	http.NewResponseController(w).Flush()
}

// unreadable answers m with the JSON-RPC error the SDK's server gives it
// before any handler runs (mcpfront.RequestProblem), in stdio's words, as
// the SDK's handler answers: params it cannot decode in the request's one
// event, a method it does not answer or missing params with 400 (404 for
// an unknown method at 2026-07-28), the error as the body instead of the
// SDK's plain text; a notification the SDK does not know is accepted
// and ignored, as stdio ignores it, not refused as text. False when the SDK takes m, or would refuse r for
// another reason first.
func unreadable(w http.ResponseWriter, r *http.Request, m mcpfront.Frame) bool {
	if mcpfront.UnknownNotification(m) && sdkWouldTake(r) {
		// Ignored, as over stdio: a notification is never answered.
		w.WriteHeader(http.StatusAccepted)
		return true
	}
	e, inStream := mcpfront.RequestProblem(m)
	if e == nil || !sdkWouldTake(r) {
		return false
	}
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: m.RequestID, Error: e})
	if err != nil {
		return false
	}
	if inStream {
		writeEvent(w, data)
		return true
	}
	status := http.StatusBadRequest
	if e.Code == jsonrpc.CodeMethodNotFound && r.Header.Get("Mcp-Protocol-Version") >= newProtocol {
		status = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
	return true
}

// withResultType is the result b of res as the SDK completes a tool's
// result at 2026-07-28 (multi round-trip): "resultType" says whether the
// call is complete or waits for the client's input.
func withResultType(b []byte, res *mcp.CallToolResult) []byte {
	if len(b) < 2 || b[len(b)-1] != '}' {
		return b
	}
	rt := "complete"
	if res.InputRequests != nil {
		rt = "input_required"
	}
	out := append([]byte(nil), b[:len(b)-1]...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, `"resultType":"`+rt+`"}`...)
}

// peerOf is what the SDK's session would know of r's client: at
// 2026-07-28 the version and capabilities the request declares (its
// _meta and its Mcp-Protocol-Version header agreeing, the Mcp-Method and
// Mcp-Name headers the call's), before it the header's version alone; ok
// is false where the SDK would answer with an error of its own.
func peerOf(r *http.Request, p *mcp.CallToolParamsRaw) (mcpfront.Peer, bool) {
	header := r.Header.Get("Mcp-Protocol-Version")
	if header != "" && !slices.Contains(mcp.SupportedProtocolVersions(), header) {
		return mcpfront.Peer{}, false
	}
	metaVersion, _ := p.Meta[mcp.MetaKeyProtocolVersion].(string)
	if header < newProtocol {
		if _, ok := p.Meta[mcp.MetaKeyProtocolVersion]; ok {
			return mcpfront.Peer{}, false
		}
		if header == "" {
			header = "2025-03-26" // the SDK's, for a request that names none
		}
		return mcpfront.Peer{ProtocolVersion: header, Stateless: true}, true
	}
	if metaVersion != header || r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != p.Name {
		return mcpfront.Peer{}, false
	}
	var meta struct {
		Info *mcp.Implementation     `json:"io.modelcontextprotocol/clientInfo"`
		Caps *mcp.ClientCapabilities `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	if b, err := jsonv2.Marshal(p.Meta); err != nil || jsonv2.Unmarshal(b, &meta) != nil || meta.Caps == nil {
		return mcpfront.Peer{}, false
	}
	return mcpfront.Peer{ProtocolVersion: header, Capabilities: meta.Caps, Stateless: true}, true
}

// sdkWouldTake reports whether the SDK's stateless handler would take r
// as far as its message: a JSON body that accepts an event stream, not a
// loopback listener asked under another host's name (DNS rebinding).
func sdkWouldTake(r *http.Request) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	// The SDK's reading of Accept: both, by name or by a wildcard.
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for raw := range strings.SplitSeq(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	if !jsonOK || !streamOK {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback(local.String()) && !loopback(r.Host) {
		return false
	}
	return true
}

// loopback reports whether addr (host, or host:port) is this machine's.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
