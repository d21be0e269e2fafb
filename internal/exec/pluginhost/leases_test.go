package pluginhost

import (
	"context"
	"sync"
	"time"

	"aimon.dev/gw/tools"
)

// The tests speak of a host as one owner would: Describe and Tool hold one
// lease per Spec, and Retain releases those not kept, as a reload that
// drops a plugin does.
var testLeases struct {
	mu sync.Mutex
	m  map[*Host]map[string]*Lease
}

func (h *Host) lease(s Spec) *Lease {
	testLeases.mu.Lock()
	defer testLeases.mu.Unlock()
	if testLeases.m == nil {
		testLeases.m = map[*Host]map[string]*Lease{}
	}
	if testLeases.m[h] == nil {
		testLeases.m[h] = map[string]*Lease{}
	}
	l := testLeases.m[h][s.key()]
	if l == nil {
		l = h.Acquire(s)
		testLeases.m[h][s.key()] = l
	}
	return l
}

func (h *Host) Describe(ctx context.Context, s Spec) ([]ToolInfo, error) {
	return h.lease(s).Describe(ctx)
}

func (h *Host) Tool(s Spec, name string, timeout time.Duration) tools.Tool {
	return h.lease(s).Tool(name, timeout)
}

func (h *Host) Retain(specs []Spec) {
	keep := map[string]bool{}
	for _, s := range specs {
		keep[s.key()] = true
	}
	testLeases.mu.Lock()
	var drop []*Lease
	for k, l := range testLeases.m[h] {
		if !keep[k] {
			drop = append(drop, l)
			delete(testLeases.m[h], k)
		}
	}
	testLeases.mu.Unlock()
	for _, l := range drop {
		l.Release()
	}
}
