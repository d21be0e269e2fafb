package policy

import (
	"os"
	"runtime"
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
