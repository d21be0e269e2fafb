package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestS1ExportedDefinitionsSayWhatThePolicyEnforces: an MCP client reads
// the Bash timeout bound the policy enforces (not the built-in's clamp),
// and Write, which overwrites, is not idempotent (issue 33).
func TestS1ExportedDefinitionsSayWhatThePolicyEnforces(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {
	Bash:  schema.#Bash & {input: timeout?: <=300000, sandbox: mode: "off"}
	Write: schema.#Write
	Read:  schema.#Read
}
`)
	s := mcpClient(t, mcpParams{Surface: "agent", Policy: dir, Workdir: dir})
	byName := toolsByName(t, s)
	for _, tc := range []struct {
		note, tool string
		idempotent bool
	}{
		{"Write overwrites: a repeated call is not without effect", "Write", false},
		{"Read is", "Read", true},
		{"Bash is not", "Bash", false},
	} {
		if a := byName[tc.tool].Annotations; a == nil || a.IdempotentHint != tc.idempotent {
			t.Errorf("%s: annotations %+v, want idempotentHint %v", tc.note, a, tc.idempotent)
		}
	}
	b, _ := json.Marshal(byName["Bash"].InputSchema)
	var in struct {
		Properties map[string]struct {
			Description string
			Maximum     int
		}
	}
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	timeout := in.Properties["timeout"]
	if timeout.Maximum != 300000 || !strings.Contains(timeout.Description, "at most 300000") || strings.Contains(timeout.Description, "600000") {
		t.Errorf("Bash timeout: %+v; want the policy's bound, 300000, in the schema and its description", timeout)
	}
}
