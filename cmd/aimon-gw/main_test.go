package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// update rewrites the scripts' golden files from what the commands print:
// go test ./cmd/aimon-gw -run TestScripts -update
var update = flag.Bool("update", false, "rewrite the golden files of testdata/script")

func TestMain(m *testing.M) {
	// The hook's records go to a cache of the test run's own, never the
	// user's; the scripts set theirs in Setup, and their commands (this
	// binary under the name aimon-gw) keep it.
	var cleanup []string
	if filepath.Base(os.Args[0]) != "aimon-gw" {
		// Go's build cache lives under XDG_CACHE_HOME unless GOCACHE says
		// otherwise: pin it first, so the helper builds stay warm.
		if os.Getenv("GOCACHE") == "" {
			if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
				os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
			}
		}
		cache, err := os.MkdirTemp("", "aimon-gw-cache")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_CACHE_HOME", cache)
		cleanup = append(cleanup, cache)
	}
	testscript.Main(cleaningM{m, &cleanup}, map[string]func(){
		"aimon-gw": func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// cleaningM removes what the test process made (the hook cache, the
// helper binaries) once its tests have run.
type cleaningM struct {
	m    *testing.M
	dirs *[]string
}

func (c cleaningM) Run() int {
	code := c.m.Run()
	builds.Range(func(_, v any) bool {
		if b := v.(*build); b.path != "" {
			*c.dirs = append(*c.dirs, filepath.Dir(b.path))
		}
		return true
	})
	for _, d := range *c.dirs {
		os.RemoveAll(d)
	}
	return code
}

// TestScripts runs the command's scripts in testdata/script: each is a
// txtar archive of files, commands and their expected output. Scripts find
// the example plugin at $WORK/bin/wordcount.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup:         scriptSetup(t),
	})
}

// scriptSetup gives a script $REPO, a cache of its own, and the cue
// command, the example plugin and the test MCP server (fsserver) on its
// PATH.
func scriptSetup(t *testing.T) func(*testscript.Env) error {
	return func(env *testscript.Env) error {
		repo, err := filepath.Abs("../..")
		if err != nil {
			return err
		}
		env.Setenv("REPO", repo)
		env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
		bin := filepath.Join(env.WorkDir, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return err
		}
		if err := os.Symlink(cueBinary(t), filepath.Join(bin, "cue")); err != nil {
			return err
		}
		env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
		if err := os.Symlink(fsServer(t), filepath.Join(bin, "fsserver")); err != nil {
			return err
		}
		return os.Symlink(wordcount(t), filepath.Join(bin, "wordcount"))
	}
}

// builds are the binaries the tests build, each once per test process.
var builds sync.Map // package path → *build

type build struct {
	once sync.Once
	path string
	err  error
}

// binary builds the main package pkg once and returns its path.
func binary(t testing.TB, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "aimon-gw-test-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, filepath.Base(pkg))
		if out, err := exec.Command("go", "build", "-o", b.path, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// The binaries the tests run: the example plugin, the host's test plugin,
// the cue command at the version go.mod pins (a tool dependency), the test
// MCP server, and aimon-gw itself.
func wordcount(t *testing.T) string {
	return binary(t, "aimon.dev/gw/examples/plugins/wordcount/cmd/wordcount")
}
func misbehave(t *testing.T) string {
	return binary(t, "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave")
}
func cueBinary(t *testing.T) string { return binary(t, "cuelang.org/go/cmd/cue") }
func fsServer(t testing.TB) string {
	return binary(t, "aimon.dev/gw/internal/runtime/provision/testdata/fsserver")
}
func gatewayBinary(t *testing.T) string { return binary(t, "aimon.dev/gw/cmd/aimon-gw") }
