// Package scripted holds what the harnesses of the real agent CLIs
// (claudecode, codex, geminicli) share: the scripted model's HTTP server
// on 127.0.0.1 and finding the pinned CLI.
package scripted

import (
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/need"
)

// Serve serves h on 127.0.0.1 until the test ends; it returns the base
// URL, http://127.0.0.1:PORT.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cannot listen for the scripted model: %v", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// Find is the CLI what (its name for a sentence) at path, absolute, or a
// skip, or under CI a failure: the pinned CLIs are part of CI.
func Find(t testing.TB, what, path string) string {
	t.Helper()
	return need.File(t, what, path, "run npm ci in .ci/npm (.ci/run does)")
}

// Record keeps what a CLI sent the model back for each call, by the
// call's id (a tool's output, or a hook's refusal), and the tools it
// offered the model last; a scripted server embeds one.
type Record struct {
	mu    sync.Mutex
	said  map[string]string
	tools []string
}

// Keep records text as what was sent back for the call of id.
func (r *Record) Keep(id, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.said == nil {
		r.said = map[string]string{}
	}
	r.said[id] = text
}

// Offered records the names of the tools offered; none keeps the last.
func (r *Record) Offered(tools []string) {
	if len(tools) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools = tools
}

// Said is what the CLI sent back for the call of id; "" when nothing.
func (r *Record) Said(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.said[id]
}

// AllSaid is all the CLI sent back, by call id.
func (r *Record) AllSaid() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.said)
}

// Tools are the names of the tools the CLI offered the model.
func (r *Record) Tools() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tools)
}
