package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"

	"aimon.dev/gw/plugin/pluginpb"
	"aimon.dev/gw/tools"
)

// Tool is a tool a plugin serves.
type Tool struct {
	// Name is the tool's name (rule C1).
	Name string
	// Description tells the model what the tool does.
	Description string
	// InputSchema is a JSON Schema object. The gateway's gate is strict
	// about unknown parameters only where it says additionalProperties:
	// false (rule S3); range keywords are the tool's job (rule S7).
	InputSchema string
	// Concurrency is tools.Sequential (the default) or tools.ConcurrentSafe;
	// Interrupt is one of the K1 interrupt kinds, tools.NonInterruptible by
	// default. A tool whose Run honours ctx is tools.Cooperative.
	Concurrency, Interrupt string
	// Run executes one call. It is cancelled through ctx when the gateway
	// gives up on the call. A panic becomes an error result.
	Run func(ctx context.Context, req Request) Result
}

// Request is one call as the plugin sees it (rule C5). Input must not be
// modified (rule C3).
type Request struct {
	Tool string
	// Input is the decoded input object: numbers are json.Number, as in
	// tools.Input, so that Bind treats them as the gateway does.
	Input tools.Input
	// Workdir is the absolute working directory; "" when none was given.
	Workdir string
	// Chain is the surface chain, main agent first.
	Chain  []string
	CallID string
}

// Bind fills the struct that dst points to from the input (see tools.Bind:
// non-pointer fields are required). When the input does not fit, ok is
// false and res is the error result to return, in the gate's sentences.
func (r Request) Bind(dst any) (res Result, ok bool) {
	if vs := tools.Bind(r.Input, dst); len(vs) > 0 {
		return Result{Text: tools.Sentences(vs, false), IsError: true}, false
	}
	return Result{}, true
}

// Result is what a call returns: text for the model and an error flag.
type Result struct {
	Text    string
	IsError bool
}

// Text is a successful result.
func Text(s string) Result { return Result{Text: s} }

// Errorf is an error result whose text is a sentence the model can act on.
func Errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// stderr is the process's real standard error, kept before go-plugin's
// Serve redirects os.Stderr into its stdio stream.
var stderr io.Writer = os.Stderr

// Logger returns a logger for a plugin. It writes hclog-style JSON lines to
// standard error, which the gateway reads back into its own log at the same
// level. Standard output belongs to go-plugin's handshake: never write to it.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				a.Key = "@message"
			case slog.TimeKey:
				a.Key = "@timestamp"
			}
			return a
		},
	}))
}

// Serve serves tools to the gateway until it closes the plugin. A tool
// definition that does not pass Normalize is reported on standard error and
// the process exits with status 1, before the handshake.
func Serve(ts ...Tool) {
	srv, err := NewServer(ts...)
	if err != nil {
		fmt.Fprintf(stderr, "plugin: %v\n", err)
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         goplugin.PluginSet{Name: &GRPC{Tools: srv}},
		GRPCServer:      goplugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "plugin", Output: stderr, JSONFormat: true, Level: hclog.Info,
		}),
	})
}

// NewServer checks the definitions and returns the gRPC service that serves
// them. Serve uses it; it is exported for tests and custom serving.
func NewServer(ts ...Tool) (pluginpb.ToolsServer, error) {
	s := &server{byName: map[string]Tool{}}
	for _, t := range ts {
		info := &pluginpb.ToolInfo{
			Name: t.Name, Description: t.Description, InputSchema: []byte(t.InputSchema),
			Concurrency: t.Concurrency, Interrupt: t.Interrupt,
		}
		if t.Run == nil {
			return nil, fmt.Errorf("tool %s has no Run function", t.Name)
		}
		s.infos = append(s.infos, info)
		s.byName[t.Name] = t
	}
	if err := NormalizeAll(s.infos); err != nil {
		return nil, fmt.Errorf("the plugin's tool definitions are not valid: %w", err)
	}
	return s, nil
}

type server struct {
	pluginpb.UnimplementedToolsServer
	infos  []*pluginpb.ToolInfo
	byName map[string]Tool
}

func (s *server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeResponse, error) {
	return &pluginpb.DescribeResponse{Tools: s.infos}, nil
}

func (s *server) Execute(ctx context.Context, req *pluginpb.ExecuteRequest) (*pluginpb.ExecuteResponse, error) {
	res := s.execute(ctx, req)
	return &pluginpb.ExecuteResponse{Text: res.Text, IsError: res.IsError}, nil
}

func (s *server) execute(ctx context.Context, req *pluginpb.ExecuteRequest) (res Result) {
	t, ok := s.byName[req.GetTool()]
	if !ok {
		names := make([]string, 0, len(s.byName))
		for n := range s.byName {
			names = append(names, n)
		}
		slices.Sort(names)
		return Errorf("This plugin serves no tool named %q; it serves %s.", req.GetTool(), strings.Join(names, ", "))
	}
	var in tools.Input
	dec := json.NewDecoder(bytes.NewReader(req.GetInput()))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil || in == nil {
		return Errorf("The input of %s is not a JSON object; the tool was not executed.", t.Name)
	}
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(stderr, "plugin: tool %s panicked: %v\n%s", t.Name, p, debug.Stack())
			res = Errorf("The tool %s failed unexpectedly (%v); the plugin logged the details.", t.Name, p)
		}
	}()
	return t.Run(ctx, Request{
		Tool: t.Name, Input: in, Workdir: req.GetWorkdir(),
		Chain: req.GetChain(), CallID: req.GetCallId(),
	})
}

// InProcess runs t inside the gateway, without a plugin process: for
// tests, benchmarks, and tools linked into the gateway. A panic in Run is
// the gateway's to recover (rule C2).
func InProcess(t Tool) tools.Tool {
	return tools.Func(func(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
		req := Request{Tool: t.Name, Input: in}
		if env != nil {
			req.Workdir, req.Chain, req.CallID = env.Workdir, env.Chain, env.CallID
		}
		res := t.Run(ctx, req)
		return tools.Result{Text: res.Text, IsError: res.IsError}
	})
}
