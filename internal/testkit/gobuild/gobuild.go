// Package gobuild builds the main packages that tests run as processes
// (the gateway, plugins, test MCP servers): each once per test process,
// into one directory that Main removes when the tests end.
//
// The binaries are built without the race detector even under go test
// -race (go test's -race is not passed on to go build): what the race
// detector checks is the test process; a helper binary is only run, and an
// instrumented one builds and runs several times slower.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	dir    string                // where the binaries go; "" until the first build
	builds = map[string]*build{} // package path and arguments → its build
	early  sync.WaitGroup        // the builds Prebuild started
)

type build struct {
	once sync.Once
	into string // a directory of its own, so that names cannot clash
	path string
	err  error
}

// Gateway is the gateway's main package; Binary builds its sandbox
// program, SandboxProgram, beside it, as go install ./cmd/... installs
// them, so that tests run what users run.
const (
	Gateway        = "aimon.dev/gw/cmd/aimon-gw"
	SandboxProgram = "aimon.dev/gw/cmd/aimon-gw-sandbox"
)

// Binary builds the main package pkg (an import path) once per test process,
// with go build's other arguments args (such as -ldflags), and returns the
// binary's path. A failed build fails t.
func Binary(t testing.TB, pkg string, args ...string) string {
	t.Helper()
	path, err := Build(pkg, args...)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Build is Binary for a TestMain, which has no t.
func Build(pkg string, args ...string) (string, error) {
	return buildIn(fmt.Sprint(pkg, args), pkg, args, nil)
}

// buildIn builds pkg once per key, in the module directory src makes
// (the current one when src is nil).
func buildIn(key, pkg string, args []string, src func() (string, error)) (string, error) {
	mu.Lock()
	if dir == "" {
		d, err := os.MkdirTemp("", "aimon-gw-test-bin")
		if err == nil {
			err = os.Chmod(d, 0o755) // tests run the binaries as nobody too
		}
		if err != nil {
			mu.Unlock()
			return "", err
		}
		dir = d
	}
	b := builds[key]
	if b == nil {
		b = &build{into: filepath.Join(dir, fmt.Sprint(len(builds)))}
		builds[key] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		if b.err = os.Mkdir(b.into, 0o755); b.err != nil {
			return
		}
		b.path = filepath.Join(b.into, filepath.Base(pkg))
		// Into the directory, each named as its package: the gateway
		// with its sandbox program beside it, where it looks for it.
		pkgs := []string{pkg}
		if pkg == Gateway {
			pkgs = append(pkgs, SandboxProgram)
		}
		cmd := exec.Command("go", append(append([]string{"build", "-o", b.into + "/"}, args...), pkgs...)...)
		if src != nil {
			d, err := src()
			if d != "" {
				defer os.RemoveAll(d)
			}
			if b.err, cmd.Dir = err, d; err != nil {
				return
			}
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return b.path, b.err
}

// Prebuild starts the builds of the main packages pkgs at once, side by
// side, and returns: the links run while the first tests run, instead of
// one after another as tests first ask for each. Binary and Build wait for
// a build that is under way and report its error.
func Prebuild(pkgs ...string) {
	for _, pkg := range pkgs {
		early.Go(func() { Build(pkg) })
	}
}

// Main runs the tests of m, removes the binaries built for them, and exits
// with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup removes the binaries built so far, for a TestMain that has more
// to do after its tests than Main does.
func Cleanup() {
	early.Wait()
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
	dir, builds = "", map[string]*build{}
}
