package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/plugin/host"
)

type mcpParams struct {
	Policy  string
	Surface string
	Workdir string
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
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
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
	plugins := host.New(p.Log)
	defer plugins.Close()
	gen, err := loadPolicy(p.Policy, plugins)
	if err != nil {
		return cli.Exit(err.Error(), exitFinding)
	}
	gw := gateway.New(gen, gateway.Options{Workdir: workdir, Chain: chain, Logger: p.Log, Runner: pluginRunner{plugins}})
	server := mcp.NewServer(&mcp.Implementation{Name: "aimon-gw", Version: "v0"}, &mcp.ServerOptions{Logger: p.Log})
	defs, err := gw.Tools(chain)
	if err != nil {
		return cli.Exit("aimon-gw: "+err.Error(), exitFinding)
	}
	var seq atomic.Int64
	for _, d := range defs {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw: the schema of %s is not JSON: %v.", d.Name, err), exitUsage)
		}
		name := d.Name
		server.AddTool(&mcp.Tool{Name: name, Description: d.Description, InputSchema: schema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				input := req.Params.Arguments
				if len(input) == 0 || string(input) == "null" {
					input = json.RawMessage("{}") // MCP lets a call without parameters omit them
				}
				text, isErr := gw.Call(ctx, chain, "mcp_"+strconv.FormatInt(seq.Add(1), 10), name, input)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isErr}, nil
			})
	}
	if err := server.Run(ctx, p.Transport); err != nil && ctx.Err() == nil {
		return cli.Exit("aimon-gw mcp: "+err.Error()+".", exitUsage)
	}
	return nil
}
