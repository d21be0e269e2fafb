package cchook

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueload "cuelang.org/go/cue/load"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/schema"
)

const testPolicy = `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Glob", "Grep", "Edit(./src/**)", "Write(./src/**)", "Bash(git:*)", "Bash(npm test)",
	"WebFetch(domain:docs.example.com)", "WebSearch", "TodoWrite", "Agent", "mcp__github", "mcp__jira__get_issue"]
subagents: reviewer: {"allowed-tools": ["Read", "Grep", "Glob", "mcp__github"], "max-effect": "read"}
validation: "enforce"
claudeCode: unknownTools: "ask"
`

func load(t *testing.T, wd string) *provision.Generation {
	t.Helper()
	return loadSource(t, testPolicy, wd)
}

// TestClaudeCodeHookInputs decides real hook inputs, captured as test data
// one per tool, MCP tools and a subagent call: each line is a hook input
// and, under "want", the decision (issue 14).
func TestClaudeCodeHookInputs(t *testing.T) {
	gen := load(t, "/work/proj")
	f, err := os.Open("testdata/hook_inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		var tc struct {
			Note  string `json:"note"`
			Input Input  `json:"input"`
			Want  string `json:"want"`
			Says  string `json:"says"`
		}
		if err := json.Unmarshal(sc.Bytes(), &tc); err != nil {
			t.Fatalf("test data line %d: %v", n+1, err)
		}
		n++
		t.Run(tc.Note, func(t *testing.T) {
			d := Answer(Runtime, gen, tc.Input, gateway.Options{Logger: slog.New(slog.DiscardHandler)}, nil).HookSpecificOutput
			if d.HookEventName != "PreToolUse" || d.PermissionDecision != tc.Want || !strings.Contains(d.PermissionDecisionReason, tc.Says) {
				t.Errorf("decision %+v; want %s saying %q", d, tc.Want, tc.Says)
			}
		})
	}
	if n < 15 {
		t.Errorf("only %d hook inputs", n)
	}
}

// TestClaudeCodeSchemasMatchTheSDK: every input schema of schema/claudecode
// has the fields, optionality and types of the SDK's type definitions
// (sdk-tools.d.ts of @anthropic-ai/claude-agent-sdk 0.3.332, vendored).
func TestClaudeCodeSchemasMatchTheSDK(t *testing.T) {
	pkg := claudeCodePackage(t)
	ifaces := parseInterfaces(t, "testdata/sdk-tools.d.ts")
	for iface, tool := range map[string]string{
		"AgentInput": "Agent", "BashInput": "Bash", "FileEditInput": "Edit", "FileReadInput": "Read",
		"FileWriteInput": "Write", "GlobInput": "Glob", "GrepInput": "Grep", "NotebookEditInput": "NotebookEdit",
		"TodoWriteInput": "TodoWrite", "WebFetchInput": "WebFetch", "WebSearchInput": "WebSearch",
	} {
		t.Run(tool, func(t *testing.T) {
			want, ok := ifaces[iface]
			if !ok {
				t.Fatalf("the .d.ts has no %s", iface)
			}
			got := cueFields(pkg.LookupPath(cue.MakePath(cue.Def(tool), cue.Str("input"))))
			if len(got) == 0 {
				t.Fatalf("claudecode.#%s has no input fields", tool)
			}
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s lacks %s (%s in the SDK)", tool, name, w)
				case g != w:
					t.Errorf("%s.%s is %s, the SDK says %s", tool, name, g, w)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("%s declares %s, which the SDK does not", tool, name)
				}
			}
		})
	}
}

// claudeCodePackage is the package schema/claudecode as shipped: a loaded
// policy keeps no CUE once compiled.
func claudeCodePackage(t *testing.T) cue.Value {
	t.Helper()
	const root = "/claudecode.test"
	ov := map[string]cueload.Source{root + "/cue.mod/module.cue": cueload.FromString("module: \"" + schema.Module + "\"\nlanguage: version: \"v0.12.0\"\n")}
	err := fs.WalkDir(schema.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			data, _ := fs.ReadFile(schema.Files, p)
			ov[root+"/schema/"+p] = cueload.FromBytes(data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v := cuecontext.New().BuildInstance(cueload.Instances([]string{"./schema/claudecode"}, &cueload.Config{Dir: root, Overlay: ov})[0])
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	return v
}

var fieldRE = regexp.MustCompile(`^  "?([\w-]+)"?(\??): (.+?);?$`)

// parseInterfaces reads the top-level fields of each exported interface:
// name → "required|optional type".
func parseInterfaces(t *testing.T, file string) map[string]map[string]string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	var cur map[string]string
	for _, line := range strings.Split(string(data), "\n") {
		if m := regexp.MustCompile(`^export interface (\w+) \{`).FindStringSubmatch(line); m != nil {
			cur = map[string]string{}
			out[m[1]] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if m := fieldRE.FindStringSubmatch(line); m != nil {
			opt := "required"
			if m[2] == "?" {
				opt = "optional"
			}
			cur[m[1]] = opt + " " + tsKind(m[3])
		}
	}
	return out
}

func tsKind(ts string) string {
	switch {
	case ts == "string":
		return "string"
	case ts == "number":
		return "number"
	case ts == "boolean":
		return "bool"
	case strings.HasSuffix(ts, "[]") || strings.HasPrefix(ts, "{"):
		return "list"
	case strings.HasPrefix(ts, `"`):
		alts := strings.Split(ts, " | ")
		slices.Sort(alts)
		return "enum " + strings.Join(alts, "|")
	}
	return ts
}

func cueFields(v cue.Value) map[string]string {
	out := map[string]string{}
	it, _ := v.Fields(cue.Optional(true))
	for it.Next() {
		opt := "required"
		if it.Selector().ConstraintType() == cue.OptionalConstraint {
			opt = "optional"
		}
		fv := it.Value()
		kind := ""
		switch k := fv.IncompleteKind(); {
		case k == cue.StringKind && fv.IsConcrete():
			kind = "enum"
		case k == cue.StringKind:
			kind = "string"
			if op, args := fv.Expr(); op == cue.OrOp {
				var alts []string
				for _, a := range args {
					s, _ := a.String()
					alts = append(alts, `"`+s+`"`)
				}
				slices.Sort(alts)
				kind = "enum " + strings.Join(alts, "|")
			}
		case k == cue.NumberKind || k == cue.IntKind|cue.FloatKind:
			kind = "number"
		case k == cue.BoolKind:
			kind = "bool"
		case k == cue.ListKind:
			kind = "list"
		default:
			kind = k.String()
		}
		out[it.Selector().Unquoted()] = opt + " " + kind
	}
	return out
}

var _ = policy.Position{}

// TestR2HookInputIsReadExactly: the hook reads its input one way only
// (issue 47 item 3): every captured Claude Code input is read, while a
// name in another case is not the protocol's and a name given twice, at
// the top or in tool_input, refuses the input instead of letting its last
// value be decided.
func TestR2HookInputIsReadExactly(t *testing.T) {
	data, err := os.ReadFile("testdata/hook_inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var tc struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal([]byte(line), &tc); err != nil {
			t.Fatal(err)
		}
		// The captured cwd is not a directory here; only that is refused.
		if _, err := ReadInput(tc.Input); err != nil && !strings.Contains(err.Error(), "cwd") {
			t.Errorf("captured input %d is refused: %v", i+1, err)
		}
	}
	cwd := t.TempDir()
	for _, tc := range []struct{ note, input, says string }{
		{"a name in upper case", `{"cwd":%q,"hook_event_name":"PreToolUse","TOOL_NAME":"Bash","tool_input":{"command":"ls"}}`, `has no "tool_name"`},
		{"a name in another case beside the real one", `{"cwd":%q,"hook_event_name":"PreToolUse","tool_name":"Read","Tool_Name":"Bash","tool_input":{"file_path":"/etc/passwd"}}`, ""},
		{"tool_name twice", `{"cwd":%q,"hook_event_name":"PreToolUse","tool_name":"Read","tool_name":"Bash","tool_input":{"command":"ls"}}`, `duplicate object member name "tool_name"`},
		{"an argument twice", `{"cwd":%q,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls","command":"rm -rf x"}}`, `duplicate object member name "command"`},
		{"cwd twice", `{"cwd":"/","cwd":%q,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"}}`, `duplicate object member name "cwd"`},
	} {
		in, err := ReadInput([]byte(fmt.Sprintf(tc.input, cwd)))
		switch {
		case tc.says == "":
			if err != nil || in.ToolName != "Read" {
				t.Errorf("%s: read as %q, %v; want Read", tc.note, in.ToolName, err)
			}
		case err == nil || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "the call is blocked"):
			t.Errorf("%s: %v; want a refusal saying %q", tc.note, err, tc.says)
		}
	}
}
