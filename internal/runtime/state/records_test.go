package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestR10LocalRecordsCreateOnceAcrossStores: of stores opened on one
// directory (as replicas sharing it would) racing to create one record,
// one wins, and every store reads the winner's value whole; Put replaces
// it; an expired record reads as none and can be created again.
func TestR10LocalRecordsCreateOnceAcrossStores(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	for round := range 10 {
		k := fmt.Sprint("decided:", round)
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 8 {
			s, err := Open(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := fmt.Sprintf("replica %d's decision", i)
				first, err := RecordsOf(s).Create(ctx, k, []byte(v), until)
				if err != nil {
					t.Error(err)
				}
				if first {
					wins.Add(1)
					winner.Store(v)
				}
			}()
		}
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d stores created one record", round, n)
		}
		s, _ := Open(dir, "")
		if v, ok, err := RecordsOf(s).Get(ctx, k); !ok || err != nil || string(v) != winner.Load() {
			t.Fatalf("round %d: read %q %v %v, want %q", round, v, ok, err, winner.Load())
		}
	}
	s, _ := Open(dir, "")
	r := RecordsOf(s)
	if err := r.Put(ctx, "decided:1", []byte("replaced"), until); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := r.Get(ctx, "decided:1"); string(v) != "replaced" {
		t.Errorf("after Put: %q", v)
	}
	if _, ok, err := r.Get(ctx, "never written"); ok || err != nil {
		t.Errorf("a key never written: %v %v", ok, err)
	}
	past := time.Now().Add(-time.Second)
	if err := r.Put(ctx, "gone", []byte("old"), past); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, "gone"); ok || err != nil {
		t.Errorf("an expired record was read: %v %v", ok, err)
	}
	if first, err := r.Create(ctx, "gone", []byte("new"), until); !first || err != nil {
		t.Errorf("an expired record kept its key: %v %v", first, err)
	}
	if v, _, _ := r.Get(ctx, "gone"); string(v) != "new" {
		t.Errorf("recreated: %q", v)
	}
}

// TestR10LocalRecordsRefuseBadInput: a value over the bound is refused
// with a sentence and leaves nothing; a record file that is not one
// (edited by hand) is an error, never a value.
func TestR10LocalRecordsRefuseBadInput(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, "")
	r := RecordsOf(s)
	ctx := context.Background()
	if _, err := r.Create(ctx, "big", make([]byte, MaxRecordBytes+1), time.Now().Add(time.Hour)); err == nil {
		t.Error("a record over the bound was taken")
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "records")); len(ents) != 0 {
		t.Errorf("a refused record left files: %v", ents)
	}
	os.WriteFile(filepath.Join(dir, "records", key("bad")), []byte("not an expiry"), 0o600)
	if v, ok, err := r.Get(ctx, "bad"); err == nil || ok {
		t.Errorf("a record that is not one was read: %q %v %v", v, ok, err)
	}
}
