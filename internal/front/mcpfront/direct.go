package mcpfront

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrNotDirect is CallTool's error for a call it leaves to the SDK's
// request path: at 2026-07-28, a tool whose input schema binds a
// parameter to an HTTP header, which the SDK's transport checks against
// the request's.
var ErrNotDirect = errors.New("the call is left to the SDK's request path")

// CallTool answers a tools/call of chain that the HTTP front read itself,
// as chain's server answers it through the SDK (the same handler, the
// unlisted tools' sentence, the result completed as the SDK's callTool
// completes it), without a session made for the one request: over
// stateless HTTP the SDK makes one per POST, which cost as much as the
// rest of the call (issue 49). The server of chain is made once and
// follows the generation in force (sync), as for the SDK's path. A tool
// the chain does not list is answered before its handler, as the SDK's
// middleware answers it; the caller types either result at 2026-07-28.
func (s *Surfaces) CallTool(ctx context.Context, chain []string, req *mcp.CallToolRequest, p Peer) (*mcp.CallToolResult, error) {
	ts, err := s.toolSet(chain)
	if err != nil {
		return nil, err
	}
	ts.mu.Lock()
	headed := ts.headed[req.Params.Name]
	ts.mu.Unlock()
	if headed && p.ProtocolVersion >= newProtocol {
		return nil, ErrNotDirect
	}
	return ts.callTool(ctx, req, p)
}

// callTool answers a tools/call as m's server answers it through the
// SDK, on whichever transport read it (CallTool; stdio's guard).
func (m *toolSet) callTool(ctx context.Context, req *mcp.CallToolRequest, p Peer) (*mcp.CallToolResult, error) {
	gw := m.gw.Load()
	if !m.isListed(req.Params.Name) {
		return toResult(m.call(withToken(ctx, req), gw, principalOf(req), req.Params.Name, req.Params.Arguments)), nil
	}
	res, err := m.handle(ctx, gw, req, p)
	if err != nil || res == nil {
		return res, err
	}
	if res.InputRequests != nil && len(res.Content) > 0 {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "server bug: result has both content and inputRequests"}
	}
	if res.Content == nil && res.InputRequests == nil {
		res.Content = []mcp.Content{} // as the SDK: never "null"
	}
	return res, nil
}
