package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestP14CheckNamesTheDecidingEntry: check shows the deny or ask entry that
// decided, with its position, and an ask as such.
func TestP14CheckNamesTheDecidingEntry(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: mode: "off"}
agent: "allowed-tools": ["Bash(git:*)"]
agent: "ask-tools": ["Bash(git push:*)"]
skills: safe: "denied-tools": ["Bash(git push:*)"]
`)
	for _, tc := range []struct {
		note, surface, command string
		ask                    bool
		at                     string
	}{
		{"an ask", "agent", "git push", true, "policy.cue:7:22"},
		{"a child's deny beats its caller's ask", "skill:safe", "git push", false, "policy.cue:8:32"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			call := fmt.Sprintf(`{"type":"tool_use","id":"1","name":"Bash","input":{"command":%q}}`, tc.command)
			out, _ := exec.Command(gatewayBinary(t), "check", "--policy", dir, "--surface", tc.surface, call).Output()
			var d struct {
				Allowed bool     `json:"allowed"`
				Ask     bool     `json:"ask"`
				Rule    string   `json:"rule"`
				Entries []string `json:"entries"`
				At      []string `json:"entry_at"`
			}
			if err := json.Unmarshal(out, &d); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if d.Allowed || d.Ask != tc.ask || d.Rule != "P14" || len(d.At) != 1 || !strings.HasSuffix(d.At[0], tc.at) {
				t.Errorf("check = %s, want ask=%v by P14 at %s", out, tc.ask, tc.at)
			}
		})
	}
}
