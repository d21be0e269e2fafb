package allow

import (
	"testing"

	"cuelang.org/go/cue"
)

// cueAllows decides a subject with CUE alone, the reference the derived
// matchers are held to.
func cueAllows(e *Effective, tool, subj string) bool {
	r := e.rules[tool]
	return r.field.Unify(e.ctx.Encode(subj)).Validate(cue.Concrete(true)) == nil
}

// TestDerivedMatcherIsUsed: command and path constraints, unified along a
// chain, compile to matchers, so that decisions do not unify per call.
func TestDerivedMatcherIsUsed(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Bash(ls)", "Read(/a/**)", "Read(/b/*.go)", "Write(/x/[!./]*)"}, []string{"Bash(git log:*)", "Read(/a/b/**)", "Read", "Write"})
	three := chain(t, []string{"Bash(git:*)", "Read(/a/**)"}, []string{"Bash", "Read(/a/b/**)"}, []string{"Bash(git log:*)", "Read(/a/b/c/*)"})
	for _, e := range []*Effective{e, three} {
		for tool, r := range e.rules {
			if r.m == nil {
				t.Errorf("%s: no matcher derived from %v", tool, r.field)
			}
		}
	}
	if three.rules["Bash"].m.match("git status") || !three.rules["Bash"].m.match("git log") {
		t.Errorf("the derived matcher lost a level of the chain")
	}
}

// FuzzDerivedAgreesWithCUE holds the derived matcher to the unified CUE
// value for any two lists and any subject.
func FuzzDerivedAgreesWithCUE(f *testing.F) {
	for _, s := range [][3]string{
		{"git:*", "git log:*", "git log -1"}, {"git:*", "ls", "ls"}, {"/a/**", "/a/b/*", "/a/b/c"},
		{"/a/{b,c}/**", "**/*.go", "/a/c/x.go"}, {"x", "x:*", "x"}, {"[", "/a", "/a"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, p1, p2, subj string) {
		if !validUTF8(subj) {
			return
		}
		l1, _ := Compile(testCtx, []string{"Bash(" + p1 + ")", "Read(" + p1 + ")", "Write", "Write(" + p2 + ")"}, testSubjects)
		l2, _ := Compile(testCtx, []string{"Bash(" + p2 + ")", "Bash", "Read(" + p2 + ")", "Write"}, testSubjects)
		for _, ls := range [][]*List{{l1}, {l2}, {l1, l2}, {l2, l1, l2}} {
			e, err := Chain(ls...)
			if err != nil {
				t.Fatal(err)
			}
			for tool, r := range e.rules {
				if r.m == nil {
					continue
				}
				if got, want := r.m.match(subj), cueAllows(e, tool, subj); got != want {
					t.Fatalf("%s %q: matcher %v, CUE %v, constraint %v", tool, subj, got, want, r.field)
				}
			}
		}
	})
}

// BenchmarkDecide measures one decision against a cached chain: through the
// derived matcher, and through CUE unification for comparison.
func BenchmarkDecide(b *testing.B) {
	e := chain(b, []string{"Bash(git:*)", "Bash(go test:*)", "Read(/work/**)", "Read(/tmp/**)"}, []string{"Bash(git log:*)", "Bash(git status)", "Read(/work/src/**)", "Read"})
	in := map[string]any{"command": "git log --oneline -20"}
	pin := map[string]any{"file_path": "src/pkg/x.go"}
	b.Run("command", func(b *testing.B) {
		for b.Loop() {
			if !e.Decide("Bash", in, "/work").Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			if !e.Decide("Read", pin, "/work").Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("command-cue-only", func(b *testing.B) {
		for b.Loop() {
			if !cueAllows(e, "Bash", "git log --oneline -20") {
				b.Fatal("denied")
			}
		}
	})
}

// TestP10AllowsIsNotListing pins the caution that decided the design:
// cue.Value.Allows says yes for a tool the intersection closed off, so
// Listed looks the field up and checks its error instead.
func TestP10AllowsIsNotListing(t *testing.T) {
	e := chain(t, []string{"Read", "Write"}, []string{"Read", "Grep"})
	if e.Listed("Write") || e.Listed("Grep") || !e.Listed("Read") {
		t.Errorf("Listed: Write %v Grep %v Read %v", e.Listed("Write"), e.Listed("Grep"), e.Listed("Read"))
	}
	if f := e.Value().LookupPath(cue.MakePath(cue.Str("Write").Optional())); f.Err() == nil {
		t.Errorf("the unified value keeps Write: %v", e.Value())
	}
}

// BenchmarkChain compares computing a chain's effective list with taking
// it from the per-generation cache, which is why Chains exists.
func BenchmarkChain(b *testing.B) {
	agent := compile(b, "Bash(git:*)", "Bash(go test:*)", "Read(/work/**)", "Read(/tmp/**)", "Write(/work/**)", "Grep", "Glob")
	skill := compile(b, "Bash(git log:*)", "Read(/work/src/**)", "Read", "Grep")
	b.Run("compute", func(b *testing.B) {
		for b.Loop() {
			if _, err := Chain(agent, skill); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c Chains
		for b.Loop() {
			if _, err := c.Get("agent\x00skill:x", agent, skill); err != nil {
				b.Fatal(err)
			}
		}
	})
}
