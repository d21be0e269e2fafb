package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/mcpfront"
	"aimon.dev/gw/internal/reload"
)

type mcpParams struct {
	Policy        string
	Surface       string
	Workdir       string
	LoadTimeout   time.Duration
	MaxFrameBytes int
	Stdin         io.Reader
	Stdout        io.Writer
	Log           *slog.Logger
	Decisions     gateway.DecisionLog
	// Transport, when set, replaces Stdin and Stdout (tests).
	Transport mcp.Transport
}

func mcpCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "mcp",
		Usage:     "serve the policy's tools to an MCP client over standard input and output",
		ArgsUsage: " ",
		Flags: append(policyFlags(),
			&cli.IntFlag{Name: "max-line-bytes", Value: 16 << 20, Usage: "longest JSON-RPC frame accepted"},
			decisionLogFlag(),
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("aimon-gw mcp takes no arguments, got %q; pass the policy with --policy.", c.Args().First()), exitUsage)
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			dlog, err := decisionLog(c)
			if err != nil {
				return err
			}
			if dlog != nil {
				defer dlog.Close()
			}
			return serveMCP(c.Context, mcpParams{Decisions: dlogOrNil(dlog),
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				LoadTimeout: c.Duration("load-timeout"), MaxFrameBytes: c.Int("max-line-bytes"),
				Stdin: stdin, Stdout: stdout, Log: log,
			})
		},
	}
}

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
	err = mcpfront.Serve(ctx, mcpfront.Options{
		Reload: reload.Options{Dir: p.Policy, LoadTimeout: p.LoadTimeout,
			Gateway: gateway.Options{Workdir: workdir, Chain: chain, Logger: p.Log, Decisions: p.Decisions}},
		In: p.Stdin, Out: p.Stdout, Transport: p.Transport, MaxFrameBytes: p.MaxFrameBytes, Version: version(),
	})
	var exit cli.ExitCoder
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mcpfront.ErrSurface):
		exit = cli.Exit(surfaceProblem("mcp", err), exitUsage)
	case isLoadError(err):
		exit = cli.Exit(loadProblem(p.Policy, err), exitFinding)
	default:
		exit = cli.Exit("aimon-gw mcp: "+err.Error()+".", exitUsage)
	}
	if errors.Is(err, mcpfront.ErrStart) && !isTerminal(p.Stdin) {
		// The client waits for its answer to initialize: give it the
		// sentence, so that it shows why (the MCP Inspector).
		mcpfront.Refuse(p.Stdin, p.Stdout, exit.Error(), 5*time.Second)
	}
	return exit
}

// isTerminal: a person is typing, and no client waits for an answer.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
