// Package gateway decides and runs an LLM agent's tool calls under a
// policy (package aimon.dev/gw/policy), for a Go program that embeds
// aimon-gw: what aimon-gw serve, mcp, check and hook do, as a library, in
// the spirit of Caddy's caddy.Run.
//
// A Gateway serves one policy at a time. It binds the policy's tools to
// their implementations when it is made (New) and when a new policy is put
// in force (Swap): calls already running finish under the policy they
// started with, and every later call is decided under the new one (rule
// R3). Every front end decides through the same one decision: the tool
// must exist and be listed for the calling surface (P9), its input must
// meet the tool's schema (S4), and the permission lists decide its
// subject (P1–P14), recorded in the decision log before anything runs.
//
//	pol, err := policy.Load(ctx, "policies/team")
//	gw, err := gateway.New(pol, gateway.Options{Surface: []string{"agent"}})
//	defer gw.Close()
//
//	d := gw.Decide(ctx, gateway.Call{Name: "Read", Input: json.RawMessage(`{"file_path":"/srv/repo/go.mod"}`)})
//	if !d.Allowed {
//		fmt.Println(d.Rule, d.Reason) // a sentence a model can act on
//	}
//	r := gw.Run(ctx, call)      // decided as Decide does, then run when allowed
//
//	next, err := policy.Load(ctx, "policies/team") // after an edit
//	err = gw.Swap(next)                            // hot reload
//
// A server follows a policy directory instead: Watch loads it and puts
// each sound edit in force as it is saved, as aimon-gw serve and mcp do,
// with the options of the command's flags (the decision log, where
// approvals are spent, tracing):
//
//	gw, err := gateway.Watch(ctx, "policies/team", gateway.Options{State: "redis://state:6379"})
//	defer gw.Close()
//	err = gw.Serve(ctx, os.Stdin, os.Stdout)    // the line protocol
//	err = gw.ServeMCP(ctx, os.Stdin, os.Stdout) // or MCP over standard input
//
// Listen serves such a gateway over HTTP to the callers the policy's
// principals map, as aimon-gw mcp --listen does: MCP, Claude Code's HTTP
// hook, the approvers' pages and the operations endpoints.
//
// The same gateway answers the line protocol (Serve, as aimon-gw serve),
// MCP (ServeMCP, MCPServer and HTTPHandler, as aimon-gw mcp), and agent runtimes'
// hooks (Hook, as aimon-gw hook; AnswerHook is the same path for a process
// that answers one input and exits, and Exec runs the shell command a
// hook's answer hands to aimon-gw exec, only with its ticket). A team with its own MCP server, written
// with the official Go SDK (github.com/modelcontextprotocol/go-sdk/mcp),
// puts the gate, the lists and the decision log in front of its tools with
// one call:
//
//	server.AddReceivingMiddleware(gw.Middleware())
//
// Its tools are declared in the policy as tools of the Go program, with
// their input schema, so that their calls are gated and listed like any
// other (external: "go"):
//
//	tools: Deploy: {
//		description: "Deploys a service."
//		effect:      "destructive"
//		input: service!: "api" | "web"
//		external: "go"
//	}
//	agent: "allowed-tools": ["Deploy"]
//
// A Go program can also run such a tool in process: Register binds a
// tools.Tool (package aimon.dev/gw/tools) to the policy's tool of that name.
//
// A CI step or a review decides calls without running any, as aimon-gw
// check does, with a Checker: ReadLine reads a line of the line protocol
// as serve reads it, and Check gives each of its calls the one decision.
//
//	ck, err := gateway.NewChecker(ctx, pol, gateway.CheckOptions{})
//	line, err := gateway.ReadLine(data)
//	for _, r := range ck.Check(ctx, line) {
//		fmt.Println(r.Tool, r.Allowed, r.Rule) // as JSON, check's verdict
//	}
//
// The types of this package are its own: no value here names a type of
// the gateway's internal packages, which stay free to change.
package gateway
