package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/need"
)

// TestDecisionLogIsLossless: a stream of parallel batches through serve
// leaves exactly one decision per call, each whole, and a result after it
// for each call that ran (rule R10), and nothing on stdout but replies
// (issue 18).
func TestDecisionLogIsLossless(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo", "Glob"]
parallel: {enabled: true, maxConcurrency: 8}
`)
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
	var lines []string
	calls := 0
	for i := range 100 {
		var blocks []string
		for j := range 6 {
			blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"c%d_%d","name":"Echo","input":{"message":"m"}}`, i, j))
			calls++
		}
		lines = append(lines, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`)
	}
	lines = append(lines, `{"type":"tool_use","id":"refused","name":"Bash","input":{"command":"x"}}`)
	calls++
	replies := runServe(t, []string{"--policy", dir, "--workdir", dir, "--decision-log", logFile}, nil, lines...)
	if len(replies) != len(lines) {
		t.Fatalf("%d replies", len(replies))
	}
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	decided, ran := map[string]bool{}, map[string]bool{}
	for n := 0; sc.Scan(); n++ {
		var r struct {
			Phase       string   `json:"phase"`
			CallID      string   `json:"call_id"`
			Allowed     bool     `json:"allowed"`
			Revision    string   `json:"revision"`
			Generation  int64    `json:"generation"`
			Surface     []string `json:"surface"`
			ResultError *bool    `json:"result_error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %d is not whole: %v: %s", n, err, sc.Bytes())
		}
		if r.Revision == "" || r.Generation != 1 || len(r.Surface) == 0 {
			t.Fatalf("record %s", sc.Bytes())
		}
		switch {
		case r.Phase == "result" && r.ResultError != nil && decided[r.CallID] && !ran[r.CallID]:
			ran[r.CallID] = true
		case r.Phase == "running" && r.Allowed && !decided[r.CallID], r.Phase == "decided" && !r.Allowed && !decided[r.CallID]:
			decided[r.CallID] = true
		default:
			t.Fatalf("record %d out of place (a decision is recorded once, before its result): %s", n, sc.Bytes())
		}
	}
	if len(decided) != calls || len(ran) != calls-1 {
		t.Errorf("%d calls decided and %d results, want %d and %d", len(decided), len(ran), calls, calls-1)
	}
}

// TestDecisionLogFailsClosed: a log that cannot be written stops the
// gateway allowing calls, with a sentence on standard error.
func TestDecisionLogFailsClosed(t *testing.T) {
	t.Parallel()
	need.File(t, "the device that is always full", "/dev/full", "a Linux system has it (mknod -m 666 /dev/full c 1 7)")
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo"]`+"\n")
	cmd := exec.Command(gatewayBinary(t), "serve", "--policy", dir, "--workdir", dir, "--decision-log", "/dev/full")
	cmd.Stdin = strings.NewReader(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"first"}}
{"type":"tool_use","id":"2","name":"Echo","input":{"message":"second"}}
`)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if !strings.Contains(stderr.String(), "decision log cannot be written") {
		t.Errorf("stderr: %s", stderr.String())
	}
	if strings.Contains(string(out), `"content":"second"`) || !strings.Contains(string(out), "allows no call") {
		t.Errorf("a call ran with the decision log down:\n%s", out)
	}
}
