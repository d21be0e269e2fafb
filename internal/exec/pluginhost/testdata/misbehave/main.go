// Command misbehave is a test plugin. With no argument it serves, through
// the SDK, tools that behave or misbehave on call; with a mode argument it
// misbehaves at start or in Describe.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"aimon.dev/gw/plugin"
	"aimon.dev/gw/plugin/pluginpb"
)

const object = `{"type":"object"}`

var realStderr = os.NewFile(2, "stderr")

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "":
		serveTools()
	case "stdout":
		// Breaks the handshake: stdout is go-plugin's.
		fmt.Println("hello from a plugin that prints before serving")
		serveTools()
	case "exit":
		fmt.Fprintln(os.Stderr, "misbehave: refusing to start")
		os.Exit(2)
	case "bad-schema":
		serveRaw(&pluginpb.ToolInfo{Name: "Bad", InputSchema: []byte(`{"type": "object",`)})
	case "bad-name":
		serveRaw(&pluginpb.ToolInfo{Name: "bad name!", InputSchema: []byte(object)})
	case "bad-concurrency":
		serveRaw(&pluginpb.ToolInfo{Name: "Bad", InputSchema: []byte(object), Concurrency: "parallel"})
	case "duplicate":
		serveRaw(&pluginpb.ToolInfo{Name: "Twice", InputSchema: []byte(object)},
			&pluginpb.ToolInfo{Name: "Twice", InputSchema: []byte(object)})
	case "no-tools":
		serveRaw()
	case "describe-error", "describe-hang":
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig: plugin.Handshake,
			Plugins:         goplugin.PluginSet{plugin.Name: &plugin.GRPC{Tools: raw{mode: mode}}},
			GRPCServer:      goplugin.DefaultGRPCServer,
		})
	default:
		fmt.Fprintf(os.Stderr, "misbehave: unknown mode %q\n", mode)
		os.Exit(2)
	}
}

func serveTools() {
	plugin.Serve(
		plugin.Tool{
			Name:        "Context",
			Description: "Returns its pid, input and call context as JSON.",
			InputSchema: object,
			Run: func(ctx context.Context, req plugin.Request) plugin.Result {
				b, _ := json.Marshal(map[string]any{
					"pid": os.Getpid(), "tool": req.Tool, "input": req.Input,
					"workdir": req.Workdir, "chain": req.Chain, "call_id": req.CallID,
				})
				return plugin.Text(string(b))
			},
		},
		plugin.Tool{
			Name:        "Crash",
			Description: "Exits in the middle of the call.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				os.Exit(3)
				return plugin.Text("unreachable")
			},
		},
		plugin.Tool{
			Name:        "Hang",
			Description: "Never returns, and ignores cancellation.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				select {}
			},
		},
		plugin.Tool{
			Name:        "Block",
			Description: "Returns once the file named by input.file exists, or when cancelled.",
			InputSchema: object,
			Interrupt:   "cooperative",
			Run: func(ctx context.Context, req plugin.Request) plugin.Result {
				file, _ := req.Input["file"].(string)
				for {
					if _, err := os.Stat(file); err == nil {
						return plugin.Text(fmt.Sprintf("released %d", os.Getpid()))
					}
					select {
					case <-ctx.Done():
						return plugin.Errorf("cancelled")
					case <-time.After(5 * time.Millisecond):
					}
				}
			},
		},
		plugin.Tool{
			Name:        "Touch",
			Description: "Creates the file named by input.file; says whether it could.",
			InputSchema: object,
			Run: func(_ context.Context, req plugin.Request) plugin.Result {
				file, _ := req.Input["file"].(string)
				if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
					return plugin.Errorf("%v", err)
				}
				return plugin.Text("created " + file)
			},
		},
		plugin.Tool{
			Name:        "Env",
			Description: "Returns its environment, one variable a line.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				return plugin.Text(strings.Join(os.Environ(), "\n"))
			},
		},
		plugin.Tool{
			Name:        "Stdin",
			Description: "Says what its standard input is.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				target, err := os.Readlink("/proc/self/fd/0")
				if err != nil {
					return plugin.Text(err.Error())
				}
				return plugin.Text(target)
			},
		},
		plugin.Tool{
			Name:        "Stuck",
			Description: "Never returns; it is interrupted by killing its process.",
			InputSchema: object,
			Interrupt:   "externally_terminated",
			Run: func(context.Context, plugin.Request) plugin.Result {
				select {}
			},
		},
		plugin.Tool{
			Name:        "Panic",
			Description: "Panics.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				panic("misbehave panics")
			},
		},
		plugin.Tool{
			Name:        "Noise",
			Description: "Writes to stdout after the handshake, and stderr lines go-plugin would choke on.",
			InputSchema: object,
			Run: func(context.Context, plugin.Request) plugin.Result {
				fmt.Println("stdout after serving")
				// go-plugin's own stderr parser would panic on this line
				// written to the real stderr (Serve has redirected
				// os.Stderr into its stdio stream).
				fmt.Fprintln(realStderr, `{"@message": 1, "@level": 2}`)
				plugin.Logger().Warn("noise made", "n", 1)
				return plugin.Text("noisy")
			},
		},
	)
}

func serveRaw(ts ...*pluginpb.ToolInfo) {
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugin.Handshake,
		Plugins:         goplugin.PluginSet{plugin.Name: &plugin.GRPC{Tools: raw{tools: ts}}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
}

// raw serves a Describe answer as given, without the SDK's checks.
type raw struct {
	pluginpb.UnimplementedToolsServer
	tools []*pluginpb.ToolInfo
	mode  string
}

func (r raw) Describe(ctx context.Context, _ *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	switch r.mode {
	case "describe-error":
		return nil, fmt.Errorf("misbehave cannot describe itself")
	case "describe-hang":
		time.Sleep(time.Hour)
	}
	return &pluginpb.DescribeResponse{Tools: r.tools}, nil
}
