// Package scripted holds what the harnesses of the real agent CLIs
// (claudecode, codex, geminicli) share: the scripted model's HTTP server
// on 127.0.0.1 and finding the pinned CLI.
package scripted

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	abs, _ := filepath.Abs(path)
	if _, err := os.Stat(abs); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed at %s; .ci/run installs it with npm ci in .ci/npm", what, abs)
		}
		t.Skipf("no %s at %s; run npm ci in .ci/npm", what, abs)
	}
	return abs
}
