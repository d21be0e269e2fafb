package provision

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

// counting is a kind whose bindings count their releases; it fails for
// tools named in fail.
type counting struct {
	bound, released atomic.Int32
	fail            string
}

func (k *counting) Bind(_ context.Context, t *policy.Tool) (Binding, error) {
	if t.Name == k.fail {
		return Binding{}, errors.New("it cannot be started")
	}
	k.bound.Add(1)
	return Binding{Tool: tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result { return tools.OK("") }),
		Release: func() { k.released.Add(1) }}, nil
}

func load(t *testing.T, body string) *policy.Generation {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755)
	os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package policy\n\nimport \"aimon.dev/gw/schema\"\n\n"+body), 0o644)
	g, err := policy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const threeTools = "tools: {A: schema.#Echo, B: schema.#Echo, C: schema.#Echo}\n"

// TestR4FailedProvisionReleasesWhatItBound: a generation whose binding
// fails gives back everything it acquired, and says where.
func TestR4FailedProvisionReleasesWhatItBound(t *testing.T) {
	k := &counting{fail: "B"}
	_, err := Registry{"builtin": k}.Provision(context.Background(), load(t, threeTools))
	if err == nil || !strings.Contains(err.Error(), "policy.cue:5:") || !strings.Contains(err.Error(), "tool B: it cannot be started.") {
		t.Fatalf("Provision = %v, want the failed tool at its place", err)
	}
	if b, r := k.bound.Load(), k.released.Load(); b != 2 || r != 2 {
		t.Errorf("bound %d, released %d; a failed provision must release all it bound", b, r)
	}
}

// TestC1UnknownKindIsAnError: a kind the registry lacks is refused at
// provisioning, never at a call.
func TestC1UnknownKindIsAnError(t *testing.T) {
	_, err := Registry{}.Provision(context.Background(), load(t, threeTools))
	if err == nil || !strings.Contains(err.Error(), "implemented by a builtin, which this gateway cannot run") {
		t.Fatalf("Provision = %v", err)
	}
}

// TestR3RetireWaitsForCalls: a retired generation takes no new call and
// releases only when its last call exits.
func TestR3RetireWaitsForCalls(t *testing.T) {
	k := &counting{}
	g, err := Registry{"builtin": k}.Provision(context.Background(), load(t, threeTools))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Enter() {
		t.Fatal("a new generation refused a call")
	}
	g.Retire()
	if g.Enter() {
		t.Error("a retired generation took a new call")
	}
	select {
	case <-g.Released():
		t.Fatal("released with a call in flight")
	default:
	}
	if k.released.Load() != 0 {
		t.Fatal("released with a call in flight")
	}
	g.Exit()
	<-g.Released()
	if k.released.Load() != 3 {
		t.Errorf("released %d of 3 bindings", k.released.Load())
	}
	g.Retire() // idempotent
	if k.released.Load() != 3 {
		t.Errorf("a second Retire released again")
	}
}
