package provision

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/policydir"
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
	g, err := policy.Load(policydir.Write(t, map[string]string{"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n" + body}))
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

// TestR3RefusedGenerationStartsNothing: a generation that preflight
// refuses (a program pinned to another binary, one the agent may replace,
// a kind this gateway lacks) binds, so starts, none of its tools, even
// those whose names come before the refused one's.
func TestR3RefusedGenerationStartsNothing(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "plug")
	if data, err := os.ReadFile("/bin/true"); err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatal("cannot copy /bin/true:", err)
	}
	zero := strings.Repeat("0", 64)
	tests := []struct{ note, policy, want string }{
		{note: "pinned to another binary", policy: `tools: Z: plugin: {command: ["` + bin + `"], sha256: "` + zero + `"}`, want: "but plugin.sha256 is " + zero},
		{note: "where the agent writes", policy: `tools: Z: plugin: command: ["` + bin + `"]
agent: "allowed-tools": ["A", "Write(` + filepath.Dir(bin) + `/**)", "Z"]`, want: "lies under " + filepath.Dir(bin)},
		{note: "a kind this gateway lacks", policy: `tools: Z: external: "claude-code"`, want: "implemented by a external"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			k := &counting{}
			reg := Registry{"builtin": k, "plugin": k}
			_, err := reg.Provision(context.Background(), load(t, "tools: {A: schema.#Echo, Write: schema.#Write}\n"+tc.policy+"\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Provision = %v, want %q", err, tc.want)
			}
			if n := k.bound.Load(); n != 0 {
				t.Errorf("%d tools were bound (started) by a generation refused whole", n)
			}
		})
	}
}
