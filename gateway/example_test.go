package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"testing/fstest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

// The policy of these examples: the built-ins Read and Echo, and Deploy,
// a tool of the Go program itself; the main agent may read below /srv,
// echo and deploy, its reviewer only read.
var files = fstest.MapFS{"policy.cue": {Data: []byte(`package policy

import "aimon.dev/gw/schema"

tools: {
	Read: schema.#Read
	Echo: schema.#Echo
	Deploy: {
		description: "Deploys a service."
		effect:      "destructive"
		input: service!: "api" | "web"
		external: "go"
	}
}
agent: "allowed-tools": ["Read(/srv/**)", "Echo", "Deploy"]
subagents: reviewer: "allowed-tools": ["Read"]
validation: "enforce"
`)}}

// open loads the policy and makes a gateway serving it; o.Surface nil is
// the main agent.
func open(o gateway.Options) *gateway.Gateway {
	pol, err := policy.LoadFS(context.Background(), files, policy.WithWorkdir("/"))
	if err != nil {
		panic(err)
	}
	gw, err := gateway.New(pol, o)
	if err != nil {
		panic(err)
	}
	return gw
}

// Decide a call without running it, as aimon-gw check does.
func ExampleGateway_Decide() {
	gw := open(gateway.Options{})
	defer gw.Close()
	ctx := context.Background()
	for _, c := range []gateway.Call{
		{Name: "Read", Input: json.RawMessage(`{"file_path":"/srv/app/../app/main.go"}`)},
		{Name: "Read", Input: json.RawMessage(`{"file_path":"/etc/passwd"}`)},
		{Name: "Echo", Input: json.RawMessage(`{"message":"hi"}`), Surface: []string{"agent", "subagent:reviewer"}},
		{Name: "Deploy", Input: json.RawMessage(`{"service":"db"}`)},
	} {
		d := gw.Decide(ctx, c)
		fmt.Println(c.Name, d.Allowed, d.Rule, d.Input["file_path"])
	}
	// Output:
	// Read true P4 /srv/app/main.go
	// Read false P4 /etc/passwd
	// Echo false P9 <nil>
	// Deploy false S9 <nil>
}

// Run a call: decided, then run when allowed.
func ExampleGateway_Run() {
	gw := open(gateway.Options{})
	defer gw.Close()
	r := gw.Run(context.Background(), gateway.Call{Name: "Echo", Input: json.RawMessage(`{"message":"hello"}`)})
	fmt.Println(r.Text, r.IsError)
	// Output: hello false
}

// Register runs a tool of the program's own, in process, for the policy's
// tool of that name (external: "go").
func ExampleGateway_Register() {
	gw := open(gateway.Options{})
	defer gw.Close()
	err := gw.Register("Deploy", tools.Func(func(_ context.Context, _ *tools.Env, in tools.Input) tools.Result {
		return tools.OK("deployed " + in["service"].(string))
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	fmt.Println(gw.Run(ctx, gateway.Call{Name: "Deploy", Input: json.RawMessage(`{"service":"web"}`)}).Text)
	fmt.Println(gw.Run(ctx, gateway.Call{Name: "Deploy", Input: json.RawMessage(`{"service":"db"}`)}).IsError)
	// Output:
	// deployed web
	// true
}

// Serve answers the line protocol, as aimon-gw serve does.
func ExampleGateway_Serve() {
	gw := open(gateway.Options{})
	defer gw.Close()
	in := strings.NewReader(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}` + "\n")
	if err := gw.Serve(context.Background(), in, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output: {"type":"tool_result","tool_use_id":"1","content":"hi","is_error":false}
}

// policyDir writes the examples' policy into a new directory, a CUE
// module of its own, as aimon-gw init makes one.
func policyDir() (string, error) {
	dir, err := os.MkdirTemp("", "policy")
	if err != nil {
		return "", err
	}
	module := fstest.MapFS{"cue.mod/module.cue": {Data: []byte("module: \"example.com/team@v0\"\nlanguage: version: \"v0.12.0\"\n")}}
	for _, fsys := range []fstest.MapFS{files, module} {
		if err := os.CopyFS(dir, fsys); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// Watch serves a policy directory and follows its edits, as aimon-gw
// serve does: here it answers one line of the line protocol.
func ExampleWatch() {
	dir, err := policyDir()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	gw, err := gateway.Watch(context.Background(), dir, gateway.Options{Workdir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer gw.Close()
	fmt.Println(gw.Policy().Tools())
	in := strings.NewReader(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}` + "\n")
	if err := gw.Serve(context.Background(), in, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [Deploy Echo Read]
	// {"type":"tool_result","tool_use_id":"1","content":"hi","is_error":false}
}

// Watch's error says which kind of problem stopped it: the policy's own
// (ErrPolicy), a surface it cannot run (ErrSurface), or an option.
func ExampleWatch_errors() {
	dir, err := policyDir()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	_, err = gateway.Watch(context.Background(), dir, gateway.Options{Workdir: dir, Surface: []string{"agent", "subagent:nosuch"}})
	fmt.Println(errors.Is(err, gateway.ErrSurface), errors.Is(err, gateway.ErrPolicy))
	_, err = gateway.Watch(context.Background(), filepath.Join(dir, "nosuch"), gateway.Options{Workdir: dir})
	fmt.Println(errors.Is(err, gateway.ErrSurface), errors.Is(err, gateway.ErrPolicy))
	// Output:
	// true false
	// false true
}

// Listen serves a policy directory over HTTP until ctx is done, as
// aimon-gw mcp --listen does: MCP at /mcp and Claude Code's HTTP hook, to
// the callers a tokens file knows, each on the surface the policy's
// principals give it. (Not run: it listens until stopped.)
func ExampleListen() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := gateway.Listen(ctx, "policies/team", gateway.Options{DecisionLog: "decisions.jsonl", State: "redis://state:6379"},
		gateway.ListenOptions{Addr: ":8443", TLSCert: "tls/cert.pem", TLSKey: "tls/key.pem", Tokens: "tokens", Resource: "https://gw.example.com/mcp"})
	if err != nil {
		fmt.Println(err)
	}
}

// Swap puts an edited policy in force for every later call.
func ExampleGateway_Swap() {
	gw := open(gateway.Options{})
	defer gw.Close()
	ctx := context.Background()
	echo := gateway.Call{Name: "Echo", Input: json.RawMessage(`{"message":"hi"}`)}
	fmt.Println(gw.Decide(ctx, echo).Allowed)
	edited := fstest.MapFS{"policy.cue": {Data: bytes.Replace(files["policy.cue"].Data, []byte(`"Echo", "Deploy"]`), []byte(`"Deploy"]`), 1)}}
	next, err := policy.LoadFS(ctx, edited, policy.WithWorkdir("/"))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := gw.Swap(next); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(gw.Decide(ctx, echo).Allowed)
	// Output:
	// true
	// false
}

// Middleware puts the gate, the lists and the decision log in front of a
// team's own MCP server: its Deploy runs only for a call the policy allows.
func ExampleGateway_Middleware() {
	gw := open(gateway.Options{OnDecision: func(r gateway.Record) error {
		fmt.Println("log:", r.Tool, r.Allowed, r.Rule)
		return nil
	}})
	defer gw.Close()

	// The team's own server, with a tool the policy does not define.
	server := mcp.NewServer(&mcp.Implementation{Name: "team"}, nil)
	type deploy struct {
		Service string `json:"service"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "Deploy"}, func(_ context.Context, _ *mcp.CallToolRequest, in deploy) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + in.Service}}}, nil, nil
	})
	mcp.AddTool(server, &mcp.Tool{Name: "Wipe"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		panic("never runs")
	})
	server.AddReceivingMiddleware(gw.Middleware())

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ss.Close()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close()
	list, _ := session.ListTools(ctx, nil)
	for _, t := range list.Tools {
		fmt.Println("listed:", t.Name)
	}
	for _, c := range []*mcp.CallToolParams{
		{Name: "Deploy", Arguments: map[string]any{"service": "web"}},
		{Name: "Deploy", Arguments: map[string]any{"service": "db"}},
		{Name: "Wipe"},
	} {
		r, err := session.CallTool(ctx, c)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("result:", r.IsError, r.Content[0].(*mcp.TextContent).Text)
	}
	// Output:
	// listed: Deploy
	// log: Deploy true P6
	// result: false deployed web
	// log: Deploy false S9
	// result: true Parameter 'service' must be one of "api", "web", got string "db". The tool was not executed.
	// log: Wipe false P9
	// result: true Unknown tool 'Wipe'. Available tools: Deploy, Echo, Read.
}

// Answer an agent runtime's hook, as aimon-gw hook claude-code does:
// Claude Code sends each tool call it is about to run, and reads back
// allow, deny or ask.
func ExampleGateway_Hook() {
	gw := open(gateway.Options{})
	defer gw.Close()
	for _, call := range []string{
		`"tool_name":"Read","tool_input":{"file_path":"/srv/app/go.mod"}`,
		`"tool_name":"Read","tool_input":{"file_path":"/etc/shadow"}`,
	} {
		input := `{"session_id":"s","cwd":"/","hook_event_name":"PreToolUse",` + call + `,"tool_use_id":"t"}`
		answer, err := gw.Hook(context.Background(), "claude-code", []byte(input))
		if err != nil {
			fmt.Println("blocked:", err) // the hook exits 2, which blocks the call
			continue
		}
		var a struct {
			Out struct {
				Decision string `json:"permissionDecision"`
				Reason   string `json:"permissionDecisionReason"`
			} `json:"hookSpecificOutput"`
		}
		json.Unmarshal(answer, &a)
		fmt.Println(a.Out.Decision+":", a.Out.Reason)
	}
	_, err := gw.Hook(context.Background(), "claude-code", []byte(`{"tool_name":`))
	fmt.Println("blocked:", err != nil)
	// Output:
	// allow: Read path "/srv/app/go.mod" is allowed by Read(/srv/**).
	// deny: Read path "/etc/shadow" is not allowed on this surface: allowed are Read(/srv/**).
	// blocked: true
}

// Answer one hook input in a process of its own, as aimon-gw hook does:
// the policy is loaded for the input's project, and the call decided and
// recorded by the same path as Gateway.Hook.
func ExampleAnswerHook() {
	dir, _ := os.MkdirTemp("", "policy")
	defer os.RemoveAll(dir)
	os.MkdirAll(dir+"/cue.mod", 0o755)
	os.WriteFile(dir+"/cue.mod/module.cue", []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644)
	os.WriteFile(dir+"/policy.cue", files["policy.cue"].Data, 0o644)
	input := `{"session_id":"s","cwd":"/","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/srv/app/go.mod"},"tool_use_id":"t"}`
	answer, err := gateway.AnswerHook(context.Background(), gateway.HookConfig{Runtime: "claude-code", Policy: dir, Cache: "off"}, []byte(input))
	fmt.Println(string(answer), err)
	// Output:
	// {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"Read path \"/srv/app/go.mod\" is allowed by Read(/srv/**)."}} <nil>
}
