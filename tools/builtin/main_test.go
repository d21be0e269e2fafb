package builtin

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestMain keeps the tools' warnings out of the test output; TestC7Logs
// captures them where they are the point.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

// TestC7Logs: bad input from the model is a warning; an unexpected failure is
// an error with its cause; the normal flow is debug.
func TestC7Logs(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(old)

	env := session(t)
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
	r := fail("Read", io.ErrUnexpectedEOF, "Could not read %s.", "/x")
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
