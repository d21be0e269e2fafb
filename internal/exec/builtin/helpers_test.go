package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

// session is a fresh session in a temporary working directory.
func session(t *testing.T) *tools.Env {
	t.Helper()
	return &tools.Env{Workdir: t.TempDir(), Files: tools.NewFileSet(), CallID: "toolu_test"}
}

// input decodes a JSON object the way the gateway does (numbers as json.Number).
func input(t testing.TB, js string) tools.Input {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var in tools.Input
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("bad test input %s: %v", js, err)
	}
	return in
}

// call runs the named built-in with a JSON input.
func call(t testing.TB, env *tools.Env, name, js string) tools.Result {
	t.Helper()
	tool, ok := Lookup(name)
	if !ok {
		t.Fatalf("no built-in %q", name)
	}
	return tool.Run(context.Background(), env, input(t, js))
}

// write creates a file under dir and returns its path.
func write(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// js quotes s as a JSON string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// wantResult checks the error flag and that text holds every fragment.
func wantResult(t *testing.T, r tools.Result, isErr bool, fragments ...string) {
	t.Helper()
	if r.IsError != isErr {
		t.Errorf("IsError = %v, want %v; text:\n%s", r.IsError, isErr, r.Text)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Text, f) {
			t.Errorf("text does not contain %q:\n%s", f, r.Text)
		}
	}
}
