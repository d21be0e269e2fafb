package policy

import (
	"maps"
	"slices"
	"testing"
)

// TestP16SortedIsTheGenerationsTools: the sorted names and surfaces a
// decision reads from its generation (the sandbox's writers and readers,
// rule P16) are Names and SurfaceRefs, kept once made; a tool a load adds
// after they were made is in them (the count differs), and a generation
// made from this one keeps its own (issue 49).
func TestP16SortedIsTheGenerationsTools(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Echo: schema.#Echo}
subagents: narrow: "allowed-tools": ["Read"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Sorted(); !slices.Equal(got, []string{"Echo", "Read"}) || !slices.Equal(got, g.Names()) {
		t.Fatalf("Sorted is %q, Names %q", got, g.Names())
	}
	if got := g.SortedSurfaces(); !slices.Equal(got, g.SurfaceRefs()) || got[0] != "agent" {
		t.Fatalf("SortedSurfaces is %q, SurfaceRefs %q", got, g.SurfaceRefs())
	}
	if a, b := g.Sorted(), g.Sorted(); &a[0] != &b[0] {
		t.Error("Sorted was made again: it is to be kept")
	}
	// A copy that shares what was kept, with a tool more, sorts its own.
	out := *g
	out.Tools = maps.Clone(g.Tools)
	out.Tools["Alpha"] = g.Tools["Echo"]
	if got := out.Sorted(); !slices.Equal(got, []string{"Alpha", "Echo", "Read"}) {
		t.Errorf("a generation made from it sorts %q, want its own tools", got)
	}
	// A load adds tools as it compiles: the kept names were made too early.
	g.Tools["Zed"] = g.Tools["Echo"]
	defer delete(g.Tools, "Zed")
	if got := g.Sorted(); !slices.Equal(got, []string{"Echo", "Read", "Zed"}) {
		t.Errorf("after a tool was added Sorted is %q", got)
	}
	var bare Generation // none kept: made each time
	bare.Tools = map[string]*Tool{"B": nil, "A": nil}
	if got := bare.Sorted(); !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("a bare generation sorts %q", got)
	}
}
