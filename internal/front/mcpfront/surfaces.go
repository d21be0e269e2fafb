package mcpfront

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
)

// Surfaces are the MCP servers of the surface chains callers run under,
// one each, made when a chain is first asked for, over one gateway: stdio
// serves the process chain's, HTTP each caller its principal's. After a
// reload every server's tools follow the generation in force, and the
// SDK tells the clients of this process (tools/list_changed).
type Surfaces struct {
	ctx     context.Context
	log     *slog.Logger
	version string
	seq     atomic.Int64

	mu   sync.Mutex
	gw   *gateway.Gateway
	sets map[string]*toolSet
	oob  OutOfBand
}

// Start starts the gateway on o and returns its surfaces. A call is
// cancelled when calls is done (stdio: the process's context; HTTP: once
// the calls in flight had their time to finish); ctx bounds the runtime.
func Start(ctx, calls context.Context, o reload.Options, version string) (*Surfaces, *reload.Runtime, error) {
	if o.Gateway.Logger == nil {
		o.Gateway.Logger = slog.Default()
	}
	if o.Gateway.Approvals == nil {
		// An approval is asked and given within one call: a key of this
		// process's own seals it.
		a, err := gateway.NewApprovals(nil, 0)
		if err != nil {
			return nil, nil, err
		}
		o.Gateway.Approvals = a
	}
	s := &Surfaces{ctx: calls, log: o.Gateway.Logger, version: version, sets: map[string]*toolSet{}}
	o.OnSwap = s.sync
	rt, err := reload.Start(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.gw = rt.Gateway()
	s.mu.Unlock()
	return s, rt, nil
}

// Server is the MCP server of chain; an error says why the chain cannot
// run under the policy in force (an undeclared surface, lists with no
// tool in common).
func (s *Surfaces) Server(chain []string) (*mcp.Server, error) {
	ts, err := s.toolSet(chain)
	if err != nil {
		return nil, err
	}
	return ts.server, nil
}

func (s *Surfaces) toolSet(chain []string) (*toolSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.Join(chain, "\x00")
	if ts := s.sets[key]; ts != nil {
		return ts, nil
	}
	if _, err := s.gw.Tools(chain); err != nil {
		return nil, err
	}
	impl := &mcp.Implementation{Name: "aimon-gw", Version: s.version}
	server := mcp.NewServer(impl, &mcp.ServerOptions{
		Logger: s.log,
		// Tools only: the gateway sends no log notifications, so it does
		// not advertise logging.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	ts := &toolSet{ctx: s.ctx, server: server, impl: impl, chain: chain, log: s.log, listed: map[string]bool{}, seq: &s.seq, oob: s.oob}
	gw := s.gw
	// A call of a tool the surface does not list is answered as serve
	// answers it, over stdio and HTTP alike (rule P9).
	server.AddReceivingMiddleware(ts.unlisted(gw))
	ts.sync(gw)
	s.sets[key] = ts
	return ts, nil
}

// sync is the reload's OnSwap: every server's tools from the generation
// now in force.
func (s *Surfaces) sync(gw *gateway.Gateway) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.sets {
		ts.sync(gw)
	}
}
