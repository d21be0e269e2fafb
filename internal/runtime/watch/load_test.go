package watch

import (
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
)

// Edits while calls run concurrently: every call is decided under one whole
// generation, old or new, never a mix, and every call finishes.
func TestR3EditUnderLoad(t *testing.T) {
	versions := [][]string{{"Read", "Echo"}, {"Read", "Echo", "Glob", "Grep"}}
	want := map[string][]string{} // revision → the tools of that generation
	for _, v := range versions {
		want[revision(t, map[string]string{"policy.cue": source(v...)})] = v
	}
	dir := policyDir(t, map[string]string{"policy.cue": source(versions[0]...)})
	h := start(t, dir, Options{})

	var (
		stop              atomic.Bool
		started, finished atomic.Int64
		wg                sync.WaitGroup
		mu                sync.Mutex
		seen              = map[string]int{}
		bad               []string
	)
	// call decides one call the way the gateway does: it takes the generation
	// in force once, and uses only that one until it finishes.
	call := func() {
		started.Add(1)
		defer finished.Add(1)
		g := h.cur.Load()
		tools, ok := want[g.Revision]
		for range 3 { // the generation must not change under a running call
			names := make([]string, 0, len(g.Tools))
			for n, tool := range g.Tools {
				if tool == nil || tool.Name != n || tool.Gate == nil {
					ok = false
				}
				names = append(names, n)
			}
			slices.Sort(names)
			agent := g.Surfaces["agent"]
			if !ok || !slices.Equal(names, sorted(tools)) || agent == nil || !slices.Equal(sorted(agent.Entries), sorted(tools)) {
				mu.Lock()
				bad = append(bad, g.Revision)
				mu.Unlock()
				return
			}
			runtime.Gosched()
		}
		mu.Lock()
		seen[g.Revision]++
		mu.Unlock()
	}
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				call()
			}
		})
	}

	const edits = 6
	for i := 1; i <= edits; i++ {
		src := source(versions[i%2]...)
		write(t, filepath.Join(dir, "policy.cue"), src)
		h.waitRevision(t, revision(t, map[string]string{"policy.cue": src}))
	}
	stop.Store(true)
	wg.Wait()

	if len(bad) > 0 {
		t.Errorf("%d calls saw a generation whose tools do not match its revision (%v)", len(bad), bad[:min(len(bad), 5)])
	}
	if s, f := started.Load(), finished.Load(); s != f || s == 0 {
		t.Errorf("%d calls started, %d finished; want all of them finished", s, f)
	}
	if len(seen) != len(versions) {
		t.Errorf("calls ran under %d revisions; want both: %v", len(seen), seen)
	}
	if g := h.w.Status().Generation; g < edits+1 {
		t.Errorf("generation %d after %d edits; want at least %d", g, edits, edits+1)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// TestR5LoadDuringTheDebounceCountsOnlyUnchangedFiles edits the policy
// while the reload's load, which runs during the debounce (issue 32), has
// read the files and not yet returned: that load's generation never goes
// in force, and the edit after it does.
func TestR5LoadDuringTheDebounceCountsOnlyUnchangedFiles(t *testing.T) {
	srcA, srcB := source("Read", "Echo"), source("Read", "Echo", "Grep")
	dir := policyDir(t, map[string]string{"policy.cue": source("Read")})
	revA, revB := revision(t, map[string]string{"policy.cue": srcA}), revision(t, map[string]string{"policy.cue": srcB})
	var loads atomic.Int64
	read, wrote := make(chan struct{}), make(chan struct{})
	h := start(t, dir, Options{Load: func(d string) (*policy.Generation, error) {
		g, err := policy.Load(d)
		if loads.Add(1) == 2 { // the first reload: it has read A
			close(read)
			<-wrote
		}
		return g, err
	}})
	write(t, filepath.Join(dir, "policy.cue"), srcA)
	<-read
	write(t, filepath.Join(dir, "policy.cue"), srcB)
	close(wrote)
	deadline := time.After(waitLimit)
	for h.w.Status().Revision != revB {
		select {
		case s := <-h.statuses:
			if s.Revision == revA {
				t.Fatalf("the load of %s, edited while it ran, went in force", revA)
			}
		case <-deadline:
			t.Fatalf("the edit %s was not in force within %v; status %+v\nlogs:\n%s", revB, waitLimit, h.w.Status(), h.logs)
		}
	}
	if n := loads.Load(); n < 3 {
		t.Errorf("%d loads; the edited one must have been loaded again", n)
	}
}
