package policy

import (
	"slices"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

// TestP12OnePerPlace: vet reports one problem per place, an error before a
// warning, and keeps problems that have no place (issue 33).
func TestP12OnePerPlace(t *testing.T) {
	at := func(line int) Position { return Position{File: "p.cue", Line: line, Col: 1} }
	for _, tc := range []struct {
		note string
		in   []Diagnostic
		want []rule.ID // codes, in order
	}{
		{"a misspelt tool and the list it empties: once",
			[]Diagnostic{{Pos: at(3), Code: "P12", Warning: true}, {Pos: at(3), Code: "P12b", Warning: true}, {Pos: at(3), Code: "P7", Warning: true}},
			[]rule.ID{"P12"}},
		{"an error wins over a warning at its place",
			[]Diagnostic{{Pos: at(3), Code: "P12", Warning: true}, {Pos: at(3), Code: "cue"}},
			[]rule.ID{"cue"}},
		{"different places are kept, in order",
			[]Diagnostic{{Pos: at(5), Code: "P10", Warning: true}, {Pos: at(3), Code: "cue"}},
			[]rule.ID{"cue", "P10"}},
		{"problems with no place are all kept",
			[]Diagnostic{{Code: "dir"}, {Code: "schema"}},
			[]rule.ID{"dir", "schema"}},
		{"nothing", nil, nil},
	} {
		var got []rule.ID
		for _, d := range OnePerPlace(tc.in) {
			got = append(got, d.Code)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.note, got, tc.want)
		}
	}
}
