package cchook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"aimon.dev/gw/internal/core/defaultpolicy"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/tools"
)

var discard = slog.New(slog.DiscardHandler)

// hookInputs are the captured Claude Code hook inputs of the hook's tests.
func hookInputs(t *testing.T) []cchook.Input {
	t.Helper()
	f, err := os.Open("testdata/hook_inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []cchook.Input
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct{ Input cchook.Input }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		out = append(out, line.Input)
	}
	if len(out) < 20 {
		t.Fatalf("only %d hook inputs", len(out))
	}
	return out
}

func provisioned(t *testing.T, g *policy.Generation) *provision.Generation {
	t.Helper()
	h := pluginhost.New(discard)
	t.Cleanup(h.Close)
	pg, err := reload.Registry(h, &provision.Upstreams{}).Provision(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

// TestR3RestoredDecidesAsLoaded: for every shipped policy, a generation
// saved and restored decides every call as the loaded one does — the
// hook's answer to each captured hook input, as the main agent and as each
// declared surface, and each policy test's call through the gateway — so
// that a record that verifies cannot change a decision (issue 14).
func TestR3RestoredDecidesAsLoaded(t *testing.T) {
	const wd = "/work/proj"
	loads := map[string]func() (*policy.Generation, error){
		"embedded": func() (*policy.Generation, error) { return policy.LoadFS(defaultpolicy.FS(), policy.WithWorkdir(wd)) },
	}
	for _, name := range []string{"team", "claude-code", "yaml"} {
		dir, _ := filepath.Abs(filepath.Join("../../../examples/policies", name))
		loads[name] = func() (*policy.Generation, error) { return policy.Load(dir, policy.WithWorkdir(wd)) }
	}
	inputs := hookInputs(t)
	for name, load := range loads {
		t.Run(name, func(t *testing.T) {
			loaded, err := load()
			if err != nil {
				t.Fatal(err)
			}
			data, err := loaded.Save()
			if err != nil {
				t.Fatalf("Save: %v", err)
			}
			restored, err := policy.Restore(data, policy.WithWorkdir(wd))
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			a, b := provisioned(t, loaded), provisioned(t, restored)
			n := 0
			for _, ref := range loaded.SurfaceRefs() {
				for _, in := range inputs {
					in.AgentType = ""
					if kind, sub, ok := cut(ref); ok && kind == "subagent" {
						in.AgentType = sub
					}
					in.Cwd = wd
					da := cchook.Answer(cchook.Runtime, a, in, gateway.Options{Logger: discard}, nil)
					db := cchook.Answer(cchook.Runtime, b, in, gateway.Options{Logger: discard}, nil)
					if !reflect.DeepEqual(da, db) {
						t.Errorf("%s as %s: loaded %+v, restored %+v", in.ToolName, ref, da, db)
					}
					chain := []string{"agent"}
					if ref != "agent" {
						chain = append(chain, ref)
					}
					ga := gateway.New(a, gateway.Options{Logger: discard, Workdir: wd})
					gb := gateway.New(b, gateway.Options{Logger: discard, Workdir: wd})
					input := in.ToolInput
					if len(input) == 0 {
						input = json.RawMessage("{}")
					}
					if x, y := ga.Check(chain, "c", in.ToolName, input), gb.Check(chain, "c", in.ToolName, input); !sameDecision(x, y) {
						t.Errorf("%s under %v: loaded %+v, restored %+v", in.ToolName, chain, x, y)
					}
					n++
				}
			}
			for _, tc := range loaded.Tests {
				ga := gateway.New(a, gateway.Options{Logger: discard, Workdir: tc.Workdir})
				gb := gateway.New(b, gateway.Options{Logger: discard, Workdir: tc.Workdir})
				if x, y := ga.Check(tc.Surface, "t", tc.Tool, tc.Input), gb.Check(tc.Surface, "t", tc.Tool, tc.Input); !sameDecision(x, y) {
					t.Errorf("test %s: loaded %+v, restored %+v", tc.Name, x, y)
				}
				n++
			}
			t.Logf("%d calls decided alike", n)
		})
	}
}

// sameDecision compares two decisions field by field; of the sandbox's
// exec judge, which holds functions DeepEqual cannot compare, it compares
// the names it watches, the commands approved, and its verdict on each
// name alone and on a few argument shapes.
func sameDecision(a, b rule.Decision) bool {
	ja, jb := execOf(a), execOf(b)
	if (ja == nil) != (jb == nil) {
		return false
	}
	if ja != nil {
		if !reflect.DeepEqual(ja.Names, jb.Names) || !reflect.DeepEqual(ja.Approved, jb.Approved) {
			return false
		}
		for _, n := range append(slices.Clone(ja.Names), "git", "ls") {
			for _, words := range [][]string{{n}, {n, "-rf", "/"}, {n, "status"}} {
				ra, aa := ja.Decide(words)
				rb, ab := jb.Decide(words)
				if ra != rb || aa != ab {
					return false
				}
			}
		}
		sa, sb := *a.Sandbox, *b.Sandbox
		sa.Exec, sb.Exec = nil, nil
		a.Sandbox, b.Sandbox = &sa, &sb
	}
	return reflect.DeepEqual(a, b)
}

func execOf(d rule.Decision) *tools.ExecJudge {
	if d.Sandbox == nil {
		return nil
	}
	return d.Sandbox.Exec
}

func cut(ref string) (kind, name string, ok bool) {
	for i := range ref {
		if ref[i] == ':' {
			return ref[:i], ref[i+1:], true
		}
	}
	return "", "", false
}
