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
