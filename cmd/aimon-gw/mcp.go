package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/reload"
)

type mcpParams struct {
	Policy  string
	Surface string
	Workdir string
	// LoadTimeout bounds each policy load.
	LoadTimeout time.Duration
	// Transport carries the MCP session: standard input and output in the
	// command, an in-memory pair in tests.
	Transport mcp.Transport
	Log       *slog.Logger
}

func mcpCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "mcp",
		Usage:     "serve the policy's tools to an MCP client over standard input and output",
		ArgsUsage: " ",
		Flags:     policyFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("aimon-gw mcp takes no arguments, got %q; pass the policy with --policy.", c.Args().First()), exitUsage)
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			return serveMCP(c.Context, mcpParams{
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"), LoadTimeout: c.Duration("load-timeout"),
				Transport: &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}, Log: log,
			})
		},
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCP offers the tools the surface may use as MCP tools; every call goes
// through the same gate and permission as a line of serve. A refused or
// failed call is a tool error (isError), never a protocol error.
func serveMCP(ctx context.Context, p mcpParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "aimon-gw", Version: "v0"}, &mcp.ServerOptions{Logger: p.Log})
	tools := &mcpTools{ctx: ctx, server: server, chain: chain, log: p.Log, listed: map[string]bool{}}
	rt, err := start(ctx, reload.Options{Dir: p.Policy, LoadTimeout: p.LoadTimeout, OnSwap: tools.sync,
		Gateway: gateway.Options{Workdir: workdir, Chain: chain, Logger: p.Log}})
	if err != nil {
		return err
	}
	defer rt.Close()
	tools.sync(rt.Gateway())
	if err := server.Run(ctx, p.Transport); err != nil && ctx.Err() == nil {
		return cli.Exit("aimon-gw mcp: "+err.Error()+".", exitUsage)
	}
	return nil
}

// mcpTools keeps the MCP server's tool list equal to the surface's in the
// generation in force; a reload that changes it notifies the client.
type mcpTools struct {
	ctx    context.Context // the process's: a signal cancels every call
	server *mcp.Server
	chain  []string
	log    *slog.Logger
	seq    atomic.Int64

	mu     sync.Mutex
	listed map[string]bool
}

func (m *mcpTools) sync(gw *gateway.Gateway) {
	defs, err := gw.Tools(m.chain)
	if err != nil {
		m.log.Warn("mcp: the surface has no tools under this policy", "error", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := map[string]bool{}
	for _, d := range defs {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema == nil {
			m.log.Error("mcp: a tool's schema is not a JSON object; leaving the tool out", "tool", d.Name, "error", err)
			continue
		}
		schema["type"] = "object" // every input is an object; MCP requires it be said
		name := d.Name
		now[name] = true
		m.server.AddTool(&mcp.Tool{Name: name, Description: d.Description, InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				input := req.Params.Arguments
				if len(input) == 0 || string(input) == "null" {
					input = json.RawMessage("{}") // MCP lets a call without parameters omit them
				}
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				defer context.AfterFunc(m.ctx, cancel)()
				text, isErr := gw.Call(ctx, m.chain, "mcp_"+strconv.FormatInt(m.seq.Add(1), 10), name, input)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isErr}, nil
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
	m.listed = now
}
