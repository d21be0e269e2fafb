package policy

import (
	"strings"
	"testing"
	"time"
)

const limitsTools = `
tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: "allowed-tools": ["Read", "Bash(git push:*)", "Bash(ls:*)"]
subagents: reviewer: {}
principals: contractors: {group: "contractors", surface: ["agent"]}
`

// TestP19LimitsCompile: a limit's selectors and bounds are read as
// written, the burst defaulting to the rate's count, a principal's claims
// standing for who, in CUE and in YAML alike.
func TestP19LimitsCompile(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + limitsTools + `
limits: {
	"contractors-bash": {who: {group: "contractors"}, tool: "Bash", rate: "30/min", burst: 10, quota: "2000/day"}
	push: {who: principal: "contractors", entry: "Bash(git push:*)", rate: "5/10s"}
	reviewer: {surface: "subagent:reviewer", quota: "100/h"}
}
`}))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Limits) != 3 {
		t.Fatalf("got %d limits, want 3", len(g.Limits))
	}
	cb, push, rev := g.Limits[0], g.Limits[1], g.Limits[2]
	if cb.Name != "contractors-bash" || cb.Group != "contractors" || cb.Tool != "Bash" || cb.Rate != 30 || cb.Per != time.Minute || cb.Burst != 10 || cb.Quota != 2000 || cb.Window != 24*time.Hour {
		t.Errorf("contractors-bash compiled as %+v", cb)
	}
	if cb.Interval() != 2*time.Second || !cb.Pos.IsValid() {
		t.Errorf("contractors-bash: interval %v, position %v", cb.Interval(), cb.Pos)
	}
	if push.Group != "contractors" || push.Burst != 5 || push.Per != 10*time.Second {
		t.Errorf("push compiled as %+v, want the principal's group and the rate's count as burst", push)
	}
	staff := Claims{Subject: "bob", Groups: []string{"contractors"}}
	if !push.Selects(&staff, []string{"agent"}, "Bash", []string{"Bash(git push:*)"}) || push.Selects(&staff, []string{"agent"}, "Bash", []string{"Bash(ls:*)"}) {
		t.Error("push does not select by its entry")
	}
	if cb.Selects(&Claims{Subject: "bob"}, []string{"agent"}, "Bash", nil) {
		t.Error("contractors-bash selects a caller outside its group")
	}
	if !rev.Selects(&Claims{}, []string{"agent", "subagent:reviewer"}, "Read", nil) || rev.Selects(&Claims{}, []string{"agent"}, "Read", nil) {
		t.Error("reviewer does not select by its surface")
	}
	y, err := Load(writePolicy(t, map[string]string{"policy.yaml": `
tools: {Bash: {builtin: Bash}}
agent: {allowed-tools: [Bash]}
limits:
  bash: {tool: Bash, rate: 2/s, burst: 3}
`}))
	if err != nil {
		t.Fatal(err)
	}
	if len(y.Limits) != 1 || y.Limits[0].Rate != 2 || y.Limits[0].Burst != 3 || y.Limits[0].Per != time.Second {
		t.Fatalf("the YAML limit compiled as %+v", y.Limits)
	}
}

// TestP19LimitsBadInput: each bad limit is an error, with a sentence at
// the place it is written.
func TestP19LimitsBadInput(t *testing.T) {
	tests := []struct {
		note, limit, want string
	}{
		{"a rate that is no count per period", `rate: "thirty"`, `the rate "thirty" is not a count per period`},
		{"a rate of zero", `rate: "0/min"`, "at least 1"},
		{"an unknown period", `rate: "3/fortnight"`, `names the period "fortnight"`},
		{"a quota window under a second", `quota: "3/10ms"`, "shorter than a second"},
		{"a rate too fast to count", `rate: "2000000/s"`, "more than one call a microsecond"},
		{"a burst under 1", `rate: "3/s", burst: 0`, "the burst is 0"},
		{"a burst without a rate", `quota: "3/day", burst: 2`, "a burst is given without a rate"},
		{"no bound", `tool: "Read"`, "neither a rate nor a quota"},
		{"an unknown tool", `tool: "Bsh", rate: "1/s"`, "the tool Bsh is not one the policy declares (did you mean Bash?)"},
		{"an unknown surface", `surface: "subagent:nobody", rate: "1/s"`, "the surface subagent:nobody is not declared"},
		{"an unknown principal", `who: principal: "nobody", rate: "1/s"`, `the principal "nobody", which the policy does not declare`},
		{"an entry no list allows", `entry: "Bash(rm:*)", rate: "1/s"`, "in no surface's allowed-tools"},
		{"an entry of another tool", `tool: "Read", entry: "Bash(ls:*)", rate: "1/s"`, "not of the limit's tool Read"},
		{"a misspelt key", `rat: "1/s"`, "limits.x.rat: field not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			src := header + limitsTools + "limits: x: {\n\t" + tc.limit + "\n}\n"
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": src}))
			if err == nil {
				t.Fatal("the policy loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("got %q, want %q", msg, tc.want)
			}
			// The place: the limit's lines (10 and 11, after the header
			// and the tools), with a column.
			if !strings.Contains(msg, "policy.cue:11:") && !strings.Contains(msg, "policy.cue:10:") {
				t.Fatalf("the error is not placed at file:line:col: %q", msg)
			}
		})
	}
}
