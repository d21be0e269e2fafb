package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/need"
)

// approvedRead is the Read of path sent back with token.
func approvedRead(id, path, token string) string {
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "Read", "input": map[string]any{"file_path": path}, "approvals": []string{token}})
	return string(b)
}

// askToken asks for the Read of secret/a and returns the token the ask
// was answered with.
func askToken(t *testing.T, reply map[string]any) string {
	t.Helper()
	m := tokenRE.FindStringSubmatch(text(reply))
	if reply["is_error"] != true || m == nil {
		t.Fatalf("an ask must be answered with a token: %v", reply)
	}
	return m[1]
}

// TestR10ApprovalRunsOnceAcrossProcessesAndRestarts: two serve processes
// that share the approval key and the state directory, and a third
// started after both ended, run one approval once between them: the
// spent list is the state store's, not a process's memory. The default
// state directory holds it as well.
func TestR10ApprovalRunsOnceAcrossProcessesAndRestarts(t *testing.T) {
	t.Parallel()
	dir, wd := askSetup(t)
	key := approvalKey(t)
	for _, st := range []struct{ name, flag string }{{"--state DIR", filepath.Join(t.TempDir(), "state")}, {"the default state directory", ""}} {
		args := []string{"--policy", dir, "--workdir", wd, "--approval-key", key}
		if st.flag != "" {
			args = append(args, "--state", st.flag)
		}
		tok := askToken(t, runServe(t, args, nil, toolLine("ask", "Read", map[string]any{"file_path": "secret/a"}))[0])
		a := startServeProc(t, args...)
		b := startServeProc(t, args...)
		if r := a.send(approvedRead("a", "secret/a", tok)); r["is_error"] != false || !strings.Contains(text(r), "the secret") {
			t.Fatalf("%s: the approved call must run on the first process: %v", st.name, r)
		}
		if r := b.send(approvedRead("b", "secret/a", tok)); r["is_error"] != true || !strings.Contains(text(r), "already used") || strings.Contains(text(r), "the secret") {
			t.Errorf("%s: the token spent on the first process ran again on the second: %v", st.name, r)
		}
		a.close()
		b.close()
		if r := runServe(t, args, nil, approvedRead("restart", "secret/a", tok))[0]; r["is_error"] != true || !strings.Contains(text(r), "already used") {
			t.Errorf("%s: the token ran again after a restart: %v", st.name, r)
		}
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_STATE_HOME"), "aimon-gw", "spent")); err != nil {
		t.Errorf("the default state store is not in $XDG_STATE_HOME/aimon-gw: %v", err)
	}
}

// TestR10StateDirectoryIsTheGatewaysAlone: the local store is concealed
// from the tools (rule R8): a Read of a spent record is refused, so no
// tool learns or removes what was spent.
func TestR10StateDirectoryIsTheGatewaysAlone(t *testing.T) {
	t.Parallel()
	dir, _ := askSetup(t)
	state := t.TempDir()
	key := approvalKey(t)
	args := []string{"--policy", dir, "--workdir", state, "--approval-key", key, "--state", state}
	askToken(t, runServe(t, args, nil, toolLine("ask", "Read", map[string]any{"file_path": "secret/a"}))[0])
	ents, err := os.ReadDir(filepath.Join(state, "spent"))
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(state, "spent", "probe")
	os.WriteFile(probe, []byte("1"), 0o600)
	if r := runServe(t, args, nil, toolLine("r", "Read", map[string]any{"file_path": probe}))[0]; r["is_error"] != true || !strings.Contains(text(r), "secret of the gateway's") {
		t.Errorf("a Read in the state directory must be refused as the gateway's secret: %v (%d records)", r, len(ents))
	}
}

// TestR8ApprovalKeyMustBeTheGatewaysAlone: a key with a second name (a
// hard link made before the start), one open to others, or a directory is
// refused at start, with a sentence; a bad --state is refused too.
func TestR8ApprovalKeyMustBeTheGatewaysAlone(t *testing.T) {
	t.Parallel()
	linked := approvalKey(t)
	if err := os.Link(linked, filepath.Join(t.TempDir(), "other-name")); err != nil {
		t.Fatal(err)
	}
	open := approvalKey(t)
	os.Chmod(open, 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"hard link", []string{"--approval-key", linked}, "has 2 names (hard links)"},
		{"open mode", []string{"--approval-key", open}, "may be read or written by others"},
		{"directory", []string{"--approval-key", t.TempDir()}, "is not a regular file"},
		{"bad state URL", []string{"--approval-key", approvalKey(t), "--state", "memcache://x"}, "neither a directory nor a redis://"},
		{"bad redis URL", []string{"--approval-key", approvalKey(t), "--state", "redis://h:notaport/x"}, "not a Redis URL it can use"},
	}
	for _, c := range cases {
		cmd := exec.Command(gatewayBinary(t), append([]string{"serve"}, c.args...)...)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: want exit 2 saying %q, got %v: %s", c.name, c.want, err, out)
		}
	}
}

// TestR10ApprovalRunsOnceAcrossReplicasThroughRedis: two replicas share a
// real Redis. A token spent on one is spent on the other; in 100 rounds
// where both are sent the same token at once, exactly one runs it. With
// Redis stopped, an approved call is refused with a sentence and the other
// calls are served, and /readyz of mcp --listen says why.
func TestR10ApprovalRunsOnceAcrossReplicasThroughRedis(t *testing.T) {
	addr, stop := startRedis(t)
	dir, wd := askSetup(t)
	key := approvalKey(t)
	args := []string{"--policy", dir, "--workdir", wd, "--approval-key", key, "--state", "redis://" + addr}
	a := startServeProc(t, args...)
	b := startServeProc(t, args...)
	for round := range 100 {
		tok := askToken(t, a.send(toolLine(fmt.Sprintf("ask%d", round), "Read", map[string]any{"file_path": "secret/a"})))
		var wg sync.WaitGroup
		var ra, rb map[string]any
		wg.Add(2)
		go func() { defer wg.Done(); ra = a.send(approvedRead("a", "secret/a", tok)) }()
		go func() { defer wg.Done(); rb = b.send(approvedRead("b", "secret/a", tok)) }()
		wg.Wait()
		ran := 0
		for _, r := range []map[string]any{ra, rb} {
			if r["is_error"] == false && strings.Contains(text(r), "the secret") {
				ran++
			} else if !strings.Contains(text(r), "already used") {
				t.Fatalf("round %d: a refusal must say the token was used: %v", round, r)
			}
		}
		if ran != 1 {
			t.Fatalf("round %d: the token ran %d times across the two replicas: %v / %v", round, ran, ra, rb)
		}
	}

	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--approval-key", key, "--state", "redis://"+addr)
	readyz := func() string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := http.Get(g.base + "/readyz")
			if err == nil {
				body, _ := io.ReadAll(r.Body)
				r.Body.Close()
				if r.StatusCode == 200 {
					return string(body)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz never answered 200: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if s := readyz(); strings.Contains(s, "degraded") {
		t.Errorf("/readyz with Redis up: %q", s)
	}

	tok := askToken(t, a.send(toolLine("ask-down", "Read", map[string]any{"file_path": "secret/a"})))
	stop()
	if r := a.send(approvedRead("down", "secret/a", tok)); r["is_error"] != true || !strings.Contains(text(r), "cannot be recorded as spent") || strings.Contains(text(r), "the secret") {
		t.Errorf("with Redis down an approved call must be refused, saying why: %v", r)
	}
	if r := b.send(toolLine("open", "Read", map[string]any{"file_path": "open"})); r["is_error"] != false {
		t.Errorf("with Redis down the calls that need no approval are served: %v", r)
	}
	if s := readyz(); !strings.Contains(s, "degraded: approved calls are refused, as are the calls a limit counts") || !strings.Contains(s, addr) {
		t.Errorf("/readyz with Redis down must say why approved calls are refused: %q", s)
	}
}

// startRedis starts a real redis-server on a free loopback port and
// returns its address and a stop that may be called early; it fails under
// CI and skips elsewhere when redis-server is missing. args are more of
// redis-server's options (--requirepass).
func startRedis(t *testing.T, args ...string) (addr string, stop func()) {
	t.Helper()
	bin := need.Command(t, "redis-server", "apt-get install redis-server")
	port := strconv.Itoa(freePort(t))
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	t.Cleanup(stop)
	addr = "127.0.0.1:" + port
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			fmt.Fprint(c, "PING\r\n")
			buf := make([]byte, 7)
			n, _ := io.ReadFull(c, buf)
			c.Close()
			if r := string(buf[:n]); r == "+PONG\r\n" || r == "-NOAUTH" {
				return addr, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
