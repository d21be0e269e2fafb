package gateway

import (
	"strings"
	"testing"
)

// TestP13SideEffectCeilings: a tool above the ceiling of any surface in
// the chain is neither listed nor allowed, whatever the lists say; the
// ceiling of a chain is the lowest along it.
func TestP13SideEffectCeilings(t *testing.T) {
	g, _ := newGateway(t, allBuiltins+`
agent: "allowed-tools": ["Read", "Write", "Bash", "Echo", "Glob"]
subagents: reviewer: {"max-effect": "read", "allowed-tools": ["Read", "Write", "Bash", "Echo"]}
subagents: writer: "max-effect": "write"
skills: lint: "allowed-tools": ["Read", "Write", "Bash", "Echo", "Glob"]
commands: quiet: "max-effect": "none"
`, nil)
	tests := []struct {
		note    string
		chain   []string
		tool    string
		input   string
		allowed bool
		listed  string
	}{
		{"no ceiling", []string{"agent"}, "Bash", `{"command":"true"}`, true, "Bash,Echo,Glob,Read,Write"},
		{"read ceiling refuses write", []string{"agent", "subagent:reviewer"}, "Write", `{"file_path":"x","content":"y"}`, false, "Echo,Read"},
		{"read ceiling refuses destructive", []string{"agent", "subagent:reviewer"}, "Bash", `{"command":"true"}`, false, "Echo,Read"},
		{"read ceiling keeps read", []string{"agent", "subagent:reviewer"}, "Echo", `{"message":"m"}`, true, "Echo,Read"},
		{"a child without a ceiling inherits the middle one", []string{"agent", "subagent:reviewer", "skill:lint"}, "Write", `{"file_path":"x","content":"y"}`, false, "Echo,Read"},
		{"three levels, the middle sets it", []string{"agent", "subagent:writer", "skill:lint"}, "Bash", `{"command":"true"}`, false, "Echo,Glob,Read,Write"},
		{"three levels, within the middle one", []string{"agent", "subagent:writer", "skill:lint"}, "Glob", `{"pattern":"*"}`, true, "Echo,Glob,Read,Write"},
		{"the lowest wins", []string{"agent", "subagent:writer", "command:quiet"}, "Read", `{"file_path":"x"}`, false, "Echo"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			d := g.Check(tc.chain, "1", tc.tool, []byte(tc.input))
			if tc.allowed != (d.Rule != "P13") {
				t.Errorf("%s on %v: %+v; want allowed by the ceiling %v", tc.tool, tc.chain, d, tc.allowed)
			}
			if !tc.allowed && (!strings.Contains(d.Reason, "above the ceiling") || d.Ceiling == "") {
				t.Errorf("refusal %q (ceiling %q) does not name the ceiling", d.Reason, d.Ceiling)
			}
			defs, err := g.Tools(tc.chain)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range defs {
				names = append(names, d.Name)
			}
			if got := strings.Join(names, ","); got != tc.listed {
				t.Errorf("listed %s, want %s", got, tc.listed)
			}
		})
	}
}
