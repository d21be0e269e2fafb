package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/policydir"
)

// The file tools keep to what was decided (rule R6, with P4's lexical
// decision, C6 and C2), end to end through the binary.

// filesRoot lays out root/allowed (the policy's tree), root/outside, and
// links from inside to outside; the policy allows the file tools under
// allowed/ only, and Grep under allowed/* alone.
func filesRoot(t *testing.T, extra string) (root string, serve func(lines ...string) []map[string]any) {
	t.Helper()
	root = t.TempDir()
	for _, d := range []string{"allowed/sub/deep", "outside", "policy/cue.mod"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.WriteFile(filepath.Join(root, "outside/secret.txt"), []byte("secret\n"), 0o644)
	os.WriteFile(filepath.Join(root, "allowed/sub/top.txt"), []byte("needle top\n"), 0o644)
	os.WriteFile(filepath.Join(root, "allowed/sub/deep/deep.txt"), []byte("needle deep\n"), 0o644)
	os.WriteFile(filepath.Join(root, "allowed/f.txt"), []byte("one\n"), 0o644)
	os.Symlink(filepath.Join(root, "outside"), filepath.Join(root, "allowed/link"))
	os.Symlink(filepath.Join(root, "outside/new.txt"), filepath.Join(root, "allowed/dangling"))
	os.Symlink(filepath.Join(root, "allowed/f.txt"), filepath.Join(root, "allowed/inside-link"))
	policydir.WriteIn(t, filepath.Join(root, "policy"), map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Write: schema.#Write & {maxFileBytes: 64}, Edit: schema.#Edit & {maxFileBytes: 64}, Grep: schema.#Grep, Glob: schema.#Glob}
agent: "allowed-tools": ["Read(%[1]s/allowed/**)", "Read(/dev/**)", "Read(/proc/**)", "Write(%[1]s/allowed/**)", "Edit(%[1]s/allowed/**)", "Grep(%[1]s/allowed/*)", "Glob(%[1]s/allowed/**)"]
validation: "enforce"
%[2]s`, root, extra)})
	return root, func(lines ...string) []map[string]any {
		t.Helper()
		return runServe(t, []string{"--policy", filepath.Join(root, "policy"), "--workdir", filepath.Join(root, "allowed")}, nil, lines...)
	}
}

func toolLine(id, name string, input map[string]any) string {
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
	return string(b)
}

func text(r map[string]any) string { return fmt.Sprint(r["content"]) }

func TestR6FileToolsFollowNoLinkOut(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	a := filepath.Join(root, "allowed")
	replies := serve(
		toolLine("w-link", "Write", map[string]any{"file_path": a + "/link/planted.txt", "content": "x"}),
		toolLine("w-dangling", "Write", map[string]any{"file_path": a + "/dangling", "content": "x"}),
		toolLine("r-link", "Read", map[string]any{"file_path": a + "/link/secret.txt"}),
		toolLine("e-link", "Edit", map[string]any{"file_path": a + "/link/secret.txt", "old_string": "secret", "new_string": "x"}),
		toolLine("g-link", "Glob", map[string]any{"pattern": "**", "path": a + "/link"}),
		toolLine("r-inside", "Read", map[string]any{"file_path": a + "/inside-link"}),
	)
	for _, r := range replies[:5] {
		if r["is_error"] != true || !strings.Contains(text(r), "leads to "+root+"/outside") {
			t.Errorf("%s: %v; want a refusal naming where the link leads", r["tool_use_id"], text(r))
		}
	}
	if r := replies[5]; r["is_error"] != false || !strings.Contains(text(r), "one") {
		t.Errorf("a link that stays inside must read as before: %v", r)
	}
	for _, f := range []string{"outside/planted.txt", "outside/new.txt"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s was written outside the allowed tree", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "outside/secret.txt")); string(b) != "secret\n" {
		t.Errorf("the outside file was edited: %q", b)
	}
}

// TestC2NoFileHangsTheGateway: a FIFO swapped in and out under a name while
// Reads and Greps stream, and character devices, are each answered at once.
func TestC2NoFileHangsTheGateway(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	name := filepath.Join(root, "allowed/swap")
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-stopped }() // before TempDir's cleanup removes the directory
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(name)
			if i%2 == 0 {
				syscall.Mkfifo(name, 0o644)
			} else {
				os.WriteFile(name, []byte("x\n"), 0o644)
			}
		}
	}()
	var lines []string
	for i := range 200 {
		lines = append(lines, toolLine(fmt.Sprint("r", i), "Read", map[string]any{"file_path": name}))
		lines = append(lines, toolLine(fmt.Sprint("g", i), "Grep", map[string]any{"pattern": "x", "path": name}))
	}
	lines = append(lines,
		toolLine("zero", "Read", map[string]any{"file_path": "/dev/zero"}),
		toolLine("kmsg", "Read", map[string]any{"file_path": "/proc/kmsg"}))
	done := make(chan []map[string]any, 1)
	go func() { done <- serve(lines...) }()
	select {
	case replies := <-done:
		for _, r := range replies[len(replies)-2:] {
			if r["is_error"] != true || !strings.Contains(text(r), "regular file") {
				t.Errorf("%s: %v", r["tool_use_id"], text(r))
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway stopped answering: a file tool blocked on a special file")
	}
}

func TestC6StaleReadsAreRefused(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	f := filepath.Join(root, "allowed/f.txt")
	// The policy's file changes between the Read and the Write (another
	// process): a later serve sees the session's read of the old content.
	p := startServeProc(t, "--policy", filepath.Join(root, "policy"), "--workdir", filepath.Join(root, "allowed"))
	send := p.send
	send(toolLine("r", "Read", map[string]any{"file_path": f}))
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(f, []byte("changed by someone else\n"), 0o644)
	w := send(toolLine("w", "Write", map[string]any{"file_path": f, "content": "mine"}))
	e := send(toolLine("e", "Edit", map[string]any{"file_path": f, "old_string": "someone", "new_string": "me"}))
	slash := send(toolLine("s", "Edit", map[string]any{"file_path": f + "/", "old_string": "a", "new_string": "b"}))
	send(toolLine("r2", "Read", map[string]any{"file_path": f}))
	again := send(toolLine("e2", "Edit", map[string]any{"file_path": f, "old_string": "someone", "new_string": "me"}))
	p.close()
	for _, r := range []map[string]any{w, e} {
		if r["is_error"] != true || !strings.Contains(text(r), "has changed since it was read; Read it again") {
			t.Errorf("%s after an outside change: %v", r["tool_use_id"], text(r))
		}
	}
	if slash["is_error"] != true || !strings.Contains(text(slash), "ends with a slash") {
		t.Errorf("Edit f.txt/: %v", text(slash))
	}
	if again["is_error"] != false {
		t.Errorf("Edit after reading again: %v", text(again))
	}
	_ = serve
}

// TestR6SearchesVisitOnlyWhatIsAllowed: Grep(allowed/*) with path
// allowed/sub searches sub's own files, not those deeper, and says so.
func TestR6SearchesVisitOnlyWhatIsAllowed(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	r := serve(toolLine("g", "Grep", map[string]any{"pattern": "needle", "path": root + "/allowed/sub", "output_mode": "content"}))[0]
	if strings.Contains(text(r), "deep") || !strings.Contains(text(r), "not searched") {
		t.Errorf("Grep under allowed/* searched deeper: %v", text(r))
	}
}

// TestR6SearchesDoNotReadWhatNoEntryReaches: under Grep(allowed/*) a
// search of allowed/sub does not read sub/deep, where no path can match,
// and says it left out a directory rather than counting its files.
func TestR6SearchesDoNotReadWhatNoEntryReaches(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	r := serve(toolLine("g", "Grep", map[string]any{"pattern": "needle", "path": root + "/allowed/sub"}))[0]
	if !strings.Contains(text(r), "1 file and 1 directory below the search path were not searched") {
		t.Errorf("Grep under allowed/* read allowed/sub/deep: %v", text(r))
	}
}

func TestC2FileBounds(t *testing.T) {
	t.Parallel()
	root, serve := filesRoot(t, "")
	a := filepath.Join(root, "allowed")
	os.WriteFile(a+"/big.txt", []byte(strings.Repeat("x", 65)), 0o644)
	os.WriteFile(a+"/edge.txt", []byte(strings.Repeat("y", 64)), 0o644)
	os.WriteFile(a+"/grow.txt", []byte("ab ab ab"), 0o644)
	replies := serve(
		toolLine("w-edge", "Write", map[string]any{"file_path": a + "/w1", "content": strings.Repeat("z", 64)}),
		toolLine("w-over", "Write", map[string]any{"file_path": a + "/w2", "content": strings.Repeat("z", 65)}),
		toolLine("r1", "Read", map[string]any{"file_path": a + "/big.txt"}),
		toolLine("e-over", "Edit", map[string]any{"file_path": a + "/big.txt", "old_string": "x", "new_string": "y", "replace_all": true}),
		toolLine("r2", "Read", map[string]any{"file_path": a + "/edge.txt"}),
		toolLine("e-edge", "Edit", map[string]any{"file_path": a + "/edge.txt", "old_string": "y", "new_string": "z", "replace_all": true}),
		toolLine("r3", "Read", map[string]any{"file_path": a + "/grow.txt"}),
		toolLine("e-grow", "Edit", map[string]any{"file_path": a + "/grow.txt", "old_string": "ab", "new_string": strings.Repeat("c", 30), "replace_all": true}),
	)
	want := map[string]bool{"w-edge": false, "w-over": true, "e-over": true, "e-edge": false, "e-grow": true}
	for _, r := range replies {
		id := fmt.Sprint(r["tool_use_id"])
		if isErr, ok := want[id]; ok && r["is_error"] != isErr {
			t.Errorf("%s: is_error %v, want %v: %s", id, r["is_error"], isErr, text(r))
		}
		if want[id] && !strings.Contains(text(r), "maxFileBytes") {
			t.Errorf("%s: %s; want the bound named", id, text(r))
		}
	}
	if b, _ := os.ReadFile(a + "/grow.txt"); string(b) != "ab ab ab" {
		t.Errorf("a refused edit changed the file: %q", b)
	}
}

// TestP4WorkdirWithGlobCharactersIsItsName: ./src/** under a working
// directory named w[1]* allows that directory's src, not w1x's (which the
// name read as a pattern would match), and a Grep of the working
// directory prunes its other directories by the resolved, escaped
// pattern (R6).
func TestP4WorkdirWithGlobCharactersIsItsName(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	wd := filepath.Join(root, "w[1]*")
	for f, body := range map[string]string{"w[1]*/src/a.txt": "needle a\n", "w[1]*/doc/d.txt": "needle d\n", "w1x/src/b.txt": "needle b\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755)
		os.WriteFile(filepath.Join(root, f), []byte(body), 0o644)
	}
	os.MkdirAll(filepath.Join(root, "policy/cue.mod"), 0o755)
	policydir.WriteIn(t, filepath.Join(root, "policy"), map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Grep: schema.#Grep}
agent: "allowed-tools": ["Read(./src/**)", "Grep(.)", "Grep(./src/**)"]
`})
	replies := runServe(t, []string{"--policy", filepath.Join(root, "policy"), "--workdir", wd}, nil,
		toolLine("r-in", "Read", map[string]any{"file_path": wd + "/src/a.txt"}),
		toolLine("r-beside", "Read", map[string]any{"file_path": root + "/w1x/src/b.txt"}),
		toolLine("g", "Grep", map[string]any{"pattern": "needle", "path": wd}),
	)
	want := map[string]struct {
		isErr bool
		says  string
	}{"r-in": {false, "needle a"}, "r-beside": {true, "w1x"}, "g": {false, "src/a.txt\n[1 directory below the search path was not searched: this surface may not read it."}}
	for _, r := range replies {
		id := fmt.Sprint(r["tool_use_id"])
		w, ok := want[id]
		if !ok {
			continue
		}
		delete(want, id)
		if r["is_error"] != w.isErr || !strings.Contains(text(r), w.says) {
			t.Errorf("%s: is_error %v: %s; want %v and %q", id, r["is_error"], text(r), w.isErr, w.says)
		}
		if id == "g" && strings.Contains(text(r), "doc/d.txt") {
			t.Errorf("Grep under ./src/** searched doc: %s", text(r))
		}
	}
	if len(want) > 0 {
		t.Errorf("no reply for %v", want)
	}
}
