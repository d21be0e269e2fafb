package policytest

import (
	"context"
	"log/slog"
	"testing"

	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
)

// TestP8YAMLDecidesAsCUE: the YAML example and the CUE team policy it
// restates decide the same on the team's own test cases and more, the
// narrowing of Bash's timeout (JSON Schema in the YAML) included (issues
// 20, 33).
func TestP8YAMLDecidesAsCUE(t *testing.T) {
	load := func(dir string) (*gateway.Gateway, func()) {
		gen, closeGen, err := reload.Once(context.Background(), dir, "/srv/repo", 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		return gateway.New(gen, gateway.Options{Workdir: "/srv/repo", Logger: slog.New(slog.DiscardHandler)}), closeGen
	}
	cueGW, c1 := load("../../../examples/policies/team")
	defer c1()
	yamlGW, c2 := load("../../../examples/policies/yaml")
	defer c2()
	cases := cueGW.Current().Tests
	extra := []struct{ surface, tool, input string }{
		{"agent", "Glob", `{"pattern":"**/*.go","path":"/srv/repo"}`},
		{"agent", "Glob", `{"pattern":"*"}`},
		{"agent,subagent:reviewer", "Bash", `{"command":"git log"}`},
		{"agent,subagent:docs-writer", "Read", `{"file_path":"/etc/shadow"}`},
		{"agent,skill:lint", "Read", `{"file_path":"/srv/repo/a"}`},
		{"agent,command:test", "Bash", `{"command":"make test"}`},
		{"agent", "Write", `{"file_path":"/srv/repo/a","content":1}`},
		{"agent", "Nope", `{}`},
	}
	n := 0
	for _, tc := range cases {
		a, b := cueGW.Check(tc.Surface, "1", tc.Tool, tc.Input), yamlGW.Check(tc.Surface, "1", tc.Tool, tc.Input)
		if a.Allowed != b.Allowed || a.Rule != b.Rule || a.Reason != b.Reason {
			t.Errorf("%s: CUE %v %s %q, YAML %v %s %q", tc.Name, a.Allowed, a.Rule, a.Reason, b.Allowed, b.Rule, b.Reason)
		}
		n++
	}
	for _, tc := range extra {
		chain := splitChain(tc.surface)
		a, b := cueGW.Check(chain, "1", tc.tool, []byte(tc.input)), yamlGW.Check(chain, "1", tc.tool, []byte(tc.input))
		if a.Allowed != b.Allowed || a.Rule != b.Rule || a.Reason != b.Reason {
			t.Errorf("%s %s %s: CUE %v %s %q, YAML %v %s %q", tc.surface, tc.tool, tc.input, a.Allowed, a.Rule, a.Reason, b.Allowed, b.Rule, b.Reason)
		}
		n++
	}
	if n < 16 {
		t.Errorf("only %d cases compared", n)
	}
}

func splitChain(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
