package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamplePoliciesAreSound keeps the shipped examples loading with no
// problem for vet to report: users copy them.
func TestExamplePoliciesAreSound(t *testing.T) {
	dirs, err := os.ReadDir("../../../examples/policies")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		n++
		t.Run(d.Name(), func(t *testing.T) {
			g, err := Load(filepath.Join("../../../examples/policies", d.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range Vet(g) {
				t.Error(p)
			}
		})
	}
	if n < 1 {
		t.Errorf("found %d example policies, want the team one at least", n)
	}
	// The embedded default policy is vetted beside the code that embeds it.
	g, err := Load("../defaultpolicy")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Vet(g) {
		t.Error(p)
	}
}
