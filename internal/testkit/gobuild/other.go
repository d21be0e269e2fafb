package gobuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// OtherSandboxProgram is the sandbox program of another build than the
// tests': built once per test process, with no revision recorded
// (-buildvcs=false, as the image builds it), from a copy of the module's
// sources of it in which package trace's file ends in one line more, as
// an older program's sources beside a newer gateway's differ.
func OtherSandboxProgram(t testing.TB) string {
	t.Helper()
	path, err := buildIn("other "+SandboxProgram, SandboxProgram, []string{"-buildvcs=false"}, otherSources)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// otherSources is a copy of the module's go.mod, go.sum and the sandbox
// program's packages, package trace's changed.
func otherSources() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(string(bytes.TrimSpace(out)))
	dst, err := os.MkdirTemp("", "aimon-gw-other-build")
	if err != nil {
		return "", err
	}
	copies := map[string]bool{"go.mod": true, "go.sum": true}
	for _, d := range []string{"cmd/aimon-gw-sandbox", "internal/exec/sandbox/trace", "internal/exec/sandbox/launch"} {
		names, err := filepath.Glob(filepath.Join(root, d, "*.go"))
		if err != nil || len(names) == 0 {
			return dst, fmt.Errorf("no sources of the sandbox program in %s (%v)", filepath.Join(root, d), err)
		}
		for _, n := range names {
			copies[strings.TrimPrefix(n, root+"/")] = true
		}
	}
	for rel := range copies {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return dst, err
		}
		if rel == "internal/exec/sandbox/trace/trace.go" {
			b = append(b, "\n// Another build's.\n"...)
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return dst, err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return dst, err
		}
	}
	return dst, nil
}
