package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

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
// Run it on any transport: server.Run(ctx, &mcp.StdioTransport{}). A
// Surface that cannot run is an error that wraps ErrSurface.
func (g *Gateway) MCPServer() (*mcp.Server, error) {
	s, err := g.mcpSurfaces().Server(g.opts.Surface)
	if err != nil {
		return nil, kindError{ErrSurface, err}
	}
	return s, nil
}

// mcpSurfaces are the gateway's MCP servers, one per surface chain, made
// when first asked for.
func (g *Gateway) mcpSurfaces() *mcpfront.Surfaces {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.surfaces == nil {
		g.surfaces = mcpfront.Over(g.ctx, g.inner, g.log, g.version())
	}
	return g.surfaces
}

// ServeMCP serves one MCP session over r and w, newline-delimited JSON-RPC
// as a client speaks to a server it started (the stdio transport), until
// the input ends or ctx is done, as aimon-gw mcp does: MCPServer's tools
// and answers, read by one reader that answers a frame it cannot take (too
// long, not JSON-RPC, a member named twice) with an error under the
// frame's own id and goes on, so that no bad frame ends the session. Only
// answers are written to w; a frame is at most Options.MaxLineBytes (0:
// 16 MiB). A Surface that cannot run is an error that wraps ErrSurface,
// and nothing was read; the end of input is no error.
func (g *Gateway) ServeMCP(ctx context.Context, r io.Reader, w io.Writer) error {
	err := mcpfront.ServeSession(ctx, g.mcpSurfaces(), g.opts.Surface, mcpfront.Options{In: r, Out: w, MaxFrameBytes: g.opts.MaxLineBytes})
	if errors.Is(err, mcpfront.ErrSurface) {
		return kindError{ErrSurface, err}
	}
	return err
}

// RefuseMCP answers the first request an MCP client sends on r (its
// initialize) with an error whose message is reason, on w, so that the
// client shows why the server is about to exit rather than "connection
// closed": what aimon-gw mcp does when its policy does not load. It waits
// for that request at most wait, and returns at once at the end of input.
func RefuseMCP(r io.Reader, w io.Writer, reason string, wait time.Duration) {
	mcpfront.Refuse(r, w, reason, wait)
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
