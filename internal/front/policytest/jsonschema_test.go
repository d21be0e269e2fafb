package policytest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP8YAMLInputAsJSONSchema: a YAML policy whose tool input is written
// as JSON Schema (as agent APIs write tool definitions) is converted by
// the loader and decides exactly as the same constraints written in CUE:
// required, types, enums, ranges, lengths and patterns, closed or open
// (issue 33).
func TestP8YAMLInputAsJSONSchema(t *testing.T) {
	cueDir := writeDir(t, map[string]string{
		"cue.mod/module.cue": policydir.Module,
		"policy.cue": `package policy

import (
	"strings"
	"aimon.dev/gw/schema"
)

tools: Echo: schema.#Echo & {input: message: strings.MaxRunes(10) & =~"^[a-z ]+$"}
tools: Bash: schema.#Bash & {input: timeout?: <=300000}
tools: Ask: {external: "claude-code", effect: "none", input: close({question!: string, level?: "low" | "high", tags?: [...string], n?: int & >=1})}
validation: "enforce"
`})
	yamlDir := writeDir(t, map[string]string{"policy.yaml": `tools:
  Echo:
    builtin: Echo
    input:
      type: object
      properties:
        message: {type: string, maxLength: 10, pattern: "^[a-z ]+$"}
  Bash:
    builtin: Bash
    input:
      type: object
      properties:
        timeout: {type: integer, maximum: 300000}
  Ask:
    external: claude-code
    effect: none
    input:
      $schema: https://json-schema.org/draft/2020-12/schema
      type: object
      properties:
        question: {type: string, description: What to ask.}
        level: {enum: [low, high]}
        tags: {type: array, items: {type: string}}
        n: {type: integer, minimum: 1}
      required: [question]
      additionalProperties: false
validation: enforce
`})
	load := func(dir string) *gateway.Gateway {
		gen, closeGen, err := reload.Once(context.Background(), dir, dir, 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		t.Cleanup(closeGen)
		return gateway.New(gen, gateway.Options{Workdir: dir, Logger: slog.New(slog.DiscardHandler)})
	}
	cueGW, yamlGW := load(cueDir), load(yamlDir)
	for _, tc := range []struct {
		note, tool, input string
		allowed           bool
	}{
		{"a sound call", "Echo", `{"message":"hello"}`, true},
		{"a pattern broken", "Echo", `{"message":"HELLO"}`, false},
		{"too long", "Echo", `{"message":"hello hello hello"}`, false},
		{"a wrong type", "Echo", `{"message":5}`, false},
		{"the built-in's own required field", "Echo", `{}`, false},
		{"a narrowed built-in in range", "Bash", `{"command":"ls","timeout":1000}`, true},
		{"a narrowed built-in out of range", "Bash", `{"command":"ls","timeout":600000}`, false},
		{"required", "Ask", `{"level":"low"}`, false},
		{"an enum", "Ask", `{"question":"why?","level":"medium"}`, false},
		{"closed", "Ask", `{"question":"why?","qestion":"x"}`, false},
		{"array items", "Ask", `{"question":"why?","tags":["a",1]}`, false},
		{"a minimum", "Ask", `{"question":"why?","n":0}`, false},
		{"everything sound", "Ask", `{"question":"why?","level":"high","tags":["a"],"n":2}`, true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			a, b := cueGW.Check([]string{"agent"}, "1", tc.tool, []byte(tc.input)), yamlGW.Check([]string{"agent"}, "1", tc.tool, []byte(tc.input))
			if a.Allowed != tc.allowed || b.Allowed != a.Allowed || a.Rule != b.Rule || a.Reason != b.Reason {
				t.Errorf("CUE %v %s %q, YAML %v %s %q; want allowed %v", a.Allowed, a.Rule, a.Reason, b.Allowed, b.Rule, b.Reason, tc.allowed)
			}
		})
	}
}

// TestP8YAMLInputSchemaErrorsArePlaced: a JSON Schema input that cannot be
// read is an error at its file:line:col; an input that is not JSON Schema
// (no type: object) is a CUE value as before.
func TestP8YAMLInputSchemaErrorsArePlaced(t *testing.T) {
	for _, tc := range []struct{ note, yaml, want string }{
		{"an unknown type", "tools:\n  Echo:\n    builtin: Echo\n    input:\n      type: object\n      properties:\n        message: {type: strng}\n",
			`policy.yaml:7:19: tool Echo: its input is read as JSON Schema (it says type: object), and unknown type "strng"`},
		{"not JSON Schema: a literal narrowing", "tools:\n  Echo:\n    builtin: Echo\n    input:\n      message: 5\n",
			"policy.yaml:5:16"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := policy.Load(writeDir(t, map[string]string{"policy.yaml": tc.yaml}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("load: %v\nwant %q", err, tc.want)
			}
		})
	}
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
