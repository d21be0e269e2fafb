package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"aimon.dev/gw/tools"
)

// TestC7Logs: bad input from the model is a warning; an unexpected failure is
// an error with its cause; the normal flow is debug.
func TestC7Logs(t *testing.T) {
	var buf bytes.Buffer
	env := session(t)
	// The tools log through the logger the gateway gives them, never slog.Default.
	env.Log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	write(t, env.Workdir, "f", "x\n")
	tests := []struct {
		tool, in string
		want     []string
	}{
		{"Read", `{"file_path":"f"}`, []string{"level=DEBUG", "msg=Read", "offset=1"}},
		{"Read", `{"file_path":"f","offset":0}`, []string{"level=WARN", "tool=Read", "got 0."}},
		{"Echo", `{"times":1}`, []string{"level=WARN", "tool=Echo", "Missing required parameter 'message'."}},
		{"Write", `{"file_path":"f/g","content":""}`, []string{"level=WARN", "tool=Write", "is a file, not a directory"}},
	}
	for _, tt := range tests {
		buf.Reset()
		call(t, env, tt.tool, tt.in)
		for _, w := range tt.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s %s: log lacks %q:\n%s", tt.tool, tt.in, w, buf.String())
			}
		}
	}

	buf.Reset()
	r := fail(env, "Read", io.ErrUnexpectedEOF, "Could not read %s.", "/x")
	if !strings.Contains(buf.String(), "level=ERROR") || !strings.Contains(buf.String(), "cause=\"unexpected EOF\"") {
		t.Errorf("fail logged:\n%s", buf.String())
	}
	if r.Cause != io.ErrUnexpectedEOF || !r.IsError || strings.Contains(r.Text, "unexpected EOF") {
		t.Errorf("fail returned %+v; the cause belongs in the log, not the text", r)
	}
}

// The tools that declare concurrent_safe run side by side on one session
// (rule K1); the race detector checks their shared state, the FileSet.
func TestK1ConcurrentSafeToolsInParallel(t *testing.T) {
	env := grepTree(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			ctx := context.Background()
			var r = Read{}.Run(ctx, env, input(t, `{"file_path":"a.go"}`))
			switch i % 4 {
			case 1:
				r = Grep{}.Run(ctx, env, input(t, `{"pattern":"alpha","output_mode":"content","-C":1}`))
			case 2:
				r = Glob{}.Run(ctx, env, input(t, `{"pattern":"**/*.go"}`))
			case 3:
				r = Echo{}.Run(ctx, env, input(t, `{"message":"x","times":3}`))
			}
			if r.IsError {
				t.Errorf("call %d: %s", i, r.Text)
			}
		})
	}
	wg.Wait()
}

// No input makes a built-in panic or succeed silently (rule C2): a nil or
// empty input and a nil Env are answered with an error sentence.
func TestC2NilAndEmptyInputs(t *testing.T) {
	for _, name := range Names() {
		tool, _ := Lookup(name)
		for _, in := range []map[string]any{nil, {}} {
			r := tool.Run(context.Background(), nil, in)
			if !r.IsError || !strings.HasPrefix(r.Text, "Missing required parameter") {
				t.Errorf("%s with input %v: %+v", name, in, r)
			}
		}
	}
	if _, ok := Lookup("read"); ok {
		t.Error("Lookup is case-insensitive; tool names are exact")
	}
}

// FuzzReadOnlyTools feeds arbitrary JSON to the tools that change nothing
// (Bash, Write and Edit would act on what the fuzzer invents): no panic, and
// an error is always a sentence.
func FuzzReadOnlyTools(f *testing.F) {
	f.Add(`{"file_path":"a.go","offset":2,"limit":1}`)
	f.Add(`{"pattern":"**/*.go","path":"."}`)
	f.Add(`{"pattern":"al(pha","-C":"3","output_mode":"count"}`)
	f.Add(`{"message":"x","times":1e3}`)
	f.Add(`{"file_path":["a"],"offset":{},"pattern":null}`)
	dir := f.TempDir()
	write(f, dir, "a.go", "package a\nfunc Alpha() {}\n")
	write(f, dir, "sub/b.txt", "alpha\n")
	f.Fuzz(func(t *testing.T, js string) {
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber()
		var in map[string]any
		if dec.Decode(&in) != nil {
			t.Skip()
		}
		for _, k := range []string{"file_path", "path"} {
			if s, ok := in[k].(string); ok && (filepath.IsAbs(s) || strings.Contains(s, "..")) {
				t.Skip() // stay inside the tree
			}
		}
		env := &tools.Env{Workdir: dir, Files: tools.NewFileSet()}
		for _, name := range []string{"Read", "Grep", "Glob", "Echo"} {
			tool, _ := Lookup(name)
			r := tool.Run(context.Background(), env, in)
			if r.IsError && !strings.HasSuffix(r.Text, ".") {
				t.Errorf("%s: error is not a sentence: %q", name, r.Text)
			}
		}
	})
}

// Names lists the built-in tools, sorted (for the tests: the gateway
// looks each up by name).
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
