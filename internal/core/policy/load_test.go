package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/defaultpolicy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/testkit/policydir"
)

// writePolicy lays out a policy module in a temporary directory.
func writePolicy(t testing.TB, files map[string]string) string {
	t.Helper()
	return policydir.Write(t, files)
}

const header = "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n"

func TestLoadCompilesTools(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {
	Read: schema.#Read & {input: file_path: =~"^/srv/"}
	Bash: schema.#Bash & {validation: "enforce"}
	Echo: schema.#Echo
}
agent: "allowed-tools": ["Read", "Bash(git:*)", "Echo"]
subagents: reviewer: "allowed-tools": ["Read"]
skills: lint: {}
parallel: {enabled: true, maxConcurrency: 8}
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	read := g.Tools["Read"]
	if read.Builtin != "Read" || read.Concurrency != "concurrent_safe" || read.Interrupt != "cooperative" ||
		read.Subject == nil || *read.Subject != (Subject{Field: "file_path", Kind: "path"}) || read.Validation != "warn" {
		t.Errorf("Read compiled as %+v", read)
	}
	if g.Tools["Bash"].Validation != "enforce" || g.Tools["Bash"].Concurrency != "sequential" {
		t.Errorf("Bash compiled as %+v", g.Tools["Bash"])
	}
	// The narrowed built-in is what the gate checks.
	if vs := read.Gate.Check(map[string]any{"file_path": "/etc/passwd"}); len(vs) == 0 {
		t.Error("the policy narrowed Read to /srv/, but the gate passes /etc/passwd")
	}
	if vs := read.Gate.Check(map[string]any{"file_path": "/srv/a"}); len(vs) != 0 {
		t.Errorf("the gate refuses /srv/a: %v", vs)
	}
	if g.Parallel != (Parallel{Enabled: true, MaxConcurrency: 8, PerBatchMax: 8}) {
		t.Errorf("parallel = %+v; perBatchMax must default to maxConcurrency (rule K3)", g.Parallel)
	}
	if s := g.Surfaces["skill:lint"]; s == nil || s.Declared {
		t.Errorf("skill:lint = %+v, want a surface without a list (unlimited, rule P11)", s)
	}
	if got := strings.Join(g.SurfaceRefs(), " "); got != "agent skill:lint subagent:reviewer" {
		t.Errorf("surfaces = %s", got)
	}
	if len(g.Warnings) != 0 {
		t.Errorf("warnings: %v", g.Warnings)
	}
	var schema map[string]any
	js, err := read.JSONSchema()
	if err := json.Unmarshal(js, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("Read's JSON Schema = %s (%v)", js, err)
	}
}

func TestLoadEmbeddedDefault(t *testing.T) {
	g, err := LoadFS(defaultpolicy.FS())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Read", "Glob", "Grep", "Echo"} {
		if g.Tools[name] == nil {
			t.Errorf("the default policy lacks %s", name)
		}
	}
	// The same files on disk load to the same tools.
	disk, err := Load("../defaultpolicy")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(disk.Names(), ",") != strings.Join(g.Names(), ",") || disk.Validation != g.Validation {
		t.Errorf("on disk %v %s, embedded %v %s", disk.Names(), disk.Validation, g.Names(), g.Validation)
	}
}

func TestRevisionFollowsContent(t *testing.T) {
	body := header + "tools: Echo: schema.#Echo\n"
	a, err := Load(writePolicy(t, map[string]string{"policy.cue": body}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Load(writePolicy(t, map[string]string{"policy.cue": body}))
	c, _ := Load(writePolicy(t, map[string]string{"policy.cue": body + "validation: \"enforce\"\n"}))
	if a.Revision != b.Revision || a.Revision == c.Revision {
		t.Errorf("revisions %s %s %s: same files must give the same revision, others another", a.Revision, b.Revision, c.Revision)
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {
	Read: schema.#Read & {input: extra?: string}
	Echo: schema.#Echo & {concurrency: "parallel"}
}
agent: allowedTools: ["Read"]
parallel: {maxConcurrency: 2, perBatchMax: 3}
`})
	_, err := Load(dir)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Load = %v, want Errors", err)
	}
	want := []string{
		"policy.cue:7:31: tool Read: input.extra is not a parameter of the built-in Read",
		"policy.cue:8:37: tools.Echo.concurrency: conflicting values \"concurrent_safe\" and \"parallel\"",
		"policy.cue:10:8: agent.allowedTools: field not allowed; did you mean \"allowed-tools\"?",
		"policy.cue:11:44: parallel.perBatchMax:",
	}
	text := err.Error()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("the errors lack %q; got:\n%s", w, text)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(errs), len(want), text)
	}
}

func TestLoadBadDirectory(t *testing.T) {
	empty := t.TempDir()
	nomod := t.TempDir()
	os.WriteFile(filepath.Join(nomod, "p.cue"), []byte("package p\n"), 0o644)
	file := filepath.Join(nomod, "p.cue")
	tests := []struct{ name, dir, want string }{
		{"missing", filepath.Join(empty, "nope"), "does not exist"},
		{"not a directory", file, "not a directory"},
		{"empty", empty, "has no .cue, .yaml or .json files"},
		{"no cue.mod", nomod, "not in a CUE module"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.dir)
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Message, tt.want) {
				t.Fatalf("Load(%s) = %v, want one sentence containing %q", tt.dir, err, tt.want)
			}
		})
	}
}

func TestP12ListWithoutKnownTool(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: Read: schema.#Read
agent: "allowed-tools": ["Read", "Raed"]
commands: deploy: "allowed-tools": ["Bsh"]
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, w := range Vet(g) {
		got = append(got, w.String())
	}
	text := strings.Join(got, "\n")
	for _, w := range []string{
		`policy.cue:7:34: agent allowed-tools entry "Raed" names no tool the policy defines; did you mean "Read"?`,
		`policy.cue:8:37: command:deploy allowed-tools entry "Bsh" names no tool the policy defines; the tools are Read.`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("vet lacks %q; got:\n%s", w, text)
		}
	}
	// The misspelt tool is reported once: the list it empties is its
	// consequence, at the same place (issue 33). The load still logs it.
	if len(got) != 2 {
		t.Errorf("%d problems, want 2:\n%s", len(got), text)
	}
	var logged bool
	for _, w := range g.Warnings {
		logged = logged || strings.Contains(w.String(), `policy.cue:8:37: command:deploy allowed-tools leaves no tool at all`)
	}
	if !logged {
		t.Errorf("the load's warnings lack the list that leaves no tool: %v", g.Warnings)
	}
}

func TestP10EffectiveChains(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Echo: schema.#Echo, Bash: schema.#Bash}
agent: "allowed-tools": ["Read", "Echo"]
subagents: reviewer: "allowed-tools": ["Read(/src/**)"]
subagents: free: {}
skills: shell: "allowed-tools": ["Bash"]
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, err := g.Effective([]string{"agent", "subagent:reviewer"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Listed("Echo") || !e.Listed("Read") {
		t.Error("a subagent must not be wider than its caller, nor lose what both allow")
	}
	if d := e.Decide("Read", map[string]any{"file_path": "/etc/passwd"}, "/"); d.Allowed {
		t.Error("the child's pattern must narrow its caller's name-only entry")
	}
	again, _ := g.Effective([]string{"subagent:reviewer"}) // the agent is always the root
	if again != e {
		t.Error("the effective list of a chain must be computed once per generation")
	}
	if e, err := g.Effective([]string{"agent", "subagent:free"}); err != nil || e.Listed("Bash") || !e.Listed("Echo") {
		t.Errorf("a surface without a list is bound by its caller only (P11): %v", err)
	}
	if _, err := g.Effective([]string{"agent", "skill:shell"}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("a chain that leaves no tool must be refused as a run (P11), got %v", err)
	}
	if _, err := g.Effective([]string{"agent", "subagent:ghost"}); err == nil || !strings.Contains(err.Error(), `"subagent:ghost" is not declared`) {
		t.Errorf("an undeclared surface must be refused, got %v", err)
	}
}

// TestP10RootChainIsOneList: the main agent's chain, asked for as no
// chain, as ["agent"] or as the chain a subagent extends, is the same
// effective list made once (kept apart from the other chains, issue 49),
// from many goroutines at once; it decides as the agent's list says, and
// a chain below it is still its own, narrower list.
func TestP10RootChainIsOneList(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Echo: schema.#Echo}
agent: "allowed-tools": ["Read(/src/**)", "Echo"]
subagents: reviewer: "allowed-tools": ["Read"]
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	lists := make([]*allow.Effective, 3*8)
	var wg sync.WaitGroup
	for i := range lists {
		wg.Go(func() {
			e, err := g.Effective([][]string{nil, {}, {"agent"}}[i%3])
			if err != nil {
				t.Error(err)
			}
			lists[i] = e
		})
	}
	wg.Wait()
	root := lists[0]
	for i, e := range lists {
		if e != root {
			t.Fatalf("chain %d of the main agent is another list than the first", i)
		}
	}
	if d := root.Decide("Read", map[string]any{"file_path": "/etc/passwd"}, "/"); d.Allowed {
		t.Error("the agent's pattern must bind its own calls")
	}
	if d := root.Decide("Echo", map[string]any{"message": "m"}, "/"); !d.Allowed {
		t.Errorf("Echo is in the agent's list: %s", d.Reason)
	}
	sub, err := g.Effective([]string{"agent", "subagent:reviewer"})
	if err != nil || sub == root || sub.Listed("Echo") {
		t.Errorf("the subagent's chain must be its own list, bound by the agent's: %v", err)
	}
	if _, err := g.Effective([]string{"agnet"}); err == nil || !strings.Contains(err.Error(), `"agnet" is not a surface reference`) {
		t.Errorf("a misspelt root must still be refused, got %v", err)
	}
}

func decodeObj(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestC1ToolNeedsOneImplementation(t *testing.T) {
	for name, tool := range map[string]string{
		"none": `{description: "x", input: {}}`,
		"both": `{builtin: "Echo", plugin: command: ["x"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: Echo: schema.#Echo\ntools: T: " + tool + "\n"}))
			if err == nil || !strings.Contains(err.Error(), "tool T needs exactly one implementation") || !strings.Contains(err.Error(), "policy.cue:6:") {
				t.Errorf("Load = %v", err)
			}
		})
	}
}

// TestRevisionCoversImports: an edit to a package the policy imports from
// its own module changes the revision, as it changes the policy.
func TestRevisionCoversImports(t *testing.T) {
	files := map[string]string{
		"policy.cue":  "package policy\n\nimport \"example.com/p/lib\"\n\ntools: lib.tools\n",
		"lib/lib.cue": "package lib\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\n",
	}
	dir := writePolicy(t, files)
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "lib", "lib.cue"), []byte("package lib\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\ntools: Glob: schema.#Glob\n"), 0o644)
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tools) != 2 || a.Revision == b.Revision {
		t.Errorf("revisions %s and %s for %d and %d tools", a.Revision, b.Revision, len(a.Tools), len(b.Tools))
	}
}

func TestLoadModuleAndReferenceProblems(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no language version", map[string]string{"cue.mod/module.cue": "module: \"example.com/p@v0\"\n", "policy.cue": header + "tools: Echo: schema.#Echo\n"},
			`cue.mod/module.cue:1:1: no language version declared in module.cue; add language: version: "v0.12.0" to it`},
		{"undefined definition", map[string]string{"policy.cue": header + "tools: Read: schema.#Nope\n"},
			"policy.cue:5:21: tools.Read: undefined field: #Nope"},
		{"missing import", map[string]string{"policy.cue": "package policy\n\nimport \"example.com/other/x\"\n\ntools: x.tools\n"},
			`policy.cue:3:8: example.com/p@v0: import failed: cannot find package "example.com/other/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writePolicy(t, tt.files))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestP4WorkdirRelativePatterns: "./" path patterns resolve against the
// working directory the load is given; without one they match nothing.
func TestP4WorkdirRelativePatterns(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: "allowed-tools": ["Read(./src/**)", "Bash(./run.sh)"]
`})
	g, err := Load(dir, WithWorkdir("/w"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := g.Effective(nil)
	for path, want := range map[string]bool{"/w/src/a.go": true, "src/a.go": true, "/w/other": false, "/src/a.go": false} {
		if got := e.Decide("Read", map[string]any{"file_path": path}, "/w").Allowed; got != want {
			t.Errorf("Read %s: allowed %v", path, got)
		}
	}
	if !e.Decide("Bash", map[string]any{"command": "./run.sh"}, "/w").Allowed {
		t.Error("a command pattern is not a path: ./run.sh must stay as written")
	}
	// A search prunes by the resolved pattern (rule R6).
	if !e.MayAllowBelow("Read", "/w/src/a") || e.MayAllowBelow("Read", "/w/other") {
		t.Error("MayAllowBelow does not read ./src/** as /w/src/**")
	}
	// A working directory with glob characters in its name is that name:
	// /w[1] is not the class [1], and /w1 is not under it.
	g, err = Load(dir, WithWorkdir("/w[1]*"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ = g.Effective(nil)
	for path, want := range map[string]bool{"/w[1]*/src/a.go": true, "src/a.go": true, "/w1x/src/a.go": false} {
		if got := e.Decide("Read", map[string]any{"file_path": path}, "/w[1]*").Allowed; got != want {
			t.Errorf("under the working directory /w[1]*, Read %s: allowed %v", path, got)
		}
	}
	if !e.MayAllowBelow("Read", "/w[1]*/src") || e.MayAllowBelow("Read", "/w1x") {
		t.Error("MayAllowBelow does not read ./src/** as the escaped /w[1]*/src/**")
	}
	g, err = Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, _ = g.Effective(nil)
	if e.Decide("Read", map[string]any{"file_path": "/src/a.go"}, "/").Allowed {
		t.Error("without a working directory a relative pattern must match nothing")
	}
}

// TestC1ToolSpecDecodesEveryField: each field a policy writes on a tool
// reaches the compiled tool from the one decoded spec, and what cannot be
// used is reported where it is written (file:line:col).
func TestC1ToolSpecDecodesEveryField(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	dir := writePolicy(t, map[string]string{"policy.cue": header + `tools: Echo: schema.#Echo & {
	effect: "none", idempotent: true, openWorld: false, concurrency: "concurrent_safe", validation: "enforce"
	maxFileBytes: 10, timeout: "3s", output: {said: string}
	subject: {field: "message", kind: "command", default: "hi"}
	sandbox: {mode: "off", write: ["/tmp/x"]}
}
tools: P: {title: "Say", description: "says", interrupt: "cooperative"}
tools: P: plugin: {command: ["./bin/p", "-x"], sha256: "` + sum + `", tool: "q"}
tools: U: plugin: command: ["u"]
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, p, u := g.Tools["Echo"], g.Tools["P"], g.Tools["U"]
	for _, tc := range []struct {
		note      string
		got, want any
	}{
		{"title", p.Title, "Say"},
		{"description", p.Description, "says"},
		{"effect", e.Effect, "none"},
		{"idempotent", e.Idempotent, true},
		{"openWorld", e.OpenWorld, false},
		{"concurrency", e.Concurrency, "concurrent_safe"},
		{"interrupt", p.Interrupt, "cooperative"},
		{"validation", e.Validation, rule.Enforce},
		{"maxFileBytes", e.MaxFileBytes, int64(10)},
		{"timeout", e.Timeout, 3 * time.Second},
		{"output", string(e.OutputSchema) != "", true},
		{"subject", *e.Subject, Subject{Field: "message", Kind: "command", Default: "hi"}},
		{"sandbox", e.Sandbox.Off && len(e.Sandbox.Write) == 1, true},
		{"builtin", e.Builtin, "Echo"},
		{"the policy-wide validation by default", u.Validation, g.Validation},
		{"a plugin's command, relative to the policy", p.Plugin.Command, []string{filepath.Join(dir, "bin/p"), "-x"}},
		{"a plugin's sha256", p.Plugin.SHA256, sum},
		{"a plugin's tool", p.Plugin.Tool, "q"},
		{"a plugin's tool by default", u.Plugin.Tool, "U"},
		{"a plugin's place", p.ImplPos.Line, 12},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.note, tc.got, tc.want)
		}
	}
	for _, tc := range []struct{ note, tool, want string }{
		{"a timeout that is not positive", `schema.#Echo & {timeout: "-1s"}`, `policy.cue:5:36: tool T: timeout "-1s" is not a positive duration`},
		{"a subject that is not a parameter", `schema.#Echo & {subject: {field: "nope", kind: "command"}}`, `policy.cue:5:27: tool T: the subject field "nope" is not a parameter`},
		{"a sandbox path that is not absolute", `schema.#Echo & {sandbox: write: ["rel"]}`, `policy.cue:5:44: tool T: sandbox.write path "rel" is not absolute`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: T: " + tc.tool + "\n"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load = %v, want %q", err, tc.want)
			}
		})
	}
}
