package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// update rewrites the scripts' golden files from what the commands print:
// go test ./cmd/aimon-gw -run TestScripts -update
var update = flag.Bool("update", false, "rewrite the golden files of testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"aimon-gw": func() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command's scripts in testdata/script: each is a
// txtar archive of files, commands and their expected output. Scripts find
// the example plugin at $WORK/bin/wordcount.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			repo, err := filepath.Abs("../..")
			if err != nil {
				return err
			}
			env.Setenv("REPO", repo)
			bin := filepath.Join(env.WorkDir, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				return err
			}
			if err := os.Symlink(cueBinary(t), filepath.Join(bin, "cue")); err != nil {
				return err
			}
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			return os.Symlink(wordcount(t), filepath.Join(bin, "wordcount"))
		},
	})
}

var built struct {
	once sync.Once
	path string
	err  error
}

// wordcount builds the example plugin once for all scripts.
func wordcount(t *testing.T) string {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "aimon-gw-plugin")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "wordcount")
		out, err := exec.Command("go", "build", "-o", built.path, "aimon.dev/gw/examples/plugins/wordcount/cmd/wordcount").CombinedOutput()
		if err != nil {
			built.err = err
			t.Logf("go build: %s", out)
		}
	})
	if built.err != nil {
		t.Fatalf("building the example plugin: %v", built.err)
	}
	return built.path
}

var builtMisbehave struct {
	once sync.Once
	path string
	err  error
}

// misbehave builds the host's test plugin once.
func misbehave(t *testing.T) string {
	builtMisbehave.once.Do(func() {
		dir, err := os.MkdirTemp("", "aimon-gw-plugin")
		if err != nil {
			builtMisbehave.err = err
			return
		}
		builtMisbehave.path = filepath.Join(dir, "misbehave")
		if out, err := exec.Command("go", "build", "-o", builtMisbehave.path, "aimon.dev/gw/plugin/host/testdata/misbehave").CombinedOutput(); err != nil {
			builtMisbehave.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if builtMisbehave.err != nil {
		t.Fatal(builtMisbehave.err)
	}
	return builtMisbehave.path
}

var builtCue struct {
	once sync.Once
	path string
	err  error
}

// cueBinary builds the cue command at the version go.mod pins (a tool
// dependency), for scripts that check what stock CUE tools make of a policy.
func cueBinary(t *testing.T) string {
	builtCue.once.Do(func() {
		dir, err := os.MkdirTemp("", "aimon-gw-cue")
		if err != nil {
			builtCue.err = err
			return
		}
		builtCue.path = filepath.Join(dir, "cue")
		if out, err := exec.Command("go", "build", "-o", builtCue.path, "cuelang.org/go/cmd/cue").CombinedOutput(); err != nil {
			builtCue.err = fmt.Errorf("go build cuelang.org/go/cmd/cue: %v\n%s", err, out)
		}
	})
	if builtCue.err != nil {
		t.Fatal(builtCue.err)
	}
	return builtCue.path
}
