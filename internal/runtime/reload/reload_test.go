package reload

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/policydir"
)

var misbehaveBin string

func TestMain(m *testing.M) {
	var err error
	if misbehaveBin, err = gobuild.Build("aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave"); err != nil {
		fmt.Fprintln(os.Stderr, "building the test plugin:", err)
		gobuild.Cleanup()
		os.Exit(1)
	}
	gobuild.Main(m)
}

const header = "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\n"

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func policyDir(t *testing.T, body string) string {
	return policydir.Write(t, map[string]string{"policy.cue": header + body})
}

func start(t *testing.T, dir string) *Runtime {
	t.Helper()
	rt, err := Start(context.Background(), Options{Dir: dir, Debounce: 20 * time.Millisecond,
		Gateway: gateway.Options{Workdir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// pids lists the processes running the binary at path (the process table).
func pids(path string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path {
			out = append(out, e.Name())
		}
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func call(ctx context.Context, gw *gateway.Gateway, line string) map[string]any {
	var m map[string]any
	json.Unmarshal(gw.Handle(ctx, []byte(line)), &m)
	return m
}

// TestR4RejectedEditStartsNoPlugin: an edit that does not load (a typo next
// to a new plugin tool) starts no process, and one whose provisioning fails
// (a second plugin is missing) stops the process its first plugin started.
func TestR4RejectedEditStartsNoPlugin(t *testing.T) {
	dir := policyDir(t, `agent: "allowed-tools": ["Echo"]`+"\n")
	rt := start(t, dir)
	plugin := fmt.Sprintf("tools: Ctx: plugin: {command: [%q], tool: \"Context\"}\n", misbehaveBin)

	writeFile(t, filepath.Join(dir, "policy.cue"), header+plugin+`agent: allowedTools: ["Echo"]`+"\n")
	waitFor(t, "the typo to be rejected", func() bool { return rt.Status().LastError != "" })
	if p := pids(misbehaveBin); len(p) > 0 {
		t.Errorf("a rejected edit started plugin processes %v", p)
	}

	writeFile(t, filepath.Join(dir, "policy.cue"), header+plugin+
		"tools: Gone: plugin: command: [\"/nonexistent/aimon-gw-plugin\"]\n"+`agent: "allowed-tools": ["Echo"]`+"\n")
	waitFor(t, "the missing plugin to be rejected", func() bool {
		return strings.Contains(rt.Status().LastError, "Gone")
	})
	waitFor(t, "the first plugin's process to stop", func() bool { return len(pids(misbehaveBin)) == 0 })
	if st := rt.Status(); st.Generation != 1 {
		t.Errorf("a rejected edit went in force: %+v", st)
	}
}

// TestR4OldGenerationCannotRestartDroppedPlugin: a line still running under
// an old generation keeps the plugin that generation owns; when the line
// ends the process stops, and nothing it did left a process no generation
// owns.
func TestR4OldGenerationCannotRestartDroppedPlugin(t *testing.T) {
	tools := fmt.Sprintf("tools: Block: plugin: {command: [%q]}\ntools: Context: plugin: {command: [%q]}\n", misbehaveBin, misbehaveBin)
	dir := policyDir(t, tools)
	rt := start(t, dir)
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan map[string]any, 1)
	go func() {
		done <- call(context.Background(), rt.Gateway(), fmt.Sprintf(`{"role":"assistant","content":[
			{"type":"tool_use","id":"b","name":"Block","input":{"file":%q}},
			{"type":"tool_use","id":"c","name":"Context","input":{}}]}`, release))
	}()
	waitFor(t, "the plugin to start", func() bool { return len(pids(misbehaveBin)) == 1 })
	before := pids(misbehaveBin)[0]

	writeFile(t, filepath.Join(dir, "policy.cue"), header)
	waitFor(t, "the reload that drops the plugin", func() bool { return rt.Status().Generation == 2 })
	os.WriteFile(release, nil, 0o644)
	reply := <-done
	content, _ := reply["content"].([]any)
	if len(content) != 2 {
		t.Fatalf("reply %v", reply)
	}
	ctxReply := content[1].(map[string]any)
	if ctxReply["is_error"] != false || !strings.Contains(ctxReply["content"].(string), `"pid":`+before) {
		t.Errorf("the line's second call must run on the process its generation owns (%s): %v", before, ctxReply)
	}
	waitFor(t, "every plugin process to stop once the old generation's line ended", func() bool { return len(pids(misbehaveBin)) == 0 })
}

// TestR3ReloadReusesTheGenerationInForce: a reload compiles the tool that
// changed and reuses the one that did not, from the generation in force;
// an edit that does not load leaves that generation to the next reload,
// which decides as the files say (issue 32: a reload recompiles what
// changed).
func TestR3ReloadReusesTheGenerationInForce(t *testing.T) {
	policy := func(a string) string {
		return fmt.Sprintf("validation: \"enforce\"\ntools: A: schema.#Echo & {input: message: =~%q}\ntools: B: schema.#Echo & {input: message: =~\"^b\"}\n", a)
	}
	dir := policyDir(t, policy("^a"))
	rt := start(t, dir)
	allowed := func(tool, msg string) bool {
		return rt.Gateway().Check([]string{"agent"}, "1", tool, []byte(fmt.Sprintf(`{"message":%q}`, msg))).Allowed
	}
	gate := func(tool string) any { return rt.Gateway().Current().Tools[tool].Gate }
	first := gate("B")
	for i, step := range []struct {
		note, a string
		broken  bool
	}{
		{note: "A changes", a: "^c"},
		{note: "a typo", a: "^d", broken: true},
		{note: "A changes again", a: "^e"},
	} {
		body := policy(step.a)
		if step.broken {
			body += "agent: allowedTools: [\"A\"]\n"
		}
		writeFile(t, filepath.Join(dir, "policy.cue"), header+body)
		if step.broken {
			waitFor(t, "the typo to be rejected", func() bool { return rt.Status().LastError != "" })
			continue
		}
		want := int64(2 + i/2)
		waitFor(t, step.note+" to be in force", func() bool { return rt.Status().Generation == want })
		if !allowed("A", step.a[1:]+"1") || allowed("A", "a1") || !allowed("B", "b1") || allowed("B", "x") {
			t.Errorf("%s: A and B do not decide as the files say", step.note)
		}
		if gate("B") != first {
			t.Errorf("%s: B, unchanged, was compiled again", step.note)
		}
	}
}

// TestR3StartRestoresTheFirstGenerationOnly: with a load cache, the first
// start records the policy (before Close returns), the next start is
// restored from the record and serves it, a reload loads the edit afresh,
// and the start after the edit loads afresh too: the record is stale. The
// embedded policy is restored alike.
func TestR3StartRestoresTheFirstGenerationOnly(t *testing.T) {
	dir := policyDir(t, `agent: "allowed-tools": ["Echo"]`+"\n")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	// run starts a runtime; its log may be read once it is closed.
	run := func(dir string) (*Runtime, *strings.Builder) {
		t.Helper()
		var log strings.Builder
		lg := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		rt, err := Start(context.Background(), Options{Dir: dir, Debounce: 20 * time.Millisecond, Cache: &loadcache.Cache{Dir: cacheDir},
			Gateway: gateway.Options{Workdir: t.TempDir(), Logger: lg}})
		if err != nil {
			t.Fatal(err)
		}
		return rt, &log
	}
	lists := func(rt *Runtime, names ...string) bool {
		listed := map[string]bool{}
		tools, _ := call(context.Background(), rt.Gateway(), `{"type":"list_tools"}`)["tools"].([]any)
		for _, tool := range tools {
			listed[fmt.Sprint(tool.(map[string]any)["name"])] = true
		}
		for _, n := range names {
			if !listed[n] {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct{ note, dir string }{{"a policy directory", dir}, {"the embedded policy", ""}} {
		rt, log := run(tc.dir)
		rt.Close()
		if !strings.Contains(log.String(), "the policy is recorded") {
			t.Fatalf("%s: the first start kept no record:\n%s", tc.note, log)
		}
		rt, log = run(tc.dir)
		served := lists(rt, "Echo")
		if tc.dir != "" {
			writeFile(t, filepath.Join(dir, "policy.cue"), header+"tools: Twice: schema.#Echo\n"+`agent: "allowed-tools": ["Echo", "Twice"]`+"\n")
			waitFor(t, "the edit to go in force", func() bool { return rt.Status().Generation == 2 })
			served = served && lists(rt, "Echo", "Twice")
		}
		rt.Close()
		if !served || !strings.Contains(log.String(), "the policy is restored from its record") || strings.Count(log.String(), "restored from its record") != 1 {
			t.Fatalf("%s: the second start did not serve the restored policy, then the edit loaded afresh (listed all: %v):\n%s", tc.note, served, log)
		}
		if tc.dir == "" {
			continue
		}
		rt, log = run(tc.dir)
		served = lists(rt, "Echo", "Twice")
		rt.Close()
		if !served || !strings.Contains(log.String(), "changed since the record was written") {
			t.Errorf("the start after the edit did not load it afresh:\n%s", log)
		}
	}
}
