package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/policydir"
)

func moduleDir(t *testing.T, policy string) string {
	return policydir.Write(t, map[string]string{"policy.cue": policy})
}

// TestR5HalfWrittenPolicyIsNeverInForce: a writer that pauses mid-write for
// longer than the debounce, with a prefix that would be a sound policy
// with no agent list (unlimited, rule P11), never gets that prefix in
// force; the whole file goes in force once it is closed.
func TestR5HalfWrittenPolicyIsNeverInForce(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Glob"]`+"\n")
	s := startServe(t, dir)
	s.send(`{"type":"status"}`)
	f, err := os.OpenFile(filepath.Join(dir, "policy.cue"), os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, reloadHeader) // a prefix that is a policy of its own, with no list
	f.Sync()
	echo := `{"type":"tool_use","id":"e","name":"Echo","input":{"message":"x"}}`
	for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); {
		if r := s.send(echo); r["is_error"] != true {
			t.Fatalf("the half-written prefix was in force: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprint(f, `agent: "allowed-tools": ["Glob", "Echo"]`+"\n")
	f.Close()
	// At least 2: a reload deferred while the file was open may run again
	// after the one its close set off, and a reload of files as in force
	// is a generation too (it provisions them again).
	s.waitStatus(func(m map[string]any) bool { g, _ := m["generation"].(float64); return g >= 2 })
	if r := s.send(echo); r["is_error"] != false {
		t.Errorf("the whole policy is not in force: %v", r)
	}
}

// TestR5NonRegularFilesAreErrors: a FIFO named like a policy file is an
// error with its path, for vet and for a reload, and never a hang; once it
// is gone, the next edit loads.
func TestR5NonRegularFilesAreErrors(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader)
	fifo := filepath.Join(dir, "zz.cue")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary(t), "vet", dir)
	done := make(chan []byte, 1)
	go func() { out, _ := cmd.Output(); done <- out }()
	select {
	case out := <-done:
		if !strings.Contains(string(out), "zz.cue is a named pipe (FIFO)") || cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("vet with a FIFO: exit %d, %s", cmd.ProcessState.ExitCode(), out)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("vet hangs on a FIFO in the policy directory")
	}

	os.Remove(fifo)
	s := startServe(t, dir)
	s.send(`{"type":"status"}`) // in force before the FIFO comes
	syscall.Mkfifo(fifo, 0o644)
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+"// edited\n")
	st := s.waitStatus(func(m map[string]any) bool { return m["last_error"] != nil })
	if !strings.Contains(st["last_error"].(string), "named pipe") {
		t.Errorf("status = %v", st)
	}
	os.Remove(fifo)
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+"// edited again\n")
	s.waitStatus(func(m map[string]any) bool { return m["generation"] == 2.0 && m["last_error"] == nil })
}

const slowPolicy = "package policy\n\nimport (\n\t\"list\"\n\t\"aimon.dev/gw/schema\"\n)\n\ntools: {Echo: schema.#Echo, Glob: schema.#Glob}\nslow: [for i in list.Range(0, 300000, 1) {i}]\n"

// TestR5SlowLoadIsRejected: a policy that takes longer than --load-timeout
// to load is rejected with a sentence by vet, and by a reload, after which
// the newest edit loads without waiting behind it.
func TestR5SlowLoadIsRejected(t *testing.T) {
	t.Parallel()
	slow := moduleDir(t, slowPolicy)
	bin := gatewayBinary(t)
	start := time.Now()
	out, err := exec.Command(bin, "vet", "--load-timeout", "500ms", slow).Output()
	if err == nil || !strings.Contains(string(out), "did not load within 500ms") {
		t.Errorf("vet of a slow policy: %v %s", err, out)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("vet took %s past its load timeout", d)
	}

	// A reload: rejected at the timeout; the next edit does not wait behind
	// it. Through the binary: CUE cannot be interrupted, so the slow load
	// runs on after its rejection until its process ends, which in this
	// test process would be the end of all the package's tests.
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo", "Glob"]`+"\n")
	s, _ := serveBinary(t, nil, "--policy", dir, "--workdir", t.TempDir(), "--load-timeout", "3s")
	s.send(`{"type":"status"}`)
	writeFile(t, filepath.Join(dir, "policy.cue"), slowPolicy)
	st := s.waitStatus(func(m map[string]any) bool { return m["last_error"] != nil })
	if !strings.Contains(st["last_error"].(string), "did not load within 3s") {
		t.Errorf("status after a slow edit: %v", st)
	}
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+`agent: "allowed-tools": ["Glob"]`+"\n")
	s.waitStatus(func(m map[string]any) bool { return m["generation"] == 2.0 })
	if r := s.send(`{"type":"tool_use","id":"e","name":"Echo","input":{"message":"x"}}`); r["is_error"] != true {
		t.Errorf("the revoking edit is not in force: %v", r)
	}
}

// TestR4PluginTimeoutIsAPolicySetting: a hung plugin call fails at the
// tool's own timeout, and the next line is answered.
func TestR4PluginTimeoutIsAPolicySetting(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, fmt.Sprintf(`package policy

tools: Hang: {plugin: command: [%q], timeout: "300ms"}
tools: Context: plugin: command: [%q]
`, misbehave(t), misbehave(t)))
	start := time.Now()
	replies := runServe(t, []string{"--policy", dir, "--workdir", dir}, nil,
		`{"type":"tool_use","id":"h","name":"Hang","input":{}}`,
		`{"type":"tool_use","id":"c","name":"Context","input":{}}`)
	if r := replies[0]; r["is_error"] != true || !strings.Contains(text(r), "did not finish within 300ms") {
		t.Errorf("hung call: %v", r)
	}
	if r := replies[1]; r["is_error"] != false {
		t.Errorf("the next line: %v", r)
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the lines took %s", d)
	}
}

// TestR3MarkdownEditsReload: serve follows a surface's markdown file; a
// malformed front matter keeps the last good policy (issue 20).
func TestR3MarkdownEditsReload(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "policy")
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": reloadHeader + `agent: "allowed-tools": ["Echo", "Glob"]
surfaces: from: ["../.claude"]
`})
	md := filepath.Join(root, ".claude", "agents", "helper.md")
	writeFile(t, md, "---\ntools: Echo\n---\n")
	s := startServe(t, dir)
	echo := `{"type":"tool_use","id":"e","name":"Echo","input":{"message":"x"},"surface":["agent","subagent:helper"]}`
	if r := s.send(echo); r["is_error"] != false {
		t.Fatalf("Echo on the helper: %v", r)
	}
	writeFile(t, md, "---\ntools: Glob\n---\n")
	s.waitStatus(func(m map[string]any) bool { return m["generation"] == 2.0 })
	if r := s.send(echo); r["is_error"] != true {
		t.Errorf("the markdown edit took Echo away, yet: %v", r)
	}
	writeFile(t, md, "---\ntools: [Glob\n---\n")
	st := s.waitStatus(func(m map[string]any) bool { return m["last_error"] != nil })
	if st["generation"] != 2.0 || !strings.Contains(st["last_error"].(string), "helper.md") {
		t.Errorf("a malformed front matter: %v", st)
	}
}
