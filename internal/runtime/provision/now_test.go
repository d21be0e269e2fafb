package provision

import (
	"context"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/tools"
)

// gated is an upstream kind whose binds wait until open is closed, and
// then declare schema for each tool (rule R10's silent server, held by
// the test).
type gated struct {
	open   chan struct{}
	schema string
	counting
}

func (k *gated) Bind(ctx context.Context, t *policy.Tool) (Binding, error) {
	<-k.open
	b, err := k.counting.Bind(ctx, t)
	b.Declared = &policy.Declared{InputSchema: []byte(k.schema), Concurrency: "sequential", Interrupt: "cooperative"}
	return b, err
}

const waitedServer = `tools: A: schema.#Echo
servers: srv: {command: ["/bin/true"], expose: ["x"], pin: false}
`

// provisionNow is ProvisionNow of waitedServer, its server declaring
// schema once the test opens it; the built-in kind counts its releases.
func provisionNow(t *testing.T, schema string) (*Generation, *gated, *counting) {
	t.Helper()
	up, local := &gated{open: make(chan struct{}), schema: schema}, &counting{}
	g, err := Registry{"builtin": local, "upstream": up}.ProvisionNow(context.Background(), load(t, waitedServer))
	if err != nil {
		t.Fatal(err)
	}
	return g, up, local
}

// TestR10ProvisionNowServesBeforeItsServers: the first generation is
// bound while the server's bind is provably still held; its tool is then
// withheld as not answered yet, with no schema of its own to decide on,
// and the next generation offers it as the server declares it; the load's
// bindings are released once every generation of it is retired.
func TestR10ProvisionNowServesBeforeItsServers(t *testing.T) {
	g, up, local := provisionNow(t, `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
	if _, ok := g.Impl("A"); !ok || !g.Waits("srv__x") || g.Waits("A") || !g.Waits("") {
		t.Fatalf("the first generation: A bound %v, waits for srv__x %v, for A %v", ok, g.Waits("srv__x"), g.Waits("A"))
	}
	if why := g.Tools["srv__x"].Unavailable; !strings.Contains(why, "it has not answered yet") {
		t.Errorf("the waited-for tool is withheld with %q", why)
	}
	if len(g.Unavailable) != 1 || g.Unavailable[0].Server != "srv" || g.Unavailable[0].Tools[0] != "srv__x" {
		t.Errorf("Unavailable: %+v", g.Unavailable)
	}
	close(up.open)
	next := <-g.Updates()
	if next.Waits("") || next.Tools["srv__x"].Unavailable != "" || len(next.Unavailable) != 0 {
		t.Fatalf("the generation once the server answered still withholds it: %+v", next.Unavailable)
	}
	if vs := next.Tools["srv__x"].Gate.Check(tools.Input{"n": "one"}); len(vs) == 0 {
		t.Error("the tool is not decided on the schema its server declares: a string n passes")
	}
	if _, more := <-g.Updates(); more {
		t.Error("Updates is not closed after the last server")
	}
	g.Retire()
	if local.released.Load() != 0 {
		t.Error("retiring the first generation released what the next one holds")
	}
	next.Retire()
	<-next.Released()
	if b, r := local.bound.Load(), local.released.Load(); b != 1 || r != 1 || up.released.Load() != 1 {
		t.Errorf("bound %d, released %d (upstream %d); want all released once both are retired", b, r, up.released.Load())
	}
}

// TestR10ProvisionNowWithholdsADeclarationItCannotUse: a server whose
// declaration the policy cannot be completed with has its tools withheld,
// saying why, where Provision refuses the load; the built-in still serves.
func TestR10ProvisionNowWithholdsADeclarationItCannotUse(t *testing.T) {
	g, up, _ := provisionNow(t, `{"type":"string"}`)
	close(up.open)
	next := <-g.Updates()
	if why := next.Tools["srv__x"].Unavailable; !strings.Contains(why, "cannot be used") {
		t.Errorf("a declaration the policy cannot use: the tool is withheld with %q", why)
	}
	if _, ok := next.Impl("A"); !ok || next.Waits("") {
		t.Errorf("the built-in is not served, or a server is still waited for")
	}
	_, err := Registry{"builtin": &counting{}, "upstream": &gated{open: up.open, schema: up.schema}}.Provision(context.Background(), load(t, waitedServer))
	if err == nil || !strings.Contains(err.Error(), "cannot be used") {
		t.Errorf("Provision of the same: %v, want the load refused", err)
	}
}
