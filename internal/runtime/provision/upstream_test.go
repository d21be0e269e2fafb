package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/mcptest"
	"aimon.dev/gw/tools"
)

// TestMain removes the binaries the tests built.
func TestMain(m *testing.M) { gobuild.Main(m) }

// fsServer builds the in-test MCP server on the official Go SDK, once.
func fsServer(t testing.TB) string {
	return gobuild.Binary(t, "aimon.dev/gw/internal/runtime/provision/testdata/fsserver")
}

func fsTool(bin, tool string, env map[string]string) *policy.Tool {
	return &policy.Tool{Name: "fs__" + tool, Upstream: &policy.Upstream{Server: "fs", Tool: tool, Command: []string{bin}, Env: env, NoPin: true}}
}

func bind(t *testing.T, up *Upstreams, pt *policy.Tool) Binding {
	t.Helper()
	b, err := up.Bind(context.Background(), pt)
	if err != nil {
		t.Fatal(err)
	}
	if b.Release != nil {
		t.Cleanup(b.Release)
	}
	return b
}

// alive reports whether a process with this pid still runs (and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// TestR4OneProcessPerServer: the tools of one server share its process,
// which stops with its last lease (issue 17).
func TestR4OneProcessPerServer(t *testing.T) {
	bin := fsServer(t)
	up := &Upstreams{}
	defer up.Close()
	a, err := up.Bind(context.Background(), fsTool(bin, "read_file", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := up.Bind(context.Background(), fsTool(bin, "write_file", nil))
	if err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	n := len(up.servers)
	var s *upstream
	for _, s = range up.servers {
	}
	up.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d server processes for two tools of one server", n)
	}
	pid := s.cmd.Process.Pid
	a.Release()
	if !alive(pid) {
		t.Fatal("the server stopped while a tool still holds it")
	}
	b.Release()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the server outlives its last lease")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestS3ChangedWhileBoundIsRefused: a tool that the server changes after it
// was bound (notifications/tools/list_changed) is refused at once, before
// any reload, and OnChange asks for one (issue 17).
func TestS3ChangedWhileBoundIsRefused(t *testing.T) {
	bin := fsServer(t)
	calls := filepath.Join(t.TempDir(), "calls")
	env := map[string]string{"AIMON_TEST_CALLS": calls}
	up := &Upstreams{}
	defer up.Close()
	changed := make(chan string, 4)
	up.OnChange(func(server string) { changed <- server })
	write := bind(t, up, fsTool(bin, "write_file", env))
	rug := bind(t, up, fsTool(bin, "rugpull", env))
	f := filepath.Join(t.TempDir(), "x")
	if r := write.Tool.Run(context.Background(), nil, tools.Input{"path": f, "content": "before"}); r.IsError {
		t.Fatal(r.Text)
	}
	if r := rug.Tool.Run(context.Background(), nil, tools.Input{}); r.IsError {
		t.Fatal(r.Text)
	}
	select {
	case s := <-changed:
		if s != "fs" {
			t.Errorf("OnChange(%q), want fs", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no OnChange after the server changed a tool")
	}
	r := write.Tool.Run(context.Background(), nil, tools.Input{"path": f, "content": "after"})
	if !r.IsError || !strings.Contains(r.Text, "changed on its server since the gateway loaded it") {
		t.Fatalf("a call of the changed tool: %+v", r)
	}
	if b, _ := os.ReadFile(f); string(b) != "before" {
		t.Errorf("the changed tool ran: %q", b)
	}
	if log, _ := os.ReadFile(calls); strings.Count(string(log), "write_file") != 1 {
		t.Errorf("the refused call reached the server:\n%s", log)
	}
}

// TestR4ConcurrentCallsAndACrash: calls from many goroutines while the
// server crashes each get one result, the gateway does not fail, and the
// next call works on a new process (run with -race).
func TestR4ConcurrentCallsAndACrash(t *testing.T) {
	bin := fsServer(t)
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	up := &Upstreams{}
	defer up.Close()
	read := bind(t, up, fsTool(bin, "read_file", nil))
	crash := bind(t, up, fsTool(bin, "crash", nil))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if i == 7 {
				crash.Tool.Run(context.Background(), nil, tools.Input{})
				return
			}
			r := read.Tool.Run(context.Background(), nil, tools.Input{"path": f})
			if !r.IsError && r.Text != "hello" {
				t.Errorf("a read: %+v", r)
			}
		})
	}
	wg.Wait()
	var r tools.Result
	for range 3 { // a call in flight at the crash may be the one that finds it
		if r = read.Tool.Run(context.Background(), nil, tools.Input{"path": f}); !r.IsError {
			break
		}
	}
	if r.IsError || r.Text != "hello" {
		t.Fatalf("the call after a crash: %+v", r)
	}
}

// unavailable is why Bind withheld a tool, or its error; "" when the tool
// was bound to run.
func unavailable(b Binding, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case b.Declared != nil:
		return b.Declared.Unavailable
	}
	return ""
}

// TestR4ServerThatCannotServe: a command that is no MCP server, or none at
// all, does not fail Bind: the tool is withheld with a sentence, refuses to
// run, and leaves no process.
func TestR4ServerThatCannotServe(t *testing.T) {
	for _, tc := range []struct {
		note, want string
		command    []string
	}{
		{"no such binary", "cannot be started", []string{"/nonexistent/mcp"}},
		{"a program that speaks no MCP", "cannot be started", []string{"/bin/sh", "-c", "echo not json; sleep 30"}},
		{"a program that exits", "cannot be started", []string{"/bin/false"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			up := &Upstreams{}
			defer up.Close()
			pt := &policy.Tool{Name: "x__y", Upstream: &policy.Upstream{Server: "x", Tool: "y", Command: tc.command, NoPin: true}}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			b, err := up.Bind(ctx, pt)
			if why := unavailable(b, err); err != nil || !strings.Contains(why, tc.want) || !strings.Contains(why, "servers.x.command") {
				t.Fatalf("Bind = %v, withheld for %q; want a sentence saying %q and what to fix", err, why, tc.want)
			}
			if r := b.Tool.Run(ctx, nil, tools.Input{}); !r.IsError || !strings.Contains(r.Text, "unavailable") {
				t.Errorf("a call of the withheld tool: %+v", r)
			}
		})
	}
}

// provisionUpstream binds gen with its upstream tools on a pool of the
// test's own, and built-ins that do nothing.
func provisionUpstream(t *testing.T, gen *policy.Generation) (*Upstreams, *Generation) {
	t.Helper()
	up := &Upstreams{}
	t.Cleanup(up.Close)
	pg, err := Registry{"builtin": Builtins(func(string) (tools.Tool, bool) { return tools.Func(nil), true }), "upstream": up}.Provision(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Retire)
	return up, pg
}

// TestS8ExposeAllProvision: provisioning a server that exposes "*" adds
// every tool it lists, bound like named ones (issue 17).
func TestS8ExposeAllProvision(t *testing.T) {
	bin := fsServer(t)
	gen := load(t, fmt.Sprintf("servers: fs: {command: [%q], expose: \"*\"}\ntools: Echo: schema.#Echo\nagent: \"allowed-tools\": [\"Echo\", \"fs__read_file\"]\n", bin))
	_, pg := provisionUpstream(t, gen)
	for _, name := range []string{"fs__read_file", "fs__write_file", "fs__crash", "fs__rugpull"} {
		if tl := pg.Tools[name]; tl == nil || tl.Pending() || tl.Gate == nil {
			t.Errorf("%s is not a bound tool: %+v", name, tl)
		}
	}
	e, err := pg.Effective([]string{"agent"})
	if err != nil || !e.Listed("fs__read_file") || e.Listed("fs__write_file") {
		t.Errorf("the allow list does not know the listed tools: %v", err)
	}
	if len(gen.Tools) != 1 {
		t.Errorf("Expand changed the loaded generation: %d tools", len(gen.Tools))
	}
}

// TestS3StreamableHTTPServer: a server reached at its url, with headers
// whose ${NAME} comes from the gateway's environment; a header that cannot
// be made, or a server that refuses it, is a sentence at Bind (issue 17).
func TestS3StreamableHTTPServer(t *testing.T) {
	url := mcptest.NewEcho(t, "s3cret").URL
	t.Setenv("AIMON_TEST_TOKEN", "s3cret")
	t.Setenv("AIMON_TEST_WRONG", "guess")
	for _, tc := range []struct {
		note, header, want string
	}{
		{"the token from the environment", "Bearer ${AIMON_TEST_TOKEN}", ""},
		{"a variable that is not set", "Bearer ${AIMON_TEST_UNSET}", "names ${AIMON_TEST_UNSET}, which is not set"},
		{"a token the server refuses", "Bearer ${AIMON_TEST_WRONG}", "cannot be reached"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			up := &Upstreams{}
			defer up.Close()
			pt := &policy.Tool{Name: "web__echo", Upstream: &policy.Upstream{Server: "web", Tool: "echo", URL: url, Headers: map[string]string{"Authorization": tc.header}, NoPin: true}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := up.Bind(ctx, pt)
			if why := unavailable(b, err); err != nil || !strings.Contains(why, tc.want) || (tc.want == "") != (why == "") {
				t.Fatalf("Bind = %v, withheld for %q; want it withheld for %q", err, why, tc.want)
			}
			if tc.want != "" {
				return
			}
			defer b.Release()
			if r := b.Tool.Run(ctx, nil, tools.Input{"text": "hi"}); r.IsError || r.Text != "echo hi" {
				t.Fatalf("a call: %+v", r)
			}
		})
	}
}

// TestR4StartOnFirstUse: a server that starts on first use (start: "call")
// runs at provisioning only to list its tools, is stopped once the
// generation is bound, and starts again for the first call (issue 17).
func TestR4StartOnFirstUse(t *testing.T) {
	bin := fsServer(t)
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	gen := load(t, fmt.Sprintf("servers: fs: {command: [%q], expose: [\"read_file\"], start: \"call\"}\ntools: Echo: schema.#Echo\n", bin))
	up, pg := provisionUpstream(t, gen)
	server := func() *upstream {
		up.mu.Lock()
		defer up.mu.Unlock()
		for _, s := range up.servers {
			return s
		}
		return nil
	}
	s := server()
	s.mu.Lock()
	running, listed := s.session != nil, len(s.tools)
	s.mu.Unlock()
	if running || listed == 0 {
		t.Fatalf("after provisioning: running %v, %d tools known; want stopped, its tools known", running, listed)
	}
	if pg.Tools["fs__read_file"].Gate == nil {
		t.Fatal("the tool was not completed from what the server declared")
	}
	impl, _ := pg.Impl("fs__read_file")
	if r := impl.Run(context.Background(), nil, tools.Input{"path": f}); r.IsError || r.Text != "hello" {
		t.Fatalf("the first call: %+v", r)
	}
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	if !alive(pid) {
		t.Fatal("the server does not run after its first call")
	}
}
