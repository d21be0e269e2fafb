package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestR8GlobBraceBombIsRefusedAndServeAnswers: a Glob whose braces
// expand to millions of patterns ({a,b,c} eighteen times, valid and
// allowed) is refused with a sentence before any walk, and the session
// answers the call after it (probe P7: no answer after 120 s, and the
// next line none either); a pattern of a few alternatives still finds
// its files.
func TestR8GlobBraceBombIsRefusedAndServeAnswers(t *testing.T) {
	t.Parallel()
	wd, _ := filepath.EvalSymlinks(t.TempDir())
	writeFile(t, filepath.Join(wd, "a", "x.ts"), "x\n")
	writeFile(t, filepath.Join(wd, "note"), "the note\n")
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Glob: schema.#Glob}
agent: "allowed-tools": ["Read", "Glob"]
`)
	glob := func(id, pattern string) string {
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "Glob", "input": map[string]any{"pattern": pattern, "path": wd}})
		return string(b)
	}
	lines := []string{
		glob("bomb", strings.Repeat("{a,b,c}", 18)),
		toolLine("read", "Read", map[string]any{"file_path": filepath.Join(wd, "note")}),
		glob("few", "{a,b}/*.{ts,tsx}"),
	}
	// A guard, not a measure: without the bound the walk runs for hours.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gatewayBinary(t), "serve", "--policy", dir, "--workdir", wd, "--cache", "off")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("serve did not answer the session within three minutes: %s", out)
	}
	if err != nil {
		t.Fatalf("serve: %v\n%s", err, out)
	}
	got := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("reply %q: %v", l, err)
		}
		got[m["tool_use_id"].(string)] = m
	}
	if r := got["bomb"]; r == nil || r["is_error"] != true || !strings.Contains(text(r), "expansions of its {a,b} alternatives") {
		t.Errorf("a Glob of {a,b,c}x18 must be refused with the sentence: %v", r)
	}
	if r := got["read"]; r == nil || r["is_error"] != false || !strings.Contains(text(r), "the note") {
		t.Errorf("the session must answer the call after it: %v", r)
	}
	if r := got["few"]; r == nil || r["is_error"] != false || !strings.Contains(text(r), filepath.Join(wd, "a", "x.ts")) {
		t.Errorf("a pattern of a few alternatives must still find its files: %v", r)
	}
}
