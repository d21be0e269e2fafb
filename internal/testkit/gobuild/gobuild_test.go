package gobuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinaryOncePerProcess: a package is built once and its binary is
// readable by any user; other arguments are another build; a package that
// does not build is an error that names it; Cleanup removes them all.
func TestBinaryOncePerProcess(t *testing.T) {
	const pkg = "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave"
	first := Binary(t, pkg)
	if again := Binary(t, pkg); again != first {
		t.Errorf("a second Binary built again: %s, then %s", first, again)
	}
	if st, err := os.Stat(filepath.Dir(filepath.Dir(first))); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the binaries' directory: %v, %v; want mode 0755, so that tests can run them as nobody", st, err)
	}
	if other := Binary(t, pkg, "-ldflags=-s"); other == first {
		t.Errorf("other arguments gave the same binary %s", other)
	}
	if _, err := Build("aimon.dev/gw/no/such/package"); err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Errorf("a package that does not exist: %v", err)
	}
	Cleanup()
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("after Cleanup, %s: %v", first, err)
	}
}

// TestPrebuild: the builds Prebuild starts are the ones Binary returns,
// each built once; a package that does not build is Binary's error.
func TestPrebuild(t *testing.T) {
	const pkg, bad = "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave", "aimon.dev/gw/no/such/package"
	Prebuild(pkg, bad)
	first := Binary(t, pkg)
	if again := Binary(t, pkg); again != first {
		t.Errorf("a Binary after Prebuild built again: %s, then %s", first, again)
	}
	if _, err := Build(bad); err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Errorf("a prebuilt package that does not exist: %v", err)
	}
	Cleanup()
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("after Cleanup, %s: %v", first, err)
	}
}

// TestGatewayHasItsSandboxProgramBeside: the gateway is built with its
// sandbox program in the same directory, where the gateway looks for it,
// so that the tests that run the gateway run what go install ./cmd/...
// installs; another package is built alone.
func TestGatewayHasItsSandboxProgramBeside(t *testing.T) {
	gw := Binary(t, Gateway)
	if st, err := os.Stat(filepath.Join(filepath.Dir(gw), "aimon-gw-sandbox")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("no sandbox program beside %s: %v, %v", gw, st, err)
	}
	other := Binary(t, "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave")
	if entries, _ := os.ReadDir(filepath.Dir(other)); len(entries) != 1 {
		t.Errorf("beside %s: %v; want it alone", other, entries)
	}
	Cleanup()
}
