package policy

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestReloadMemory loads the same policy many times and checks that the
// live heap does not grow with reloads: every load compiles into a CUE
// context of its own, dropped with the generation. Run with AIMON_SOAK=1.
func TestReloadMemory(t *testing.T) {
	if os.Getenv("AIMON_SOAK") == "" {
		t.Skip("set AIMON_SOAK=1 to measure")
	}
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read & {input: file_path: =~"^/srv/"}, Echo: schema.#Echo, Bash: schema.#Bash}
agent: "allowed-tools": ["Read", "Echo", "Bash(git:*)"]
subagents: r: "allowed-tools": ["Read(/srv/**)"]
`})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range 20 {
		Load(dir)
	}
	base := heap()
	const n = 500
	for range n {
		if _, err := Load(dir); err != nil {
			t.Fatal(err)
		}
	}
	grew := int64(heap()) - int64(base)
	t.Logf("heap %d KiB after warm-up; %+d KiB after %d more loads (%.1f KiB a load)", base>>10, grew>>10, n, float64(grew)/1024/n)
	// With one process-wide context this was about 250 KiB a load.
	if grew > 8<<20 {
		t.Errorf("the heap grew by %d KiB over %d loads: reloads leak", grew>>10, n)
	}
}

// TestR3LoadKeepsNoCUE: a loaded generation holds none of its policy's CUE
// once compiled (issue 32: the unified policy was most of a large policy's
// heap), and still decides, vets and computes a chain's list it had not
// computed; a generation with a tool waiting for its implementation keeps
// the CUE that Complete needs.
func TestR3LoadKeepsNoCUE(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read & {input: file_path: =~"^/srv/"}, Echo: schema.#Echo, Bash: schema.#Bash}
agent: "allowed-tools": ["Read", "Echo", "Bash(git:*)"]
subagents: r: "allowed-tools": ["Read(/srv/**)", "Bash"]
`, "data.yaml": "tools:\n  Say: {builtin: Echo, input: {message: string}}\n"}))
	if err != nil {
		t.Fatal(err)
	}
	for name, tool := range g.Tools {
		if tool.Input.Exists() || tool.value.Exists() {
			t.Errorf("tool %s keeps its CUE", name)
		}
	}
	if c := g.comp; c.ctx != nil || c.root.Exists() || c.def.Exists() || c.files != nil || c.shipped != nil {
		t.Errorf("the generation's compiler keeps the policy's CUE: %+v", c)
	}
	e, err := g.Effective([]string{"agent", "subagent:r"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		note  string
		tool  string
		input map[string]any
		want  bool
	}{
		{"P10 a path both lists allow", "Read", map[string]any{"file_path": "/srv/a"}, true},
		{"P10 a command only the agent's list names", "Bash", map[string]any{"command": "git status"}, true},
		{"P10 a command the agent's list does not allow", "Bash", map[string]any{"command": "rm -rf /"}, false},
		{"P10 a tool only the agent's list names", "Echo", map[string]any{"message": "hi"}, false},
	} {
		if got := e.Decide(tc.tool, tc.input, "/").Allowed; got != tc.want {
			t.Errorf("%s: allowed = %v, want %v", tc.note, got, tc.want)
		}
	}
	if vs := g.Tools["Read"].Gate.Check(map[string]any{"file_path": "/etc/passwd"}); len(vs) == 0 {
		t.Error("the gate of Read must refuse a path outside /srv/ without its CUE")
	}
	var noted bool
	for _, d := range Vet(g) {
		noted = noted || strings.Contains(d.Message, `input.message admits only the string "string"`)
	}
	if !noted {
		t.Errorf("vet must still report the type name written as a value in YAML: %v", Vet(g))
	}

	pending, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: {Echo: schema.#Echo, P: plugin: command: [\"p\"]}\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if !pending.Tools["P"].value.Exists() || !pending.comp.def.Exists() {
		t.Error("a generation with a pending tool must keep the CUE that Complete needs")
	}
}
