package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/gateway"
)

// BenchmarkHookCached is one Claude Code hook decision of an allowed Bash
// call on examples/policies/team, answered from its verified record, in
// process: what the hook does beyond the binary's start-up, warm (a
// process pays its first use of each type and page on top; bench/hook.sh
// measures whole processes).
func BenchmarkHookCached(b *testing.B) {
	policyDir, _ := filepath.Abs("../../examples/policies/team")
	cache, cwd := filepath.Join(b.TempDir(), "cache"), b.TempDir()
	input := `{"session_id":"s","cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"},"tool_use_id":"t"}`
	b.Setenv("XDG_STATE_HOME", b.TempDir())
	run := func() {
		var out bytes.Buffer
		if err := hook(b.Context(), hookParams{HookConfig: gateway.HookConfig{Runtime: "claude-code", Policy: policyDir, Cache: cache, Logger: discard}, Stdin: strings.NewReader(input), Stdout: &out}); err != nil || !bytes.Contains(out.Bytes(), []byte(`"allow"`)) {
			b.Fatalf("%v %s", err, out.Bytes())
		}
	}
	run() // writes the record
	if _, err := os.Stat(cache); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		run()
	}
}
