package watch

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/lockedbuf"
	"aimon.dev/gw/internal/testkit/policydir"
)

// waitLimit bounds every wait for a reload: it is a deadline against a hang,
// never a measure of speed (that is the benchmarks' job).
const waitLimit = 30 * time.Second

// source is a policy.cue offering the named built-ins, all allowed to the agent.
func source(tools ...string) string {
	var b strings.Builder
	b.WriteString("package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "\t%s: schema.#%s\n", t, t)
	}
	b.WriteString("}\n\nagent: \"allowed-tools\": [")
	for i, t := range tools {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", t)
	}
	b.WriteString("]\n")
	return b.String()
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// policyDir makes a policy directory (its own CUE module) holding files, and
// returns it; it lies in a temporary parent the test may also use.
func policyDir(t testing.TB, files map[string]string) string {
	t.Helper()
	return policydir.WriteIn(t, filepath.Join(t.TempDir(), "policy"), files)
}

// revision is the revision policy.Load gives files, wherever they lie: the
// loader hashes base names and contents only.
func revision(t testing.TB, files map[string]string) string {
	t.Helper()
	g, err := policy.Load(policyDir(t, files))
	if err != nil {
		t.Fatalf("the expected policy does not load: %v", err)
	}
	return g.Revision
}

// harness runs a Watcher whose swap stores into cur, as the gateway does.
type harness struct {
	w        *Watcher
	cur      atomic.Pointer[policy.Generation]
	statuses chan Status
	reloads  atomic.Int64
	logs     *lockedbuf.Buffer
}

func start(t testing.TB, dir string, opts Options) *harness {
	t.Helper()
	h := &harness{statuses: make(chan Status, 4096), logs: &lockedbuf.Buffer{}}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := New(dir, func(g *policy.Generation) error { h.cur.Store(g); return nil }, opts)
	if err != nil {
		t.Fatalf("New(%s): %v", dir, err)
	}
	// New loads without swapping: the caller serves what it loaded.
	h.cur.Store(w.Initial())
	h.w = w
	w.OnReload(func(s Status) {
		h.reloads.Add(1)
		select {
		case h.statuses <- s:
		default:
			t.Errorf("the test's status channel is full")
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after its context ended; want nil", err)
		}
	})
	return h
}

// waitFor waits until the watcher's status satisfies ok, and returns it.
// Statuses reported before the call are stale (an older reload of the same
// revision must not answer for a new edit) and are dropped first.
func (h *harness) waitFor(t testing.TB, what string, ok func(Status) bool) Status {
	t.Helper()
	h.drain()
	if s := h.w.Status(); ok(s) {
		return s
	}
	deadline := time.After(waitLimit)
	for {
		select {
		case s := <-h.statuses:
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("no reload gave %s within %v; status %+v\nlogs:\n%s", what, waitLimit, h.w.Status(), h.logs)
			return Status{}
		}
	}
}

// waitRevision waits for rev to be in force with no error pending.
func (h *harness) waitRevision(t testing.TB, rev string) Status {
	t.Helper()
	return h.waitFor(t, "revision "+rev, func(s Status) bool { return s.Revision == rev && s.LastError == "" })
}

// waitError waits for a rejected reload.
func (h *harness) waitError(t testing.TB) Status {
	t.Helper()
	return h.waitFor(t, "a rejected reload", func(s Status) bool { return s.LastError != "" })
}

// drain forgets the statuses reported so far.
func (h *harness) drain() {
	for {
		select {
		case <-h.statuses:
		default:
			return
		}
	}
}

// runIn runs a command in dir, with a clean git environment.
func runIn(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	return cmd.CombinedOutput()
}
