package pluginhost

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"aimon.dev/gw/examples/plugins/wordcount"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/internal/testkit/lockedbuf"
	"aimon.dev/gw/plugin"
	"aimon.dev/gw/tools"
)

// The plugins the tests use, built once by TestMain.
var wordcountBin, misbehaveBin string

const helperEnv = "AIMON_GW_HOST_TEST_HELPER"

func TestMain(m *testing.M) {
	if plugin := os.Getenv(helperEnv); plugin != "" {
		os.Exit(helperMain(plugin))
	}
	const wordcount, misbehave = "aimon.dev/gw/examples/plugins/wordcount/cmd/wordcount", "aimon.dev/gw/internal/exec/pluginhost/testdata/misbehave"
	gobuild.Prebuild(wordcount, misbehave) // linked side by side
	var err error
	if wordcountBin, err = gobuild.Build(wordcount); err == nil {
		misbehaveBin, err = gobuild.Build(misbehave)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		gobuild.Cleanup()
		os.Exit(1)
	}
	gobuild.Main(m)
}

// helperMain is a gateway stand-in for TestR4NoPluginOutlivesKilledGateway:
// it starts the plugin, prints its pid and waits to be killed.
func helperMain(plugin string) int {
	h := New(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	spec := Spec{Command: []string{plugin}}
	if _, err := h.Describe(context.Background(), spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(pidOf(h, spec))
	time.Sleep(time.Hour)
	return 0
}

func newHost(t *testing.T, opts ...Option) (*Host, *lockedbuf.Buffer) {
	t.Helper()
	logs := &lockedbuf.Buffer{}
	h := New(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), opts...)
	t.Cleanup(func() {
		h.Close()
		if t.Failed() {
			t.Logf("host log:\n%s", logs)
		}
	})
	return h, logs
}

func pidOf(h *Host, s Spec) int {
	h.mu.Lock()
	sl := h.slots[s.key()]
	h.mu.Unlock()
	if sl == nil {
		return 0
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur == nil {
		return 0
	}
	return sl.cur.pid()
}

// alive reports whether pid is a process that has not exited (a zombie
// has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && rest[0] != 'Z' && rest[0] != 'X'
}

func run(t *testing.T, tl tools.Tool, in tools.Input) tools.Result {
	t.Helper()
	return tl.Run(context.Background(), &tools.Env{Workdir: "/tmp", CallID: "toolu_1"}, in)
}

// contextPid calls the Context tool and returns the pid of the process
// that answered.
func contextPid(t *testing.T, h *Host, s Spec) int {
	t.Helper()
	res := run(t, h.Tool(s, "Context", 0), tools.Input{})
	if res.IsError {
		t.Fatalf("Context failed: %s (cause %v)", res.Text, res.Cause)
	}
	var out struct{ Pid int }
	if err := json.Unmarshal([]byte(res.Text), &out); err != nil {
		t.Fatalf("Context answered %q: %v", res.Text, err)
	}
	return out.Pid
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s = %q; want it to contain %q", what, got, w)
		}
	}
}

func TestR4NormalCall(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{wordcountBin}}
	infos, err := h.Describe(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "WordCount" || infos[0].Concurrency != tools.ConcurrentSafe || infos[0].Interrupt != tools.Cooperative {
		t.Fatalf("Describe = %+v", infos)
	}
	var schema map[string]any
	if err := json.Unmarshal(infos[0].InputSchema, &schema); err != nil || schema["additionalProperties"] != false {
		t.Fatalf("schema %s: %v", infos[0].InputSchema, err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("a b c\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wc := h.Tool(spec, "WordCount", 0)
	for _, tc := range []struct {
		name    string
		in      tools.Input
		env     *tools.Env
		want    string
		isError bool
	}{
		{"text", tools.Input{"text": "hello world\n"}, nil, "1 2 12", false},
		{"relative file", tools.Input{"file_path": "f.txt"}, &tools.Env{Workdir: dir}, "2 4 8 " + filepath.Join(dir, "f.txt"), false},
		{"bad type", tools.Input{"text": json.Number("5")}, nil, "Parameter 'text' must be a string, got number 5. The tool was not executed.", true},
		{"relative without workdir", tools.Input{"file_path": "f.txt"}, &tools.Env{}, `The file_path "f.txt" is relative`, true},
		{"missing file", tools.Input{"file_path": "/nonexistent/x"}, nil, "Cannot read /nonexistent/x", true},
		{"nil input", nil, nil, "Give text or file_path.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := wc.Run(context.Background(), tc.env, tc.in)
			if res.IsError != tc.isError || !strings.HasPrefix(res.Text, tc.want) {
				t.Errorf("Run = %+v; want IsError %v and text starting %q", res, tc.isError, tc.want)
			}
		})
	}
}

func TestR4ContextReachesPlugin(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	env := &tools.Env{Workdir: "/work", Chain: []string{"agent", "subagent:x"}, CallID: "toolu_9"}
	res := h.Tool(spec, "Context", 0).Run(context.Background(), env,
		tools.Input{"n": json.Number("3.0"), "s": "x", "l": []any{true, nil}})
	if res.IsError {
		t.Fatal(res.Text)
	}
	mustContain(t, "Context", res.Text, `"workdir":"/work"`, `"chain":["agent","subagent:x"]`,
		`"call_id":"toolu_9"`, `"tool":"Context"`, `"input":{"l":[true,null],"n":3.0,"s":"x"}`)
}

func TestR4UnknownToolInPlugin(t *testing.T) {
	h, _ := newHost(t)
	res := run(t, h.Tool(Spec{Command: []string{misbehaveBin}}, "Nope", 0), nil)
	if !res.IsError {
		t.Fatal("a tool the plugin does not serve ran")
	}
	mustContain(t, "result", res.Text, "serves no tool named Nope", "Block, Context, Crash, Env, Hang, Noise, Panic, Stdin, Stuck, Touch", "plugin.tool")
}

func TestR4CrashMidCallThenRestart(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	before := contextPid(t, h, spec)

	res := run(t, h.Tool(spec, "Crash", 0), nil)
	if !res.IsError || res.Cause == nil {
		t.Fatalf("crash gave %+v; want an error result with a cause", res)
	}
	mustContain(t, "crash result", res.Text, "exited during the call", "exit status 3", "restarted")
	if alive(before) {
		t.Errorf("crashed plugin %d is still running", before)
	}

	after := contextPid(t, h, spec)
	if after == before {
		t.Errorf("the call after a crash was served by the crashed process %d", before)
	}
}

func TestR4HungPluginIsKilled(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	before := contextPid(t, h, spec)

	res := run(t, h.Tool(spec, "Hang", 200*time.Millisecond), nil)
	if !res.IsError {
		t.Fatalf("hang gave %+v", res)
	}
	mustContain(t, "hang result", res.Text, "The tool Hang did not finish within 200ms", "killed", "restarted")
	if alive(before) {
		t.Errorf("hung plugin %d is still running", before)
	}
	if after := contextPid(t, h, spec); after == before {
		t.Errorf("the call after a hang was served by the killed process")
	}
}

func TestR4PanicInToolKeepsPlugin(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	before := contextPid(t, h, spec)
	res := run(t, h.Tool(spec, "Panic", 0), nil)
	mustContain(t, "panic result", res.Text, "The tool Panic failed unexpectedly (misbehave panics)")
	if !res.IsError {
		t.Error("a panic gave a success result")
	}
	if after := contextPid(t, h, spec); after != before {
		t.Errorf("a recovered panic restarted the plugin (%d, then %d)", before, after)
	}
}

func TestR4PluginOutputReachesLog(t *testing.T) {
	h, logs := newHost(t)
	res := run(t, h.Tool(Spec{Command: []string{misbehaveBin}}, "Noise", 0), nil)
	if res.IsError || res.Text != "noisy" {
		t.Fatalf("Noise = %+v", res)
	}
	wants := []string{
		`level=WARN msg="plugin wrote to stdout (it should log to stderr)"`, `line="stdout after serving"`,
		`line="{\"@message\": 1, \"@level\": 2}"`,
		`level=WARN msg="noise made"`, "plugin.n=1",
	}
	// Plugin output reaches the log asynchronously, through pipes and
	// go-plugin's stdio stream: wait for it, within reason.
	for i := 0; i < 1000; i++ {
		if !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(logs.String(), w) }) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mustContain(t, "log", logs.String(), wants...)
}

func TestR4StdoutBeforeServing(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin, "stdout"}}
	_, err := h.Describe(context.Background(), spec)
	if err == nil {
		t.Fatal("a plugin that printed to stdout before its handshake started")
	}
	mustContain(t, "error", err.Error(), misbehaveBin+" stdout", `wrote "hello from a plugin that prints before serving" to stdout`, "log to stderr")
	res := run(t, h.Tool(spec, "Context", 0), nil)
	if !res.IsError {
		t.Fatal("the call ran")
	}
	mustContain(t, "result", res.Text, "The tool Context is not available", "wrote", "The tool was not executed.")
}

func TestR4BadDescribe(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want string
	}{
		{"bad-schema", "tool Bad declares an input schema that is not JSON"},
		{"bad-name", `tool name "bad name!" is not valid`},
		{"bad-concurrency", `tool Bad declares concurrency "parallel"`},
		{"duplicate", "declares the tool Twice twice"},
		{"no-tools", "it serves no tools"},
		{"describe-error", "failed its Describe call"},
		{"describe-hang", "did not answer Describe within 1s"},
		{"exit", "exited before it finished starting"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			h, _ := newHost(t)
			h.describeTimeout = time.Second // for describe-hang
			_, err := h.Describe(context.Background(), Spec{Command: []string{misbehaveBin, tc.mode}})
			if err == nil {
				t.Fatal("Describe succeeded")
			}
			mustContain(t, "error", err.Error(), "the plugin "+misbehaveBin+" "+tc.mode, tc.want)
		})
	}
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestR4Checksum(t *testing.T) {
	good := fileSHA(t, misbehaveBin)
	wrong := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, sha string
		want      []string // nil: starts
	}{
		{"right", good, nil},
		{"wrong", wrong, []string{"the plugin binary " + misbehaveBin + " has sha256 " + good, "the policy declares " + wrong, "not started", "update plugin.sha256"}},
		{"not hex", "xyz", []string{`has sha256 "xyz", which is not 64 hex digits`, "fix plugin.sha256"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := newHost(t)
			spec := Spec{Command: []string{misbehaveBin}, SHA256: tc.sha}
			path, verr := Verify(spec)
			_, err := h.Describe(context.Background(), spec)
			if (verr == nil) != (err == nil) || verr != nil && verr.Error() != err.Error() {
				t.Errorf("Verify = %v; a start says %v", verr, err)
			}
			if verr == nil && path != misbehaveBin {
				t.Errorf("Verify = %q", path)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("the plugin started")
			}
			mustContain(t, "error", err.Error(), tc.want...)
		})
	}
}

// go-plugin never resets SecureConfig.Hash: a hash reused for the restart
// would not match.
func TestR4ChecksumFreshHashPerStart(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}, SHA256: fileSHA(t, misbehaveBin)}
	first := contextPid(t, h, spec)
	if res := run(t, h.Tool(spec, "Crash", 0), nil); !res.IsError {
		t.Fatal("Crash did not fail")
	}
	if second := contextPid(t, h, spec); second == first {
		t.Fatal("no restart happened")
	}
}

func TestR4MissingBinary(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"/nonexistent/plugin"}, {"aimon-gw-no-such-plugin"}, {notExec}, {""}, nil} {
		t.Run(fmt.Sprint(cmd), func(t *testing.T) {
			h, _ := newHost(t)
			_, err := h.Describe(context.Background(), Spec{Command: cmd})
			if err == nil {
				t.Fatal("started")
			}
			if _, verr := Verify(Spec{Command: cmd}); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Verify = %v; a start says %v", verr, err)
			}
			if len(cmd) > 0 && cmd[0] != "" {
				mustContain(t, "error", err.Error(), cmd[0], "cannot be started", "install the plugin binary or fix plugin.command")
			} else {
				mustContain(t, "error", err.Error(), "empty command")
			}
		})
	}
}

// TestR4BackoffAfterRepeatedCrashes: a tool that crashes its plugin twice
// in a row is backed off alone; its siblings restart the plugin at once
// (issue 19).
func TestR4BackoffAfterRepeatedCrashes(t *testing.T) {
	h, _ := newHost(t, WithBackoff(time.Hour, time.Hour))
	spec := Spec{Command: []string{misbehaveBin}}
	crash := h.Tool(spec, "Crash", 0)
	for i, want := range []string{
		"the plugin will be restarted for the next call",
		"after 2 failures in a row Crash will not be run for 1h0m0s",
	} {
		res := run(t, crash, nil)
		mustContain(t, fmt.Sprintf("crash %d", i), res.Text, "exited during the call", want)
	}
	res := run(t, crash, nil)
	mustContain(t, "third crash call", res.Text, "crashed or hung its plugin 2 times in a row", "another 1h0m0s", "other tools are not affected")
	if res := run(t, h.Tool(spec, "Context", 0), nil); res.IsError {
		t.Fatalf("a sibling of a crashing tool is refused: %s", res.Text)
	}
}

func TestR4ConcurrentCallsShareOneStart(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	pids := make([]int, 8)
	var wg sync.WaitGroup
	for i := range pids {
		wg.Go(func() { pids[i] = contextPid(t, h, spec) })
	}
	wg.Wait()
	for _, p := range pids {
		if p != pids[0] {
			t.Fatalf("concurrent first calls started several processes: %v", pids)
		}
	}
}

// block starts a Block call that returns once its file exists, and waits
// until the call is in flight.
func block(t *testing.T, h *Host, ctx context.Context, spec Spec) (release func(), result <-chan tools.Result) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "release")
	ch := make(chan tools.Result, 1)
	sl := h.lease(spec).sl
	go func() { ch <- h.Tool(spec, "Block", 0).Run(ctx, nil, tools.Input{"file": file}) }()
	for {
		sl.mu.Lock()
		n := 0
		if sl.cur != nil {
			n = sl.cur.inflight
		}
		sl.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return func() {
		if err := os.WriteFile(file, nil, 0o644); err != nil {
			t.Error(err)
		}
	}, ch
}

func TestR4CancelledCallKeepsPlugin(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	pid := contextPid(t, h, spec)
	ctx, cancel := context.WithCancel(context.Background())
	_, result := block(t, h, ctx, spec)
	cancel()
	res := <-result
	if !res.IsError {
		t.Fatalf("cancelled call = %+v", res)
	}
	mustContain(t, "result", res.Text, "The call to Block was cancelled.")
	if again := contextPid(t, h, spec); again != pid {
		t.Errorf("a cancelled call restarted the plugin")
	}
}

func TestR4RetainStopsDroppedPluginAfterInFlightCalls(t *testing.T) {
	h, _ := newHost(t)
	kept := Spec{Command: []string{misbehaveBin}}
	dropped := Spec{Command: []string{misbehaveBin}, SHA256: fileSHA(t, misbehaveBin)}
	keptPid := contextPid(t, h, kept)
	droppedPid := contextPid(t, h, dropped)
	oldTool := h.Tool(dropped, "Context", 0)

	release, result := block(t, h, context.Background(), dropped)
	h.Retain([]Spec{kept})
	if !alive(droppedPid) {
		t.Fatal("Retain stopped a plugin with a call in flight")
	}
	if res := run(t, oldTool, nil); !res.IsError || !strings.Contains(res.Text, "removed from the policy") {
		t.Errorf("a new call to a dropped plugin = %+v", res)
	}
	release()
	if res := <-result; res.IsError || res.Text != fmt.Sprintf("released %d", droppedPid) {
		t.Errorf("the in-flight call = %+v", res)
	}
	// The last call's release stopped the process before Run returned.
	if alive(droppedPid) {
		t.Errorf("dropped plugin %d still runs after its last call", droppedPid)
	}
	if pid := contextPid(t, h, kept); pid != keptPid {
		t.Errorf("Retain restarted a kept plugin")
	}
	// The policy may declare it again: a new process.
	if pid := contextPid(t, h, dropped); pid == droppedPid || pid == 0 {
		t.Errorf("re-declared plugin pid %d", pid)
	}
}

func TestR4RetainStopsIdlePlugin(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{wordcountBin}}
	if _, err := h.Describe(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(h, spec)
	p := h.slots[spec.key()].cur
	h.Retain(nil)
	<-p.done
	if alive(pid) {
		t.Errorf("idle dropped plugin %d still runs", pid)
	}
}

func TestR4CloseStopsEverything(t *testing.T) {
	h, _ := newHost(t)
	a := Spec{Command: []string{misbehaveBin}}
	b := Spec{Command: []string{wordcountBin}}
	pa := contextPid(t, h, a)
	if _, err := h.Describe(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	pb := pidOf(h, b)
	_, result := block(t, h, context.Background(), a)
	h.Close()
	if alive(pa) || alive(pb) {
		t.Errorf("plugins %d, %d outlive Close", pa, pb)
	}
	if res := <-result; !res.IsError || !strings.Contains(res.Text, "shutting down") {
		t.Errorf("the call in flight at Close = %+v", res)
	}
	res := run(t, h.Tool(a, "Context", 0), nil)
	mustContain(t, "call after Close", res.Text, "shutting down")
}

func TestR4NoPluginOutlivesKilledGateway(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+misbehaveBin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || perr != nil || pid <= 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper printed %q: %v %v", line, err, perr)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	// A killed gateway cannot remove the plugin's socket directory.
	if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for kv := range strings.SplitSeq(string(env), "\x00") {
			if dir, ok := strings.CutPrefix(kv, "PLUGIN_UNIX_SOCKET_DIR="); ok && dir != "" {
				t.Cleanup(func() { os.RemoveAll(dir) })
			}
		}
	}
	if !alive(pid) {
		t.Fatalf("plugin %d is not running before the gateway is killed", pid)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The kernel sends the parent-death signal as the gateway exits; the
	// plugin dies as soon as it is scheduled. Wait for that, within reason.
	for range 1000 {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("plugin %d outlives its SIGKILLed gateway", pid)
}

// A stopped (SIGSTOP) plugin never answers go-plugin's graceful shutdown;
// stopping it must still end, by SIGKILL after the kill timeout.
func TestR4KillIsBounded(t *testing.T) {
	h, _ := newHost(t, WithKillTimeout(time.Second))
	spec := Spec{Command: []string{misbehaveBin}}
	pid := contextPid(t, h, spec)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if alive(pid) {
		t.Errorf("stopped plugin %d outlives Close", pid)
	}
}

// The cost of one plugin call against one in-process call of the same tool.
func BenchmarkCallPlugin(b *testing.B) {
	h := New(slog.New(slog.DiscardHandler))
	defer h.Close()
	benchmarkCall(b, h.Tool(Spec{Command: []string{wordcountBin}}, "WordCount", 0))
}

func BenchmarkCallInProcess(b *testing.B) {
	benchmarkCall(b, plugin.InProcess(wordcount.Tool(slog.New(slog.DiscardHandler))))
}

func benchmarkCall(b *testing.B, tl tools.Tool) {
	env := &tools.Env{Workdir: "/tmp", Chain: []string{"agent"}, CallID: "toolu_1"}
	in := tools.Input{"text": "the quick brown fox\njumps over the lazy dog\n"}
	if res := tl.Run(context.Background(), env, in); res.IsError || res.Text != "2 9 44" {
		b.Fatalf("WordCount = %+v", res)
	}
	b.ResetTimer()
	for b.Loop() {
		tl.Run(context.Background(), env, in)
	}
}

// The gateway's stdin is the agent's protocol stream: a plugin must not
// share it (go-plugin's own runner would hand it over).
func TestR1PluginDoesNotShareStdin(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()

	h, _ := newHost(t)
	res := run(t, h.Tool(Spec{Command: []string{misbehaveBin}}, "Stdin", 0), nil)
	if res.IsError || res.Text != "/dev/null" {
		t.Errorf("the plugin's stdin is %+v; want /dev/null", res)
	}
}

// A process that Retain left to finish its calls is still the host's to
// stop at Close.
func TestR4CloseStopsRetiringPlugin(t *testing.T) {
	h, _ := newHost(t)
	spec := Spec{Command: []string{misbehaveBin}}
	pid := contextPid(t, h, spec)
	_, result := block(t, h, context.Background(), spec)
	h.Retain(nil)
	if !alive(pid) {
		t.Fatal("Retain stopped a plugin with a call in flight")
	}
	h.Close()
	if alive(pid) {
		t.Errorf("retiring plugin %d outlives Close", pid)
	}
	if res := <-result; !res.IsError {
		t.Errorf("the call in flight at Close = %+v", res)
	}
}

// A start that takes longer than the call's deadline fails the call; the
// start goes on for later calls, bounded by its own timeout.
func TestR4SlowStartFailsTheCall(t *testing.T) {
	h, _ := newHost(t, WithStartTimeout(time.Second))
	res := run(t, h.Tool(Spec{Command: []string{misbehaveBin, "describe-hang"}}, "X", 100*time.Millisecond), nil)
	if !res.IsError {
		t.Fatalf("Run = %+v", res)
	}
	mustContain(t, "result", res.Text, "The plugin of X did not start within the call's deadline of 100ms")
}

// A cancelled call of an externally_terminated tool kills the process
// (rule K1); the next call gets a new one, with no failure counted.
func TestK1CancelKillsExternallyTerminatedTool(t *testing.T) {
	h, _ := newHost(t, WithBackoff(time.Hour, time.Hour))
	spec := Spec{Command: []string{misbehaveBin}}
	for i := range 3 {
		pid := contextPid(t, h, spec)
		ctx, cancel := context.WithCancel(context.Background())
		result := make(chan tools.Result, 1)
		go func() { result <- h.Tool(spec, "Stuck", 0).Run(ctx, nil, nil) }()
		sl := h.lease(spec).sl
		for n := 0; n == 0; time.Sleep(time.Millisecond) {
			sl.mu.Lock()
			if sl.cur != nil {
				n = sl.cur.inflight
			}
			sl.mu.Unlock()
		}
		cancel()
		res := <-result
		mustContain(t, fmt.Sprintf("cancel %d", i), res.Text, "The call to Stuck was cancelled; its plugin process was killed")
		if alive(pid) {
			t.Errorf("plugin %d survives the cancellation of an externally_terminated call", pid)
		}
	}
}

// WithStartTimeout bounds a start: the handshake, and then Describe.
func WithStartTimeout(d time.Duration) Option {
	return func(h *Host) { h.startTimeout, h.describeTimeout = d, d }
}

// WithKillTimeout bounds each step of stopping a process: the graceful stop,
// then the wait after SIGKILL. Stopping never takes longer than twice this.
func WithKillTimeout(d time.Duration) Option { return func(h *Host) { h.killTimeout = d } }

// WithBackoff sets the delay before a restart after repeated failures: base
// after the second failure in a row, doubling each time, at most max. The
// first restart after a failure is immediate.
func WithBackoff(base, max time.Duration) Option {
	return func(h *Host) { h.backoffBase, h.backoffMax = base, max }
}
