package policytest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP14PolicyTestsWantAsk: a policy test may want a call that needs
// approval (ask: true); a call that is allowed or refused instead fails it,
// as an ask fails a test that wants allowed.
func TestP14PolicyTestsWantAsk(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cue.mod/module.cue", policydir.Module)
	write("policy.cue", `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
agent: {"allowed-tools": ["Bash(git:*)"], "ask-tools": ["Bash(git push:*)"], "denied-tools": ["Bash(git reset:*)"]}
tests: {
	"push asks":        {tool: "Bash", input: command: "git push", allowed: false, ask: true, rule: "P14"}
	"log runs":         {tool: "Bash", input: command: "git log", allowed: true}
	"reset is denied":  {tool: "Bash", input: command: "git reset --hard", allowed: false, rule: "P14", reason: "denied on this surface by"}
	"wrong: log asks":  {tool: "Bash", input: command: "git log", allowed: false, ask: true}
	"wrong: push runs": {tool: "Bash", input: command: "git push", allowed: true}
	"wrong: reset asks": {tool: "Bash", input: command: "git reset", allowed: false, ask: true}
}
`)
	results, err := Run(context.Background(), dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 6 {
		t.Fatalf("%d results, want 6", len(results))
	}
	for _, r := range results {
		wrong := strings.HasPrefix(r.Test.Name, "wrong:")
		if (r.Failure != "") != wrong {
			t.Errorf("%s: failure %q", r.Test.Name, r.Failure)
		}
		if wrong && !strings.Contains(r.Failure, "approval") {
			t.Errorf("%s: the failure %q does not name the outcome that needs approval", r.Test.Name, r.Failure)
		}
	}
}

// Run runs the tests of the policy in dir whose names match run (nil: all).
// A policy that does not load is the error.
func Run(ctx context.Context, dir string, run *regexp.Regexp, timeout time.Duration) ([]Result, error) {
	return RunAs(ctx, dir, run, timeout, nil)
}
