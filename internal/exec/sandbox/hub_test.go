package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

// denyTouch judges as a call whose entry Bash(touch:*) denies touch.
func denyTouch() *tools.ExecJudge {
	return &tools.ExecJudge{Names: []string{"touch"}, Decide: func(w []string) (string, bool) {
		if w[0] == "touch" {
			return "touch is denied by Bash(touch:*)", false
		}
		return "", false
	}}
}

// TestP16SandboxesAreJudgedSideBySide: while one judged sandbox waits
// (its processes stopping nowhere, so the gateway's tracing thread waits
// in the kernel for it), another is traced and judged all the same: its
// denied touch does not run, its allowed echo does; then the first ends.
func TestP16SandboxesAreJudgedSideBySide(t *testing.T) {
	need(t)
	dir := t.TempDir()
	deny := denyTouch
	first, err := Command(&tools.Sandbox{Writable: []string{dir}, Exec: deny()}, dir, []string{"sh", "-c", "echo waiting; read line; echo first-ended"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := first.StdinPipe()
	out, _ := first.StdoutPipe()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	Release(first)
	line := make([]byte, 8)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "waiting\n" {
		t.Fatalf("the first sandbox did not start: %q %v", line, err)
	}
	done := make(chan string, 1)
	go func() {
		cmd, err := Command(&tools.Sandbox{Writable: []string{dir}, Exec: deny()}, dir, []string{"sh", "-c", "echo second-ran; touch made"}, nil, nil)
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := cmd.CombinedOutput()
		Release(cmd)
		Finish(cmd)
		done <- string(b)
	}()
	var second string
	select {
	case second = <-done:
	case <-time.After(2 * time.Minute): // a bound, not a measure: the second never attached
		t.Fatal("the second sandbox was not traced while the first waited")
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err == nil || !strings.Contains(second, "second-ran") || !strings.Contains(second, "Bash(touch:*)") {
		t.Errorf("the second sandbox's denied touch ran, or its echo did not (%v):\n%s", err, second)
	}
	in.Write([]byte("go\n"))
	in.Close()
	rest, _ := io.ReadAll(out)
	first.Wait()
	Finish(first)
	if !strings.Contains(string(rest), "first-ended") {
		t.Errorf("the first sandbox did not end as it should: %q", rest)
	}
}
