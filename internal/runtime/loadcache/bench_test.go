package loadcache

import (
	"path/filepath"
	"testing"

	"aimon.dev/gw/internal/core/policy"
)

// BenchmarkHit is a verified restore of the team example: what one hook
// call pays instead of a load.
func BenchmarkHit(b *testing.B) {
	dir, _ := filepath.Abs("../../../examples/policies/team")
	c := &Cache{Dir: b.TempDir()}
	load := func() (*policy.Generation, error) { return policy.Load(dir, policy.WithWorkdir("/tmp")) }
	if _, hit, err := c.Load(dir, load, policy.WithWorkdir("/tmp")); err != nil || hit {
		b.Fatal(err, hit)
	}
	for b.Loop() {
		if _, hit, err := c.Load(dir, load, policy.WithWorkdir("/tmp")); err != nil || !hit {
			b.Fatal(err, hit)
		}
	}
}

// BenchmarkMiss is the load the cache stands for.
func BenchmarkMiss(b *testing.B) {
	dir, _ := filepath.Abs("../../../examples/policies/team")
	for b.Loop() {
		if _, err := policy.Load(dir, policy.WithWorkdir("/tmp")); err != nil {
			b.Fatal(err)
		}
	}
}
