package allow

import (
	"testing"

	"cuelang.org/go/cue/cuecontext"
)

func TestP3CommandPatternsMeet(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"git:*", "git log:*", true},
		{"git log:*", "git:*", true},
		{"git:*", "git", true},
		{"git:*", "gitk", false},
		{"git:*", "gitk:*", false},
		{"make:*", "git:*", false},
		{"make test", "make test", true},
		{"make test", "make lint", false},
		{"make:*", "make test", true},
		{"go test:*", "go:*", true},
		{"go test:*", "go vet:*", false},
	} {
		if got := CommandPatternsMeet(tt.a, tt.b); got != tt.want {
			t.Errorf("CommandPatternsMeet(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}

// FuzzCommandPatternsMeet holds CommandPatternsMeet to the lattice: when it
// says two patterns do not meet, no command built from them passes the
// unification of the two lists; when it says they meet, one does.
func FuzzCommandPatternsMeet(f *testing.F) {
	f.Add("git:*", "git log:*")
	f.Add("make test", "make:*")
	f.Add("go:*", "gofmt:*")
	f.Fuzz(func(t *testing.T, a, b string) {
		subjects := map[string]Subject{"Bash": {Field: "command", Kind: Command}}
		ctx := cuecontext.New()
		la, errs := Compile(ctx, []string{"Bash(" + a + ")"}, subjects)
		if len(errs) > 0 {
			return
		}
		lb, errs := Compile(ctx, []string{"Bash(" + b + ")"}, subjects)
		if len(errs) > 0 {
			return
		}
		e, err := Chain(la, lb)
		if err != nil {
			return
		}
		var candidates []string
		for _, p := range []string{a, b} {
			base := p
			if len(p) > 2 && p[len(p)-2:] == ":*" {
				base = p[:len(p)-2]
			}
			candidates = append(candidates, base, base+" x", p)
		}
		met := false
		for _, c := range candidates {
			if e.Decide("Bash", map[string]any{"command": c}, "/").Allowed {
				met = true
			}
		}
		if met != CommandPatternsMeet(a, b) {
			t.Fatalf("CommandPatternsMeet(%q, %q) = %v, but the lattice allows a command of both: %v", a, b, !met, met)
		}
	})
}
