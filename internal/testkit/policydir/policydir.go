// Package policydir writes policy directories for tests: the files given,
// and a CUE module when they bring none, so that the schema import
// resolves.
package policydir

import (
	"os"
	"path/filepath"
	"testing"
)

// Module is the cue.mod/module.cue of a written policy.
const Module = "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"

// Write writes files (by slash-separated path) into a new temporary
// directory, with cue.mod/module.cue unless files has one, and returns
// the directory.
func Write(t testing.TB, files map[string]string) string {
	t.Helper()
	return WriteIn(t, t.TempDir(), files)
}

// WriteIn is Write into dir, made if it is not there: for a policy that
// must lie at a given place (beside a project, under a root the test
// owns, where a process of another user can read it).
func WriteIn(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	if _, ok := files["cue.mod/module.cue"]; !ok {
		write(t, dir, "cue.mod/module.cue", Module)
	}
	for name, data := range files {
		write(t, dir, name, data)
	}
	return dir
}

func write(t testing.TB, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
