package state

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestP18SessionLabelsAddUpAcrossStores: stores opened on one directory
// (a hook process each) labelling one session at once all keep their
// labels; the first source of a label stays; another session holds none;
// a session past its time is gone. The memory store does the same.
func TestP18SessionLabelsAddUpAcrossStores(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	open := map[string]func() Sessions{
		"local": func() Sessions {
			s, err := Open(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			return SessionsOf(s)
		},
		"memory": func() func() Sessions { m := MemorySessions(); return func() Sessions { return m } }(),
	}
	for name, open := range open {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			for i := range 8 {
				s := open()
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, l := range []string{fmt.Sprint("l", i), "shared"} {
						if err := s.AddLabel(ctx, "s1", l, []byte(fmt.Sprint("call ", i)), until); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			got, err := open().Labels(ctx, "s1")
			if err != nil || len(got) != 9 {
				t.Fatalf("labels of s1: %d %v, want 9: %q", len(got), err, got)
			}
			for i := range 8 {
				if string(got[fmt.Sprint("l", i)]) != fmt.Sprint("call ", i) {
					t.Errorf("l%d: %q", i, got[fmt.Sprint("l", i)])
				}
			}
			first := string(got["shared"])
			open().AddLabel(ctx, "s1", "shared", []byte("later"), until)
			if again, _ := open().Labels(ctx, "s1"); string(again["shared"]) != first {
				t.Errorf("a later source replaced the first: %q, was %q", again["shared"], first)
			}
			if other, err := open().Labels(ctx, "s2"); len(other) != 0 || err != nil {
				t.Errorf("s2 holds %q %v", other, err)
			}
			open().AddLabel(ctx, "old", "x", nil, time.Now().Add(-time.Second))
			if old, err := open().Labels(ctx, "old"); len(old) != 0 || err != nil {
				t.Errorf("an expired session holds %q %v", old, err)
			}
		})
	}
}
