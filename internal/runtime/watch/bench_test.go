package watch

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
)

// largePolicy is a generated policy of tools tools (all Echo) and surfaces
// subagents, each allowed a window of ten tools.
func largePolicy(tools, surfaces int) string {
	var b strings.Builder
	b.WriteString("package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {\n")
	for i := range tools {
		fmt.Fprintf(&b, "\tTool%d: schema.#Echo\n", i)
	}
	b.WriteString("}\n\nagent: \"allowed-tools\": [\"Tool0\"]\n\nsubagents: {\n")
	for s := range surfaces {
		fmt.Fprintf(&b, "\ts%d: \"allowed-tools\": [", s)
		for k := range 10 {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "\"Tool%d\"", (s*5+k)%tools)
		}
		b.WriteString("]\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// BenchmarkR3LoadLarge measures policy.Load of a generated 500-tool,
// 100-surface policy (target: at most 1s per load), beside a 10-tool one
// with the same surfaces, which shows what the tools cost.
func BenchmarkR3LoadLarge(b *testing.B) {
	for _, size := range []struct{ tools, surfaces int }{{500, 100}, {10, 100}} {
		b.Run(fmt.Sprintf("%dtools%dsurfaces", size.tools, size.surfaces), func(b *testing.B) {
			dir := policyDir(b, map[string]string{"policy.cue": largePolicy(size.tools, size.surfaces)})
			g, err := policy.Load(dir)
			if err != nil {
				b.Fatal(err)
			}
			if len(g.Tools) != size.tools || len(g.Surfaces) != size.surfaces+1 {
				b.Fatalf("the generated policy has %d tools and %d surfaces; want %d and %d", len(g.Tools), len(g.Surfaces), size.tools, size.surfaces+1)
			}
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := policy.Load(dir); err != nil {
					b.Fatal(err)
				}
			}
			// The machine may be shared: CPU time per load is the steadier figure.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkR3WriteToInForce measures the time from saving the policy as an
// editor does (a new file renamed over it) to the new generation being in
// force, debounce (the default 50ms) included (target: at most 250ms).
// bench/scale's BenchmarkReloadScale measures the same through the runtime
// with its medians.
func BenchmarkR3WriteToInForce(b *testing.B) {
	for _, size := range []struct {
		name  string
		tools int
	}{{"small", 2}, {"500tools", 500}} {
		b.Run(size.name, func(b *testing.B) {
			src := func(i int) string {
				return largePolicy(size.tools, min(size.tools, 100)) + fmt.Sprintf("\n// edit %d\n", i)
			}
			dir := policyDir(b, map[string]string{"policy.cue": src(-1)})
			h := start(b, dir, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			var worst time.Duration
			i := 0
			for b.Loop() {
				gen := h.w.Status().Generation
				t0 := time.Now()
				tmp := filepath.Join(dir, ".policy.cue.swp")
				write(b, tmp, src(i))
				if err := os.Rename(tmp, filepath.Join(dir, "policy.cue")); err != nil {
					b.Fatal(err)
				}
				h.waitFor(b, "the edit", func(s Status) bool { return s.Generation > gen })
				worst = max(worst, time.Since(t0))
				i++
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}
