package provision

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

// TestR4ServerDownWithholdsItsTools: a server that cannot be started does
// not fail the generation: its tools, named and exposed with "*", are
// withheld with the reason, the built-ins are bound, and the generation
// says which server is unavailable (issue 29).
func TestR4ServerDownWithholdsItsTools(t *testing.T) {
	for _, tc := range []struct{ note, expose string }{
		{"tools named", `["read_file"]`},
		{"every tool (\"*\")", `"*"`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			gen := load(t, fmt.Sprintf("servers: fs: {command: [\"/nonexistent/mcp\"], expose: %s}\ntools: fs__read_file: subject: {field: \"path\", kind: \"path\"}\ntools: Echo: schema.#Echo\n", tc.expose))
			_, pg := provisionUpstream(t, gen)
			if _, ok := pg.Impl("Echo"); !ok {
				t.Error("the built-in is not bound")
			}
			if len(pg.Unavailable) != 1 || pg.Unavailable[0].Server != "fs" || !strings.Contains(pg.Unavailable[0].Reason, "cannot be started") {
				t.Fatalf("Unavailable = %+v, want the server fs and why", pg.Unavailable)
			}
			tl := pg.Tools["fs__read_file"]
			if tl == nil || tl.Unavailable == "" || tl.Gate == nil {
				t.Fatalf("the named tool of the server is not withheld: %+v", tl)
			}
			if _, why := tl.Withheld(); !strings.Contains(why, "fs__read_file is withheld because its MCP server fs is unavailable") {
				t.Errorf("Withheld = %q", why)
			}
		})
	}
}

// TestR4ServerRetriedUntilItAnswers: with Retry, a server that is down is
// tried again until it answers; OnChange then has it provisioned again,
// and its tool binds and runs. Without Retry nothing is tried (issue 29).
func TestR4ServerRetriedUntilItAnswers(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "later")
	up := &Upstreams{Retry: true}
	defer up.Close()
	back := make(chan string, 1)
	up.OnChange(func(server string) { back <- server })
	b := bind(t, up, fsTool(bin, "read_file", nil))
	if why := unavailable(b, nil); !strings.Contains(why, "cannot be started") {
		t.Fatalf("a server whose command is missing: withheld for %q", why)
	}
	// Its other tools do not wait for it: it is known to be down.
	if why := unavailable(bind(t, up, fsTool(bin, "write_file", nil)), nil); !strings.Contains(why, "cannot be started") {
		t.Fatalf("a second tool of the server: withheld for %q", why)
	}
	if err := os.Symlink(fsServer(t), bin); err != nil {
		t.Fatal(err)
	}
	select {
	case server := <-back:
		if server != "fs" {
			t.Errorf("OnChange(%q), want fs", server)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the server was not tried again once it could start")
	}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	b = bind(t, up, fsTool(bin, "read_file", nil))
	if why := unavailable(b, nil); why != "" {
		t.Fatalf("after the server answers: withheld for %q", why)
	}
	if r := b.Tool.Run(context.Background(), nil, tools.Input{"path": f}); r.IsError || r.Text != "hello" {
		t.Fatalf("a call after the server answers: %+v", r)
	}
}

// TestS3OfflineBindingStartsNoServer: Offline (vet, the hook), no server is
// started: a tool is declared with an open input and held to its pins, and
// "*" lists what the pins list (issue 29).
func TestS3OfflineBindingStartsNoServer(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	pin := "sha256:" + strings.Repeat("a", 64)
	gen := load(t, fmt.Sprintf(`servers: fs: {command: ["/bin/sh", "-c", "touch %s"], expose: "*"}
servers: other: {command: ["/bin/sh", "-c", "touch %[1]s"], expose: ["a", "b"]}
pins: fs: {read_file: %[2]q, write_file: %[2]q}
pins: other: {a: %[2]q}
tools: Echo: schema.#Echo
`, marker, pin))
	up := &Upstreams{Offline: true}
	defer up.Close()
	pg, err := Registry{"builtin": Builtins(func(string) (tools.Tool, bool) { return tools.Func(nil), true }), "upstream": up}.Provision(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Retire()
	if _, err := os.Stat(marker); err == nil {
		t.Error("a server was started offline")
	}
	for _, tc := range []struct{ note, tool, unpinned string }{
		{"a pinned tool of \"*\"", "fs__read_file", ""},
		{"another", "fs__write_file", ""},
		{"a named, pinned tool", "other__a", ""},
		{"a named tool without a pin", "other__b", "has no pin"},
	} {
		tl := pg.Tools[tc.tool]
		switch {
		case tl == nil:
			t.Errorf("%s: %s is not in the generation", tc.note, tc.tool)
		case tl.Gate == nil:
			t.Errorf("%s: %s is not compiled", tc.note, tc.tool)
		case (tc.unpinned == "") != (tl.Unpinned == "") || !strings.Contains(tl.Unpinned, tc.unpinned):
			t.Errorf("%s: Unpinned = %q, want %q", tc.note, tl.Unpinned, tc.unpinned)
		}
	}
}
