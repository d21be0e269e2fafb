package policytest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP10PolicyTestsNameTheirCaller: a case may name its caller instead of
// a surface; it runs on the chain the principals map the caller to, a
// surface it gives must extend that chain, and a caller no principal maps
// is refused (P10).
func TestP10PolicyTestsNameTheirCaller(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"cue.mod/module.cue": policydir.Module,
		"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read}
agent: "allowed-tools": ["Echo", "Read"]
subagents: reviewer: "allowed-tools": ["Read"]
skills: lint: {}
principals: {
	alice: {subject: "alice", surface: ["agent"]}
	docs:  {group: "docs", surface: ["agent", "subagent:reviewer"]}
}
tests: {
	"alice echoes":            {principal: subject: "alice", tool: "Echo", input: message: "x", allowed: true}
	"docs may not echo":       {principal: {subject: "rita", groups: ["docs"]}, tool: "Echo", input: message: "x", allowed: false, rule: "P9"}
	"docs read, deeper":       {principal: groups: ["docs"], surface: ["agent", "subagent:reviewer", "skill:lint"], tool: "Read", input: file_path: "/x", allowed: true}
	"eve is refused":          {principal: subject: "eve", tool: "Echo", input: message: "x", allowed: false, rule: "P10", reason: "no entry of the policy's principals matches"}
	"a surface above the caller": {principal: groups: ["docs"], surface: ["agent"], tool: "Read", input: file_path: "/x", allowed: false, rule: "R5", reason: "does not begin with its principal's chain"}
	"wrong: eve echoes":       {principal: subject: "eve", tool: "Echo", input: message: "x", allowed: true}
}
`,
	} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	results, err := Run(context.Background(), dir, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 6 {
		t.Fatalf("%d results, want 6", len(results))
	}
	for _, r := range results {
		if wrong := strings.HasPrefix(r.Test.Name, "wrong:"); (r.Failure != "") != wrong {
			t.Errorf("%s: failure %q (got %s %s)", r.Test.Name, r.Failure, r.Got.Rule, r.Got.Reason)
		}
	}
}
