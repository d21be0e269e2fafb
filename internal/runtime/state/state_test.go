package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestR10LocalSpendIsOnceAcrossStores: stores opened on one directory (as
// two processes would) spend an id once between them, however many race
// on it, and again after they are reopened (a restart).
func TestR10LocalSpendIsOnceAcrossStores(t *testing.T) {
	dir := t.TempDir()
	until := time.Now().Add(time.Hour)
	for round := range 20 {
		id := fmt.Sprint("token-", round)
		var firsts atomic.Int32
		var wg sync.WaitGroup
		for range 8 {
			s, err := Open(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				first, err := s.Spend(context.Background(), id, until)
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			}()
		}
		wg.Wait()
		if n := firsts.Load(); n != 1 {
			t.Fatalf("round %d: %d first spends of one id", round, n)
		}
	}
	s, _ := Open("", dir)
	if first, err := s.Spend(context.Background(), "token-3", until); first || err != nil {
		t.Errorf("a reopened store spent an id again: %v %v", first, err)
	}
}

// TestR10StoreRefusesWhatItCannotUse: a URL of no known store, a store
// directory open to others, and no directory at all are refused with a
// sentence; a spend that cannot be recorded is an error, never a first
// spend (fail closed).
func TestR10StoreRefusesWhatItCannotUse(t *testing.T) {
	if _, err := Open("memcache://h", ""); err == nil || !strings.Contains(err.Error(), "neither a directory nor") {
		t.Errorf("a memcache URL: %v", err)
	}
	if _, err := Open("", ""); err == nil || !strings.Contains(err.Error(), "no state directory") {
		t.Errorf("no directory: %v", err)
	}
	open := t.TempDir()
	os.MkdirAll(filepath.Join(open, "spent"), 0o777)
	os.Chmod(filepath.Join(open, "spent"), 0o777)
	if _, err := Open(open, ""); err == nil || !strings.Contains(err.Error(), "make it 0700") {
		t.Errorf("an open directory: %v", err)
	}
	s, err := Open("redis://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if first, err := s.Spend(context.Background(), "x", time.Now().Add(time.Minute)); first || err == nil || !strings.Contains(err.Error(), "cannot be reached") {
		t.Errorf("a Redis that does not answer must fail the spend: %v %v", first, err)
	}
	if !strings.Contains(s.String(), "127.0.0.1:1") || strings.Contains(fmt.Sprint(redacted("redis://u:pw@h:1")), "pw") {
		t.Errorf("names: %s, %s", s, redacted("redis://u:pw@h:1"))
	}
}

// BenchmarkR10Spend is one spend in the local store; with
// AIMON_GW_BENCH_REDIS=HOST:PORT, in that Redis too (one round trip).
func BenchmarkR10Spend(b *testing.B) {
	stores := map[string]string{"local": b.TempDir()}
	if addr := os.Getenv("AIMON_GW_BENCH_REDIS"); addr != "" {
		stores["redis"] = "redis://" + addr
	}
	for name, spec := range stores {
		b.Run(name, func(b *testing.B) {
			s, err := Open(spec, "")
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			until := time.Now().Add(time.Minute)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := s.Spend(context.Background(), fmt.Sprint(name, i, time.Now().UnixNano()), until); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
