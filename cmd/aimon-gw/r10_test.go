package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/internal/testkit/policydir"
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
		need.Missing(t, "a tmpfs for a full disk cannot be mounted (run the tests as root): %v", err)
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
				policydir.WriteIn(t, policy, map[string]string{"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Write: schema.#Write\nagent: \"allowed-tools\": [\"Write(./**)\"]\n"})
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

// echoBeside is a policy of Echo and lines, in which %[1]q is the path of
// sleep: a server that starts and never answers.
func echoBeside(t *testing.T, lines string) string {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	return moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\n"+fmt.Sprintf(lines, sleep))
}

// TestR10ASilentServerWithholdsOnlyItsTools: a server that starts and
// never answers is waited for within its timeout, not 30 s: its tools are
// withheld, saying how long it was given, and the built-ins answer.
func TestR10ASilentServerWithholdsOnlyItsTools(t *testing.T) {
	t.Parallel()
	dir := echoBeside(t, `servers: mute: {command: [%[1]q, "60.25"], expose: ["x"], pin: false, timeout: "1s"}
servers: wide: {command: [%[1]q, "60.5"], expose: "*", pin: false}
agent: "allowed-tools": ["Echo", "mute__x"]
`)
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

// waitedPolicy is Echo beside two MCP servers whose first answer the
// gateway waits for: slow, the test's file server, which starts only once
// release is called (its wrapper reads a FIFO first), and records each call
// it receives in calls; and mute, which never answers (bound 3s).
func waitedPolicy(t *testing.T) (dir string, release func(), calls string) {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	fifo, calls := filepath.Join(tmp, "go"), filepath.Join(tmp, "calls")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir = moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
validation: "enforce"
servers: slow: {command: ["/bin/sh", "-c", "read go < %s && exec %s"], expose: ["read_file"], pin: false, timeout: "30s", env: AIMON_TEST_CALLS: %q}
servers: mute: {command: [%q, "60.25"], expose: ["x"], pin: false, timeout: "3s"}
agent: "allowed-tools": ["Echo", "slow__read_file", "mute__x"]
principals: alice: {subject: "alice", surface: ["agent"]}
`, fifo, fsServer(t), calls, sleep))
	release = sync.OnceFunc(func() {
		// Opening the FIFO waits for its reader, the server's wrapper,
		// which the gateway started at load.
		opened := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString("go\n")
				f.Close()
			}
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the gateway never started the slow server")
		}
	})
	return dir, release, calls
}

// TestR10BuiltinsAnswerWhileAServerIsWaitedFor: the first load waits for
// no MCP server. In serve, mcp over stdio and mcp --listen, Echo answers
// while the slow server provably has not answered (it cannot: the test has
// not let it start), and the status names it as not answered yet; a call
// of its tool sent then waits for it and is decided on the schema it
// declares, so a bad input is refused by the gate and never reaches it,
// and a good one runs; a listing has its tools; the silent server's tool
// is refused once its bound ran out, saying so.
func TestR10BuiltinsAnswerWhileAServerIsWaitedFor(t *testing.T) {
	t.Parallel()
	args := []string{"--cache", "off", "--load-timeout", "60s"}
	f := filepath.Join(t.TempDir(), "f")
	os.WriteFile(f, []byte("hello"), 0o644)
	reached := func(t *testing.T, calls string) string { // the calls, not the listings
		b, _ := os.ReadFile(calls)
		var got []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "read_file ") {
				got = append(got, l)
			}
		}
		return strings.Join(got, "\n")
	}
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		dir, release, calls := waitedPolicy(t)
		s, stop := serveBinary(t, nil, append([]string{"--policy", dir, "--workdir", dir}, args...)...)
		defer stop()
		if r := s.send(toolLine("e", "Echo", map[string]any{"message": "hi"})); r["is_error"] != false || text(r) != "hi" {
			t.Fatalf("Echo while the servers are waited for: %v", r)
		}
		st := s.send(`{"type":"status"}`)
		if why := fmt.Sprint(st["unavailable"]); !strings.Contains(why, "slow") || !strings.Contains(why, "it has not answered yet; the gateway waits up to 30s") {
			t.Errorf("the status while slow is waited for: %v", st)
		}
		// Sent before slow can answer; answered once it has.
		if _, err := io.WriteString(s.in, toolLine("b", "slow__read_file", map[string]any{"path": 5})+"\n"); err != nil {
			t.Fatal(err)
		}
		release()
		line, err := s.out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var bad map[string]any
		json.Unmarshal([]byte(line), &bad)
		if bad["is_error"] != true || !strings.Contains(text(bad), "Parameter 'path' must be a string") {
			t.Errorf("a bad input of the waited-for tool: %v", bad)
		}
		if got := reached(t, calls); got != "" {
			t.Errorf("the bad input reached the server: %q", got)
		}
		if r := s.send(toolLine("g", "slow__read_file", map[string]any{"path": f})); r["is_error"] != false || text(r) != "hello" {
			t.Errorf("the slow server's tool once it answered: %v", r)
		}
		if r := s.send(toolLine("m", "mute__x", map[string]any{})); r["is_error"] != true || !strings.Contains(text(r), "did not answer within 3s") {
			t.Errorf("the silent server's tool: %v", r)
		}
		if list := fmt.Sprint(s.send(`{"type":"list_tools"}`)); !strings.Contains(list, "slow__read_file") || strings.Contains(list, "mute__x") {
			t.Errorf("list_tools: %s", list)
		}
		if st := s.send(`{"type":"status"}`); unavailableServers(st) != "mute" || st["generation"] != 1.0 {
			t.Errorf("the status once both servers are done with: %v", st)
		}
		if got := reached(t, calls); got != "read_file "+f {
			t.Errorf("the server received %q", got)
		}
	})
	// mcpSteps is the rest of the test for an MCP session that answered
	// Echo before slow could answer.
	mcpSteps := func(t *testing.T, s *mcp.ClientSession, release func(), calls string) {
		ctx := context.Background()
		type res struct {
			r   *mcp.CallToolResult
			err error
		}
		badc := make(chan res, 1)
		go func() {
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow__read_file", Arguments: map[string]any{"path": 5}})
			badc <- res{r, err}
		}()
		names := make(chan string, 1)
		go func() { names <- toolNames(t, s) }()
		release()
		if bad := <-badc; bad.err != nil || !bad.r.IsError || !strings.Contains(resultText(bad.r), "Parameter 'path' must be a string") {
			t.Errorf("a bad input of the waited-for tool: %v %v", bad.err, bad.r)
		}
		if got := <-names; got != "Echo,slow__read_file" {
			t.Errorf("a listing sent while slow was waited for: %s", got)
		}
		if got := reached(t, calls); got != "" {
			t.Errorf("the bad input reached the server: %q", got)
		}
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow__read_file", Arguments: map[string]any{"path": f}})
		if err != nil || r.IsError || resultText(r) != "hello" {
			t.Errorf("the slow server's tool once it answered: %v %v", err, r)
		}
		r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "mute__x", Arguments: map[string]any{}})
		if err != nil || !r.IsError || !strings.Contains(resultText(r), "did not answer within 3s") {
			t.Errorf("the silent server's tool: %v %v", err, r)
		}
	}
	echo := func(t *testing.T, s *mcp.ClientSession) {
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil || r.IsError || resultText(r) != "hi" {
			t.Fatalf("Echo while the servers are waited for: %v %v", err, r)
		}
	}
	t.Run("mcp", func(t *testing.T) {
		t.Parallel()
		dir, release, calls := waitedPolicy(t)
		cmd := exec.Command(gatewayBinary(t), append([]string{"mcp", "--policy", dir, "--workdir", dir}, args...)...)
		s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		defer release() // so that nothing waits on the FIFO after a failure
		echo(t, s)
		mcpSteps(t, s, release, calls)
	})
	t.Run("listen", func(t *testing.T) {
		t.Parallel()
		dir, release, calls := waitedPolicy(t)
		defer release()
		g := startHTTP(t, http.DefaultClient, append([]string{"--policy", dir, "--workdir", dir, "--tokens", tokensFile(t, staticTokens)}, args...)...)
		defer g.stop()
		s := g.session("tok-alice", "", nil)
		echo(t, s)
		mcpSteps(t, s, release, calls)
	})
}

// TestR10RetryOfASilentServerIsBounded: the gateway tries a server that
// did not answer again in the background, and each try waits for it
// within its timeout too, not a fixed 30 s: the retry says so.
func TestR10RetryOfASilentServerIsBounded(t *testing.T) {
	t.Parallel()
	dir := echoBeside(t, `servers: mute: {command: [%[1]q, "60.75"], expose: ["x"], pin: false, timeout: "1s"}
agent: "allowed-tools": ["Echo", "mute__x"]
`)
	stderr := &startPiped(t, nil, gatewayBinary(t), "--log-level", "debug", "serve", "--policy", dir, "--cache", "off").stderr
	const retried = "an upstream server is still unavailable"
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(stderr.String(), retried); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server was never tried again:\n%s", stderr.String())
		}
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, retried) && !strings.Contains(l, "did not answer within 1s") {
			t.Errorf("a retry of the silent server: %s", l)
		}
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

// TestR2BadMaxLineBytes: a line limit that is not positive, which would
// refuse every line, is a usage error with a sentence, for serve and mcp.
func TestR2BadMaxLineBytes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--max-line-bytes", "0"}, {"serve", "--max-line-bytes", "-1"}, {"mcp", "--max-line-bytes", "0"}} {
		cmd := exec.Command(gatewayBinary(t), args...)
		cmd.Stdin = strings.NewReader(`{"type":"status"}` + "\n")
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), "--max-line-bytes "+args[2]+" is not a positive number of bytes") {
			t.Errorf("%v: exit %d: %s", args, code, out)
		}
	}
}
