package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/leftover"
)

// update rewrites the scripts' golden files from what the commands print:
// go test ./cmd/aimon-gw -run TestScripts -update
var update = flag.Bool("update", false, "rewrite the golden files of testdata/script")

func TestMain(m *testing.M) {
	// The hook's records go to a cache of the test run's own, never the
	// user's. Go's build cache lives under XDG_CACHE_HOME unless GOCACHE
	// says otherwise: pin it first, so the helper builds stay warm.
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
	// Spent approvals (rule R10) too: a state directory of the run's own.
	os.Setenv("XDG_STATE_HOME", filepath.Join(cache, "state"))
	// A whole run needs every helper binary: link them side by side while
	// the serial tests run (a run with -run builds what its tests ask for).
	flag.Parse()
	if flag.Lookup("test.run").Value.String() == "" {
		gobuild.Prebuild(gatewayPkg, cuePkg, fsServerPkg, wordcountPkg, misbehavePkg)
	}
	// What the run made of the machine's own directories goes with it.
	clean := leftover.Watch()
	code := m.Run()
	clean()
	os.RemoveAll(cache)
	gobuild.Cleanup()
	os.Exit(code)
}

// TestScripts runs the command's scripts in testdata/script: each is a
// txtar archive of files, commands and their expected output. Scripts find
// the example plugin at $WORK/bin/wordcount.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup:         scriptSetup(t),
		Condition:     scriptCondition,
	})
}

// scriptCondition is [need:PROGRAM], the rule of the need kit for a
// script: true where PROGRAM is on PATH, and under CI whether it is or
// not, so that a script that begins [!need:bwrap] skip runs, and fails,
// in CI without bwrap, and is skipped elsewhere.
func scriptCondition(cond string) (bool, error) {
	name, ok := strings.CutPrefix(cond, "need:")
	if !ok || name == "" {
		return false, fmt.Errorf("unknown condition %q; the runner's own is need:PROGRAM", cond)
	}
	if os.Getenv("CI") != "" {
		return true, nil
	}
	_, err := exec.LookPath(name)
	return err == nil, nil
}

// scriptSetup gives a script $REPO, a cache of its own, and on its PATH
// the gateway, the cue command, the example plugin and the test MCP server
// (fsserver). The gateway is the binary built without the race detector:
// the scripts test the command's behaviour, and run it some two hundred
// times, each several times slower under -race; the Go tests that call
// the command's functions in this process are the ones under -race.
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
		env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
		for name, path := range map[string]string{"aimon-gw": gatewayBinary(t), "cue": cueBinary(t), "fsserver": fsServer(t), "wordcount": wordcount(t)} {
			if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
				return err
			}
		}
		return nil
	}
}

// binary builds the main package pkg once per test process.
func binary(t testing.TB, pkg string) string { return gobuild.Binary(t, pkg) }

// The binaries the tests run: the example plugin, the host's test plugin,
// the cue command at the version go.mod pins (a tool dependency), the test
// MCP server, and aimon-gw itself.
const (
	wordcountPkg = "aimon.dev/gw/examples/plugins/wordcount/cmd/wordcount"
	misbehavePkg = "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave"
	cuePkg       = "cuelang.org/go/cmd/cue"
	fsServerPkg  = "aimon.dev/gw/internal/runtime/provision/testdata/fsserver"
	gatewayPkg   = "aimon.dev/gw/cmd/aimon-gw"
)

func wordcount(t *testing.T) string     { return binary(t, wordcountPkg) }
func misbehave(t *testing.T) string     { return binary(t, misbehavePkg) }
func cueBinary(t *testing.T) string     { return binary(t, cuePkg) }
func fsServer(t testing.TB) string      { return binary(t, fsServerPkg) }
func gatewayBinary(t *testing.T) string { return binary(t, gatewayPkg) }
