package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/builtin"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/testkit/policydir"
	"aimon.dev/gw/tools"
)

// gatedServer is an upstream kind whose binds wait until open is closed;
// its tools then run, saying so.
type gatedServer struct{ open chan struct{} }

func (k gatedServer) Bind(ctx context.Context, t *policy.Tool) (provision.Binding, error) {
	select {
	case <-k.open:
	case <-ctx.Done():
		return provision.Binding{}, ctx.Err()
	}
	return provision.Binding{
		Tool: tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result { return tools.OK(t.Name + " ran") }),
		Declared: &policy.Declared{InputSchema: []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
			Concurrency: "sequential", Interrupt: "cooperative"},
	}, nil
}

// waitingGateway is a gateway whose first generation waits for the server
// srv, held until the returned channel is closed.
func waitingGateway(t *testing.T) (*Gateway, *provision.Generation, chan struct{}) {
	t.Helper()
	dir := policydir.Write(t, map[string]string{"policy.cue": header + `tools: Echo: schema.#Echo
validation: "enforce"
servers: srv: {command: ["/bin/true"], expose: ["x"], pin: false}
agent: "allowed-tools": ["Echo", "srv__x"]
`})
	gen, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-open:
		default:
			close(open)
		}
	})
	first, err := provision.Registry{"builtin": provision.Builtins(builtin.Lookup), "upstream": gatedServer{open}}.ProvisionNow(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	return New(first, Options{Workdir: t.TempDir(), Chain: []string{"agent"}}), first, open
}

// TestR10ACallCutOffWhileItsServerIsWaitedForIsRefused: a call of a tool
// whose server has not answered, whose wait ends with its caller (SIGTERM,
// a cancelled request), is refused and not run: it is never allowed on
// the open input the tool is withheld with meanwhile, even a bad input;
// Echo answers meanwhile. And the tool as withheld refuses to run.
func TestR10ACallCutOffWhileItsServerIsWaitedForIsRefused(t *testing.T) {
	g, _, _ := waitingGateway(t)
	if r := handle(t, g, `{"type":"tool_use","id":"e","name":"Echo","input":{"message":"hi"}}`); r["is_error"] != false {
		t.Fatalf("Echo while srv is waited for: %v", r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, in := range []string{`{"n":1}`, `{"n":"one"}`} {
		var r map[string]any
		if err := json.Unmarshal(g.Handle(ctx, []byte(`{"type":"tool_use","id":"x","name":"srv__x","input":`+in+`}`)), &r); err != nil {
			t.Fatal(err)
		}
		if r["is_error"] != true || !strings.Contains(fmt.Sprint(r["content"]), "was not executed") {
			t.Errorf("a call of srv__x with %s cut off while srv is waited for: %v", in, r)
		}
	}
	cur := g.Current()
	if why := cur.Tools["srv__x"].Unavailable; !strings.Contains(why, "it has not answered yet") {
		t.Errorf("srv__x is withheld with %q", why)
	}
	impl, _ := cur.Impl("srv__x")
	if r := impl.Run(context.Background(), nil, tools.Input{"n": 1}); !r.IsError || strings.Contains(r.Text, "ran") || strings.Contains(r.Text, ".)") {
		t.Errorf("srv__x as withheld ran: %+v", r)
	}
}

// TestR3ALateServerAnswerDoesNotUndoAReload: once a reload put another
// generation in force, the first generation's update for a server that
// answered late is not put in force (it is retired), and a call that
// waited is decided under the generation in force.
func TestR3ALateServerAnswerDoesNotUndoAReload(t *testing.T) {
	g, first, open := waitingGateway(t)
	waited := make(chan map[string]any, 1)
	go func() {
		var r map[string]any
		json.Unmarshal(g.Handle(context.Background(), []byte(`{"type":"tool_use","id":"x","name":"srv__x","input":{"n":1}}`)), &r)
		waited <- r
	}()
	reloaded, _ := newGateway(t, `tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo"]
`, nil)
	g.Swap(reloaded.Current())
	if r := <-waited; r["is_error"] != true || !strings.Contains(fmt.Sprint(r["content"]), "Unknown tool 'srv__x'") {
		t.Errorf("the waiting call, decided after the reload: %v", r)
	}
	close(open)
	next := <-first.Updates()
	if g.Advance(first, next) || g.Current() == next {
		t.Fatal("a late server answer put the first generation's policy back in force")
	}
	<-next.Released()
}
