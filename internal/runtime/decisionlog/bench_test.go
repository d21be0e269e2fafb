package decisionlog

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkR10Record is the cost of one record, written (sync=false) and
// flushed to the disk (sync=true, --decision-log-sync); compare the two
// as a ratio on one machine.
func BenchmarkR10Record(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "write"
		if sync {
			name = "sync"
		}
		b.Run(name, func(b *testing.B) {
			l, err := Open(filepath.Join(b.TempDir(), "decisions.jsonl"), Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := Record{Time: time.Now(), Phase: Decided, CallID: "toolu_01", Tool: "Read", Surface: []string{"agent"},
				Subject: "/work/src/main.go", Allowed: true, Rule: "P6", Entries: []string{"Read(/work/**)"},
				Revision: "0123456789ab", Generation: 1, Reason: "Read(/work/**) allows it."}
			for b.Loop() {
				if err := l.Log(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
