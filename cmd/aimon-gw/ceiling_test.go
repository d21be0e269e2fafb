package main

import (
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestR5SurfaceIsACeiling: through the binary, a line's own chain may only
// extend the process chain; going back to the agent, an empty chain, and a
// chain over the bounds are refused for the line, naming both chains.
func TestR5SurfaceIsACeiling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Glob: schema.#Glob}
agent: "allowed-tools": ["Echo", "Glob"]
subagents: reviewer: "allowed-tools": ["Glob"]
skills: lint: "allowed-tools": ["Glob"]
`})
	echo := func(surface string) string {
		return `{"type":"tool_use","id":"e","name":"Echo","input":{"message":"ran"},"surface":` + surface + `}`
	}
	deep := `["agent"` + strings.Repeat(`,"skill:lint"`, 20) + `]`
	replies := runServe(t, []string{"--policy", dir, "--surface", "agent,subagent:reviewer", "--workdir", dir}, nil,
		echo(`["agent"]`), echo(`[]`), echo(`["subagent:reviewer","skill:lint"]`), echo(deep),
		`{"type":"list_tools","surface":["agent"]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Echo","input":{"message":"x"}},{"type":"tool_use","id":"b","name":"Glob","input":{"pattern":"*"}}],"surface":["agent"]}`)
	for i, want := range []string{"does not begin with this gateway's chain [agent, subagent:reviewer]", "does not begin", "Echo is not allowed", "at most 16 references"} {
		r := replies[i]
		if r["is_error"] != true || !strings.Contains(text(r), want) || strings.Contains(text(r), "ran") {
			t.Errorf("line %d: %v; want a refusal saying %q", i, r, want)
		}
	}
	if e, _ := replies[4]["error"].(map[string]any); e == nil || !strings.Contains(e["message"].(string), "does not begin") {
		t.Errorf("list_tools on a wider chain: %v", replies[4])
	}
	content, _ := replies[5]["content"].([]any)
	for _, c := range content {
		if r := c.(map[string]any); r["is_error"] != true {
			t.Errorf("a call of a batch on a wider chain ran: %v", r)
		}
	}
	if len(content) != 2 {
		t.Errorf("batch reply %v", replies[5])
	}
}
