package gateway

import (
	"context"
	"sync"
)

// pool is the gateway's one pool of parallel slots (rule K3), shared by
// every batch whatever generation it runs under. A reload resizes it rather
// than adding a second pool beside the first.
type pool struct {
	mu   sync.Mutex
	size int
	used int
	wake chan struct{} // closed when a slot may have become free
}

func newPool(size int) *pool { return &pool{size: max(1, size), wake: make(chan struct{})} }

// acquire takes a slot, or returns false when ctx ends first.
func (p *pool) acquire(ctx context.Context) bool {
	for {
		p.mu.Lock()
		if p.used < p.size {
			p.used++
			p.mu.Unlock()
			return true
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

func (p *pool) release() {
	p.mu.Lock()
	p.used--
	p.signal()
	p.mu.Unlock()
}

// resize sets the number of slots; calls holding slots keep them.
func (p *pool) resize(size int) {
	p.mu.Lock()
	p.size = max(1, size)
	p.signal()
	p.mu.Unlock()
}

func (p *pool) signal() {
	close(p.wake)
	p.wake = make(chan struct{})
}
