package gateway

import (
	"encoding/json"
	"slices"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/provision"
)

// TestP14EntryPlacesFollowTheChain: a decision's entries are placed
// surface by surface, root first, the same text a second time on the next
// surface that writes it (the agent's Read, then the subagent's), and an
// entry no surface left writes has no place; as the map of texts placed
// them, for the few entries a decision names and for the many an own rule
// may (issue 49 replaced the map under a few dozen).
func TestP14EntryPlacesFollowTheChain(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Echo: schema.#Echo, Read: schema.#Read}
agent: "allowed-tools": ["Echo", "Read"]
subagents: narrow: "allowed-tools": ["Read"]
`, nil)
	chain := []string{"agent", "subagent:narrow"}
	_, d := g.Decide(chain, Call{ID: "a", Name: "Read", Input: json.RawMessage(`{"file_path":"/x"}`)})
	if !d.Allowed || !slices.Equal(d.Entries, []string{"Read", "Read"}) || len(d.EntryAt) != 2 || d.EntryAt[0] == d.EntryAt[1] {
		t.Fatalf("Read on the chain: allowed %v by %q at %q, want both surfaces' Read at their own places", d.Allowed, d.Entries, d.EntryAt)
	}
	cur := g.enter()
	defer cur.Exit()
	for _, entries := range [][]string{
		{"Read", "Echo", "Read", "Read"},
		slices.Repeat([]string{"Read", "Echo", "Read", "Missing"}, 10), // 40: past the look-back
	} {
		d := rule.Decision{Allowed: true, Entries: entries}
		got, want := entryPlaces(cur, chain, d, g.opts.Workdir), placesByMap(cur, chain, d)
		if !slices.Equal(got, want) {
			t.Errorf("%d entries: placed at %q, want %q", len(entries), got, want)
		}
		if len(got) != 3 {
			t.Errorf("%d entries: %d places, want 3 (Echo and Read on the agent, Read on the subagent)", len(entries), len(got))
		}
	}
}

// placesByMap is entryPlaces's allow-list placing as it was written with
// a map of the texts placed: the reference the look-back must equal.
func placesByMap(cur *provision.Generation, chain []string, d rule.Decision) []string {
	var out []string
	refs := policy.Rooted(chain)
	from := map[string]int{}
	for _, e := range d.Entries {
		for i := from[e]; i < len(refs); i++ {
			if s := cur.Surfaces[refs[i]]; s != nil {
				if at, ok := cur.PlaceText(s, e, "allowed-tools"); ok {
					out = append(out, at)
					from[e] = i + 1
					break
				}
			}
		}
	}
	return out
}
