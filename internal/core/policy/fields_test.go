package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

// TestC1LeftOutFieldsTakeTheirDefaults: the schema has no defaults (issue
// 32); what a policy leaves out means what the schema's comments say, and
// what it writes is kept, the default's value written out included.
func TestC1LeftOutFieldsTakeTheirDefaults(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {
	P: plugin: command: ["p"]
	Q: {plugin: command: ["q"], effect: "read", idempotent: true, openWorld: false, concurrency: "sequential", interrupt: "cooperative", description: "q"}
	W: schema.#Write
	E: schema.#Edit
	S: schema.#Write & {maxFileBytes: 10}
	B: schema.#Bash
	N: schema.#Bash & {sandbox: {mode: "off", network: true}}
	H: schema.#Bash & {sandbox: network: allow: ["api.github.com"]}
	R: schema.#Read
}
subagents: helper: {}
principals: bot: {subject: "bot", surface: ["agent", "subagent:helper"]}
tests: {
	plain: {tool: "R", input: file_path: "/a", allowed: true}
	chain: {tool: "R", input: file_path: "/a", allowed: true, principal: subject: "bot"}
	named: {tool: "R", input: file_path: "/a", allowed: true, ask: true, surface: ["agent"], principal: subject: "bot"}
}
`}))
	if err != nil {
		t.Fatal(err)
	}
	p, q := g.Tools["P"], g.Tools["Q"]
	tests := map[string]Test{}
	for _, tc := range g.Tests {
		tests[tc.Name] = tc
	}
	for _, tc := range []struct {
		note      string
		got, want any
	}{
		{"P13 effect: destructive", p.Effect, "destructive"},
		{"P13 effect written", q.Effect, "read"},
		{"C1 idempotent: false", p.Idempotent, false},
		{"C1 idempotent written", q.Idempotent, true},
		{"C1 openWorld: true", p.OpenWorld, true},
		{"C1 openWorld written", q.OpenWorld, false},
		{"K2 concurrency: sequential", p.Concurrency, "sequential"},
		{"K1 interrupt: non_interruptible", p.Interrupt, "non_interruptible"},
		{"K1 interrupt written", q.Interrupt, "cooperative"},
		{"C1 description: empty", p.Description, ""},
		{"C1 description written", q.Description, "q"},
		{"S9 validation: the policy's", p.Validation, rule.Warn},
		{"C6 maxFileBytes of Write: 16 MiB", g.Tools["W"].MaxFileBytes, int64(16777216)},
		{"C6 maxFileBytes of Edit: 16 MiB", g.Tools["E"].MaxFileBytes, int64(16777216)},
		{"C6 maxFileBytes narrowed", g.Tools["S"].MaxFileBytes, int64(10)},
		{"C6 maxFileBytes of another tool: none", g.Tools["R"].MaxFileBytes, int64(0)},
		{"C6 maxFileBytes of a plugin: none", p.MaxFileBytes, int64(0)},
		{"R6 sandbox of Bash: required, no network", *g.Tools["B"].Sandbox, SandboxSpec{}},
		{"R6 sandbox written", *g.Tools["N"].Sandbox, SandboxSpec{Off: true, Network: true}},
		{"R8 sandbox network allow", *g.Tools["H"].Sandbox, SandboxSpec{Hosts: []string{"api.github.com"}}},
		{"R6 no sandbox for Read", g.Tools["R"].Sandbox, (*SandboxSpec)(nil)},
		{"P8 test surface: the agent", tests["plain"].Surface, []string{"agent"}},
		{"P14 test ask: false", tests["plain"].Ask, false},
		{"P14 test ask written", tests["named"].Ask, true},
		{"P10 test surface: the principal's chain", tests["chain"].Surface, []string(nil)},
		{"P10 test surface written beside a principal", tests["named"].Surface, []string{"agent"}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.note, tc.got, tc.want)
		}
	}
}

// TestC1BadFieldValuesAreReportedAtTheValue: a value a field does not take
// is an error at the value's file:line:col, under the field's rule, with a
// sentence that says the value, the values allowed and what to write.
func TestC1BadFieldValuesAreReportedAtTheValue(t *testing.T) {
	for _, tc := range []struct {
		note string
		code rule.ID
		tool string // the value of tools: T, at line 5
		more string // more of the policy, from line 6
		want string
	}{
		{note: "P13 effect", code: rule.P13, tool: `{plugin: command: ["p"], effect: "writ"}`,
			want: `policy.cue:5:44: tool T: effect must be "none", "read", "write" or "destructive", not "writ"; write one of them (did you mean "write"?), or leave it out for "destructive".`},
		{note: "P13 effect not concrete", code: rule.P13, tool: `{plugin: command: ["p"], effect: string}`,
			want: `policy.cue:5:44: tool T: effect must be "none", "read", "write" or "destructive", not string; write one of them, or leave it out for "destructive".`},
		{note: "P13 effect of another type", code: rule.CUE, tool: `{plugin: command: ["p"], effect: 3}`,
			want: `policy.cue:5:44: tools.T.effect: conflicting values 3 and string`},
		{note: "K2 concurrency", code: rule.K2, tool: `{plugin: command: ["p"], concurrency: "parallel"}`,
			want: `policy.cue:5:49: tool T: concurrency must be "sequential" or "concurrent_safe", not "parallel"; write one of them, or leave it out for "sequential".`},
		{note: "K1 interrupt", code: rule.K1, tool: `{plugin: command: ["p"], interrupt: "Cooperative"}`,
			want: `policy.cue:5:47: tool T: interrupt must be "non_interruptible", "cooperative", "thread_interrupt" or "externally_terminated", not "Cooperative"; write one of them (did you mean "cooperative"?), or leave it out for "non_interruptible".`},
		{note: "P17 reads", code: rule.P17, tool: `{plugin: command: ["p"], reads: "files"}`,
			want: `policy.cue:5:43: tool T: reads must be "file" or "tree", not "files"; write one of them (did you mean "file"?).`},
		{note: "S9 validation", code: rule.S9, tool: `schema.#Echo & {validation: "strict"}`,
			want: `policy.cue:5:39: tool T: validation must be "off", "warn" or "enforce", not "strict"; write one of them.`},
		{note: "P2 subject kind", code: rule.P2, tool: `schema.#Echo & {subject: {field: "message", kind: "file"}}`,
			want: `policy.cue:5:61: tool T: subject.kind must be "command", "path" or "domain", not "file"; write one of them.`},
		{note: "C1 builtin", code: rule.C1, tool: `{builtin: "Bsh", input: {}}`,
			want: `policy.cue:5:21: tool T: builtin must be "Read", "Write", "Edit", "Bash", "Grep", "Glob" or "Echo", not "Bsh"; write one of them (did you mean "Bash"?).`},
		{note: "R6 sandbox mode", code: rule.R6, tool: `schema.#Bash & {sandbox: mode: "of"}`,
			want: `policy.cue:5:42: tool T: sandbox.mode must be "required" or "off", not "of"; write one of them (did you mean "off"?), or leave it out for "required".`},
		{note: "R8 sandbox network of another kind", code: rule.R8, tool: `schema.#Bash & {sandbox: network: "yes"}`,
			want: `policy.cue:5:45: tool T: sandbox.network must be true, false or {allow: [...]} (the hosts reached through the gateway's proxy), not "yes"`},
		{note: "R8 sandbox network with another field", code: rule.R8, tool: `schema.#Bash & {sandbox: network: hosts: ["x"]}`,
			want: `policy.cue:5:45: tool T: sandbox.network has no field hosts, only allow`},
		{note: "R8 sandbox network allow not a list", code: rule.R8, tool: `schema.#Bash & {sandbox: network: allow: "x"}`,
			want: `policy.cue:5:45: tool T: sandbox.network.allow must be a list of hosts, such as ["api.github.com"], not "x".`},
		{note: "P13 max-effect", code: rule.P13, tool: `schema.#Echo`, more: "agent: \"max-effect\": \"reads\"\n",
			want: `policy.cue:6:22: agent: max-effect must be "none", "read", "write" or "destructive", not "reads"; write one of them (did you mean "read"?).`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: T: " + tc.tool + "\n" + tc.more + "tools: Used: schema.#Echo\n"}))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load = %v, want Errors", err)
			}
			for _, d := range errs {
				if strings.HasSuffix(d.Pos.File, "policy.cue") {
					d.Pos.File = "policy.cue"
				}
				if strings.HasPrefix(d.String(), tc.want) {
					if d.Code != tc.code {
						t.Errorf("the error is under %s, want %s", d.Code, tc.code)
					}
					return
				}
			}
			t.Errorf("Load = %v, want %q", err, tc.want)
		})
	}
}

// TestP13NarrowedBuiltinStillConflicts: a built-in's effect is its own, so a
// policy that says otherwise of it conflicts, as when the schema held a
// disjunction; a plain tool of its own takes any effect.
func TestP13NarrowedBuiltinStillConflicts(t *testing.T) {
	_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: R: schema.#Read & {effect: \"write\"}\n"}))
	if err == nil || !strings.Contains(err.Error(), `policy.cue:5:35: tools.R.effect: conflicting values "read" and "write"`) {
		t.Errorf("Load = %v, want the conflict at the policy's value", err)
	}
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: R: {builtin: \"Read\", effect: \"write\"}\n"}))
	if err == nil {
		t.Errorf("a tool naming the built-in Read must conflict with its effect too, got %v", g.Tools["R"].Effect)
	}
}
