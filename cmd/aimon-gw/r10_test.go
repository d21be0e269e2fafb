package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// smallTmpfs mounts a tmpfs of one page, for a decision log on a disk that
// fills; it needs root, so the test fails under CI and skips elsewhere
// when it cannot mount.
func smallTmpfs(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "aimon-gw-full")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=4k,mode=0777"); err != nil {
		os.Remove(dir)
		if os.Getenv("CI") != "" {
			t.Fatalf("cannot mount a tmpfs for a full disk (run the tests as root): %v", err)
		}
		t.Skipf("cannot mount a tmpfs for a full disk (needs root): %v", err)
	}
	t.Cleanup(func() {
		syscall.Unmount(dir, syscall.MNT_DETACH)
		os.Remove(dir)
	})
	return dir
}

// fill writes path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		if _, err := f.Write(make([]byte, 512)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestR10ACallWhoseRecordCannotBeWrittenDoesNotRun: with the decision log
// on a full disk, or one with room for part of a record, the first call is
// refused with why and writes nothing, and the log holds no torn line; as
// the test's user and as nobody.
func TestR10ACallWhoseRecordCannotBeWrittenDoesNotRun(t *testing.T) {
	for _, u := range gatewayUsers(t) {
		for _, full := range []bool{true, false} {
			name := u.name + "/mid-write"
			if full {
				name = u.name + "/full"
			}
			t.Run(name, func(t *testing.T) {
				mnt := smallTmpfs(t)
				logFile := filepath.Join(mnt, "decisions.jsonl")
				var earlier string
				if full {
					fill(t, filepath.Join(mnt, "filler"))
				} else {
					// Earlier records fill the page but for 40 bytes: the
					// next record is cut short by the disk.
					earlier = `{"earlier":"` + strings.Repeat("x", 4096-40-15) + "\"}\n"
					if err := os.WriteFile(logFile, []byte(earlier), 0o666); err != nil {
						t.Fatal(err)
					}
				}
				if u.uid >= 0 {
					os.Chown(logFile, u.uid, u.gid)
				}
				base, err := os.MkdirTemp("", "aimon-gw-r10")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(base) })
				os.Chmod(base, 0o755)
				work := filepath.Join(base, "work")
				os.Mkdir(work, 0o777)
				os.Chmod(work, 0o777)
				policy := filepath.Join(base, "policy")
				writeFile(t, filepath.Join(policy, "cue.mod", "module.cue"), "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")
				writeFile(t, filepath.Join(policy, "policy.cue"), "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Write: schema.#Write\nagent: \"allowed-tools\": [\"Write(./**)\"]\n")
				filepath.Walk(policy, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
				write := func(id string) string {
					return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":"Write","input":{"file_path":%q,"content":"x"}}`, id, filepath.Join(work, id))
				}
				var stderr strings.Builder
				replies := runServeLog(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", work, "--cache", "off", "--decision-log", logFile}, nil, &stderr, write("first"), write("second"))
				for i, id := range []string{"first", "second"} {
					if _, err := os.Stat(filepath.Join(work, id)); err == nil {
						t.Errorf("the %s call ran with its record unwritten", id)
					}
					if replies[i]["is_error"] != true || !strings.Contains(text(replies[i]), "decision log cannot be written") {
						t.Errorf("the %s call's reply: %v", id, replies[i])
					}
				}
				if !strings.Contains(text(replies[0]), "no space left on device") {
					t.Errorf("the first reply does not say why: %s", text(replies[0]))
				}
				data, err := os.ReadFile(logFile)
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != earlier {
					t.Errorf("the decision log holds %q after the earlier records; want nothing (no torn record)", strings.TrimPrefix(string(data), earlier))
				}
			})
		}
	}
}

// TestR10DrainEndsWithEveryRecordWritten: a call still running when the
// drain ends has its decision recorded before it ran, and a result.
func TestR10DrainEndsWithEveryRecordWritten(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--decision-log", dlog, "--drain", "500ms")
	s := g.session("tok-alice", "", nil)
	go s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "sleep 30.5"}})
	waitStarted(t, "30.5")
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the gateway outlived its drain: %s", g.logs())
	}
	phases := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(readLog(t, dlog)), "\n") {
		r := record(t, line)
		if r["tool"] == "Bash" {
			phases[r["phase"].(string)] = r
		}
	}
	if r := phases["running"]; r == nil || r["allowed"] != true {
		t.Errorf("no decision recorded before the call ran: %v", phases)
	}
	// Cancelled at the drain's end, it returned before the log closed, or
	// the log recorded it as cut off.
	if r := phases["result"]; r == nil || r["result_error"] != true {
		t.Errorf("the cut-off call's result: %v", phases["result"])
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestR10DecisionLogSyncFlag: --decision-log-sync takes no value, and its
// records are the same.
func TestR10DecisionLogSyncFlag(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo"]`+"\n")
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
	runServe(t, []string{"--policy", dir, "--decision-log", logFile, "--decision-log-sync"}, nil, `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"m"}}`)
	if n := strings.Count(readLog(t, logFile), "\n"); n != 2 {
		t.Errorf("%d records, want the decision and the result", n)
	}
	out, err := exec.Command(gatewayBinary(t), "serve", "--policy", dir, "--decision-log-sync=maybe").CombinedOutput()
	if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), "decision-log-sync") {
		t.Errorf("--decision-log-sync=maybe: exit %d: %s", code, out)
	}
}

func record(t *testing.T, line string) map[string]any {
	t.Helper()
	var r map[string]any
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("record %q: %v", line, err)
	}
	return r
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestR10SearchesSkipFIFOsDevicesAndSockets: Glob and Grep over a tree
// that holds a FIFO, a device and a socket answer, listing and reading
// only the regular file, and SIGTERM then ends serve.
func TestR10SearchesSkipFIFOsDevicesAndSockets(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Glob: schema.#Glob, Grep: schema.#Grep, Bash: schema.#Bash & {sandbox: mode: \"off\"}}\nagent: \"allowed-tools\": [\"Glob(./**)\", \"Grep(./**)\", \"Bash(sleep:*)\"]\n")
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "a.txt"), "hello\n")
	os.Mkdir(filepath.Join(wd, "sub"), 0o755)
	for _, p := range []string{"fifo", "sub/fifo"} {
		if err := syscall.Mkfifo(filepath.Join(wd, p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(wd, "null"), syscall.S_IFCHR|0o600, 1<<8|3); err != nil {
			t.Fatal(err)
		}
	}
	sock, err := net.Listen("unix", filepath.Join(wd, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	cmd := exec.Command(gatewayBinary(t), "serve", "--policy", dir, "--workdir", wd, "--cache", "off", "--drain", "2s")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, `{"type":"tool_use","id":"glob","name":"Glob","input":{"pattern":"**/*"}}`)
	fmt.Fprintln(in, `{"type":"tool_use","id":"grep","name":"Grep","input":{"pattern":"hello","output_mode":"content"}}`)
	replies := make(chan map[string]any)
	go func() {
		defer close(replies)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			json.Unmarshal(sc.Bytes(), &m)
			replies <- m
		}
	}()
	for _, want := range []string{"glob", "grep"} {
		select {
		case r := <-replies:
			if r["tool_use_id"] != want || r["is_error"] == true || !strings.Contains(text(r), "a.txt") || strings.Contains(text(r), "fifo") || strings.Contains(text(r), "sock") || strings.Contains(text(r), "null") {
				t.Errorf("%s: %v", want, r)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Signal(syscall.SIGQUIT)
			time.Sleep(time.Second)
			t.Fatalf("no answer to %s: it blocks on a FIFO\n%s", want, stderr.String())
		}
	}
	// Then SIGTERM mid-call.
	fmt.Fprintln(in, bashLine("long", "sleep 30.75"))
	waitStarted(t, "30.75")
	cmd.Process.Signal(syscall.SIGTERM)
	for range replies {
	}
	exits(t, cmd, 20*time.Second)
}

// TestR10ASilentServerWithholdsOnlyItsTools: a server that starts and
// never answers is waited for within its timeout, not 30 s: its tools are
// withheld, saying how long it was given, and the built-ins answer.
func TestR10ASilentServerWithholdsOnlyItsTools(t *testing.T) {
	t.Parallel()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	dir := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
servers: mute: {command: [%q, "60.25"], expose: ["x"], pin: false, timeout: "1s"}
servers: wide: {command: [%q, "60.5"], expose: "*", pin: false}
agent: "allowed-tools": ["Echo", "mute__x"]
`, sleep, sleep))
	replies := runServe(t, []string{"--policy", dir, "--cache", "off", "--load-timeout", "2s"}, nil,
		`{"type":"tool_use","id":"echo","name":"Echo","input":{"message":"hi"}}`,
		`{"type":"tool_use","id":"mute","name":"mute__x","input":{}}`)
	if replies[0]["is_error"] == true || text(replies[0]) != "hi" {
		t.Errorf("the built-in: %v", replies[0])
	}
	if !strings.Contains(text(replies[1]), "did not answer within 1s") {
		t.Errorf("the silent server's tool: %v", replies[1])
	}
}

// TestR10BadDrain: a drain that is not a positive duration is a usage
// error with a sentence.
func TestR10BadDrain(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--drain", "0s"}, {"serve", "--drain", "soon"}, {"mcp", "--drain-delay", "-1s"}, {"mcp", "--drain", "-5s"}} {
		out, err := exec.Command(gatewayBinary(t), args...).CombinedOutput()
		if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), args[1]) {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
}
