package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/front/mcpfront"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/policy"
)

// MCPServer is the gateway as an MCP server (the official Go SDK's), as
// aimon-gw mcp serves it: the tools the gateway's Surface may use, with
// their schemas and annotations, each call through the one decision and
// run when allowed; an asked call is put to the person through the
// client's elicitation. The tools follow every Swap (tools/list_changed).
// Run it on any transport: server.Run(ctx, &mcp.StdioTransport{}).
func (g *Gateway) MCPServer() (*mcp.Server, error) {
	g.mu.Lock()
	if g.surfaces == nil {
		g.surfaces = mcpfront.Over(g.ctx, g.inner, g.log, "aimon.dev/gw")
	}
	s := g.surfaces
	g.mu.Unlock()
	return s.Server(g.opts.Surface)
}

// HTTPHandler serves MCPServer over streamable HTTP (the SDK's handler),
// one session per client. It authenticates no one: put the program's own
// authentication in front of it (aimon-gw mcp --listen maps each caller's
// token to a surface; this handler serves the gateway's Surface to all).
func (g *Gateway) HTTPHandler() (http.Handler, error) {
	server, err := g.MCPServer()
	if err != nil {
		return nil, err
	}
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), nil
}

// Middleware puts the gateway in front of a team's own MCP server (the
// official Go SDK's), as receiving middleware:
//
//	server.AddReceivingMiddleware(gw.Middleware())
//
// Every tools/call is decided by the one decision before the server's
// handler sees it, and recorded in the decision log: a tool the policy
// does not define, or that the gateway's Surface may not call, an input
// that breaks the tool's schema in the policy, a subject the lists refuse,
// is answered with the decision's sentence as a tool error (isError), and
// the server's tool never runs; an asked call is refused likewise, since
// no person can be asked here. An allowed call reaches the server with its
// canonical input (rule R7). tools/list lists only the server's tools the
// Surface may call (P9). Other methods pass through.
func (g *Gateway) Middleware() mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch r := req.(type) {
			case *mcp.CallToolRequest:
				if r.Params == nil {
					break // the SDK answers a call without params
				}
				d := g.Decide(ctx, Call{Name: r.Params.Name, Input: r.Params.Arguments})
				if !d.Allowed {
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: d.Reason}}}, nil
				}
				if d.Input != nil {
					canonical, err := json.Marshal(d.Input)
					if err != nil {
						return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("The gateway cannot encode the input of %s it decided on (%v), so the call was not run.", r.Params.Name, err)}}}, nil
					}
					r.Params.Arguments = canonical
				}
			case *mcp.ListToolsRequest:
				res, err := next(ctx, method, req)
				if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
					list.Tools = g.listed(list.Tools)
				}
				return res, err
			}
			return next(ctx, method, req)
		}
	}
}

// listed keeps the tools the gateway's Surface may call under the policy
// in force.
func (g *Gateway) listed(ts []*mcp.Tool) []*mcp.Tool {
	defs, err := g.inner.Tools(nil)
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(ts, func(t *mcp.Tool) bool {
		return !slices.ContainsFunc(defs, func(d igw.ToolDef) bool { return d.Name == t.Name })
	})
}

// Middleware is gateway.New(pol, opts) in front of a team's own MCP
// server, for a program that never swaps the policy or closes the gateway
// (see (*Gateway).Middleware):
//
//	mw, err := gateway.Middleware(pol, gateway.Options{DecisionLog: "decisions.jsonl"})
//	server.AddReceivingMiddleware(mw)
func Middleware(pol *policy.Policy, opts Options) (mcp.Middleware, error) {
	g, err := New(pol, opts)
	if err != nil {
		return nil, err
	}
	return g.Middleware(), nil
}
