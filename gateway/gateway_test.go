package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/policydir"
	"aimon.dev/gw/policy"
)

func TestMain(m *testing.M) { gobuild.Main(m) }

// r7Policy is a policy whose calls cover each rule that refuses: the
// lists (P9, P4, P14 deny and ask), the gate (S9), the chain (R5) and a
// tool of the Go program (external: "go").
const r7Policy = `package policy

import "aimon.dev/gw/schema"

tools: {
	Read:  schema.#Read
	Write: schema.#Write
	Echo:  schema.#Echo
	Glob:  schema.#Glob
	Deploy: {
		description: "Deploys a service."
		effect:      "destructive"
		input: service!: "api" | "web"
		external: "go"
	}
}
agent: {
	"allowed-tools": ["Read(/srv/**)", "Read(./**)", "Write(/srv/out/**)", "Echo", "Deploy", "Glob"]
	"denied-tools": ["Read(/srv/secret/**)"]
	"ask-tools": ["Write(/srv/out/ask/**)"]
}
subagents: reviewer: "allowed-tools": ["Read", "Glob"]
validation: "enforce"
`

// writePolicy writes a policy directory of one file.
func writePolicy(t *testing.T, src string) string {
	return policydir.Write(t, map[string]string{"policy.cue": src})
}

// r7Calls are the calls of TestR7FaçadeDecidesAsTheCLI, each a tool_use
// block as check reads it; a "surface" member goes deeper.
var r7Calls = []string{
	`{"type":"tool_use","id":"1","name":"Read","input":{"file_path":"/srv/app/../app/main.go"}}`,
	`{"type":"tool_use","id":"2","name":"Read","input":{"file_path":"/etc/passwd"}}`,
	`{"type":"tool_use","id":"3","name":"Read","input":{"file_path":"/srv/secret/key"}}`,
	`{"type":"tool_use","id":"4","name":"Write","input":{"file_path":"/srv/out/ask/a","content":"x"}}`,
	`{"type":"tool_use","id":"5","name":"Write","input":{"file_path":"/srv/out/a","content":"x"}}`,
	`{"type":"tool_use","id":"6","name":"Echo","input":{"message":7}}`,
	`{"type":"tool_use","id":"7","name":"Bash","input":{"command":"ls"}}`,
	`{"type":"tool_use","id":"8","name":"Deploy","input":{"service":"web"}}`,
	`{"type":"tool_use","id":"9","name":"Deploy","input":{"service":"db"}}`,
	`{"type":"tool_use","id":"10","name":"Deploy","input":{}}`,
	`{"type":"tool_use","id":"11","name":"Read","input":{"file_path":"main.go"}}`,
	`{"type":"tool_use","id":"12","name":"Echo","input":{"message":"hi"},"surface":["agent","subagent:reviewer"]}`,
	`{"type":"tool_use","id":"13","name":"Read","input":{"file_path":"/srv/a"},"surface":["agent","subagent:reviewer"]}`,
	`{"type":"tool_use","id":"14","name":"Read","input":{"file_path":"/srv/a"},"surface":["subagent:reviewer"]}`,
	`{"type":"tool_use","id":"15","name":"Glob","input":{"pattern":"*.go"}}`,
	`{"type":"tool_use","id":"16","name":"Read","input":{"file_path":"/srv/a","extra":true}}`,
	`{"type":"tool_use","id":"17","name":"Read","input":{"file_path":"/srv/a"},"surface":["agent"]}`,
}

// verdict is what check prints of a call, and what the façade must match.
type verdict struct {
	Tool    string   `json:"tool"`
	Surface []string `json:"surface"`
	gateway.Decision
}

// check runs aimon-gw check on calls, one verdict a line.
func check(t *testing.T, dir, workdir string, surface string, calls []string) []verdict {
	t.Helper()
	cmd := exec.Command(gobuild.Binary(t, "aimon.dev/gw/cmd/aimon-gw"), "check", "--policy", dir, "--workdir", workdir, "--surface", surface, "-")
	cmd.Stdin = strings.NewReader(strings.Join(calls, "\n") + "\n")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("aimon-gw check: %v: %s", err, errOut.String())
	}
	var vs []verdict
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var v verdict
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("check printed %q: %v", sc.Text(), err)
		}
		vs = append(vs, v)
	}
	if len(vs) != len(calls) {
		t.Fatalf("check printed %d verdicts for %d calls:\n%s%s", len(vs), len(calls), out.String(), errOut.String())
	}
	return vs
}

// callOf reads a tool_use block as a gateway.Call.
func callOf(t *testing.T, block string) gateway.Call {
	var b struct {
		ID      string          `json:"id"`
		Name    string          `json:"name"`
		Input   json.RawMessage `json:"input"`
		Surface []string        `json:"surface"`
	}
	if err := json.Unmarshal([]byte(block), &b); err != nil {
		t.Fatal(err)
	}
	return gateway.Call{ID: b.ID, Name: b.Name, Input: b.Input, Surface: b.Surface}
}

// same reports how a façade decision differs from check's verdict; "" for
// not at all. Check reports an ask as it is (its client asks), so the
// façade's token is the one difference it may have.
func same(got gateway.Decision, want verdict) string {
	got.Approval, got.Input, got.Surface = "", nil, nil
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want.Decision)
	if !bytes.Equal(a, b) {
		return "façade " + string(a) + "\ncheck  " + string(b)
	}
	return ""
}

// TestR7FaçadeDecidesAsTheCLI: gateway.Decide, Run's refusals, the
// middleware in front of a go-sdk server and MCPServer decide every call as
// aimon-gw check does on the same policy, working directory and surface:
// the same verdict, rule, sentence, entries and places, refusal for
// refusal (P4, P9, P14 deny and ask, S9, R5, a tool of the Go program), on
// two gateway surfaces.
func TestR7FaçadeDecidesAsTheCLI(t *testing.T) {
	dir := writePolicy(t, r7Policy)
	wd := t.TempDir()
	ctx := context.Background()
	pol, err := policy.Load(ctx, dir, policy.WithWorkdir(wd))
	if err != nil {
		t.Fatal(err)
	}
	for _, surface := range []string{"agent", "agent,subagent:reviewer"} {
		t.Run(surface, func(t *testing.T) {
			want := check(t, dir, wd, surface, r7Calls)
			gw, err := gateway.New(pol, gateway.Options{Surface: strings.Split(surface, ",")})
			if err != nil {
				t.Fatal(err)
			}
			defer gw.Close()
			mw := mcpSession(t, gw)
			allowed, refused := 0, 0
			for i, block := range r7Calls {
				c := callOf(t, block)
				d := gw.Decide(ctx, c)
				if diff := same(d, want[i]); diff != "" {
					t.Errorf("call %s:\n%s", c.ID, diff)
				}
				if !slices.Equal(d.Surface, want[i].Surface) {
					t.Errorf("call %s: decided on %v, check on %v", c.ID, d.Surface, want[i].Surface)
				}
				if d.Allowed {
					allowed++
					// The middleware lets it reach the server's own tool.
					if c.Surface == nil {
						if text, isErr := mw(c); isErr || text != "ran "+c.Name {
							t.Errorf("call %s: allowed, and the middleware answered %q (error %v)", c.ID, text, isErr)
						}
					}
					continue
				}
				refused++
				// Run refuses it with the same sentence and runs nothing.
				if r := gw.Run(ctx, c); !r.IsError || !strings.Contains(r.Text, strings.TrimSuffix(d.Reason, ".")) {
					t.Errorf("call %s: Run answered %q, the decision was %q", c.ID, r.Text, d.Reason)
				}
				// The middleware answers with the sentence, without the
				// server's tool, on the gateway's own surface.
				if c.Surface == nil {
					text, isErr := mw(c)
					if !isErr || text != d.Reason {
						t.Errorf("call %s: the middleware answered %q (error %v), check %q", c.ID, text, isErr, d.Reason)
					}
				}
			}
			if surface != "agent" && !slices.ContainsFunc(want, func(v verdict) bool { return v.Rule == "R5" }) {
				t.Error("no call was refused by R5 on the subagent's gateway")
			}
			if allowed == 0 || refused < 5 {
				t.Errorf("%d calls allowed, %d refused: the calls no longer cover the rules", allowed, refused)
			}
		})
	}
}

// mcpSession puts gw's middleware in front of a go-sdk server whose tools
// answer "ran NAME" and returns a function that calls one over an
// in-memory transport.
func mcpSession(t *testing.T, gw *gateway.Gateway) func(gateway.Call) (string, bool) {
	t.Helper()
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "team"}, nil)
	for _, name := range []string{"Read", "Write", "Echo", "Bash", "Deploy", "Glob"} {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil
		})
	}
	server.AddReceivingMiddleware(gw.Middleware())
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return func(c gateway.Call) (string, bool) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Input})
		if err != nil {
			t.Fatalf("call %s: %v", c.ID, err)
		}
		return r.Content[0].(*mcp.TextContent).Text, r.IsError
	}
}
