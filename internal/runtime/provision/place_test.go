package provision

import (
	"testing"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/policy"
)

// TestP10PlaceIsTheSurfaces: a generation's index of where entries are
// written answers as the surface's own scan, for every entry of every list
// (the first place of one written twice; none past the positions known)
// and for entries it does not hold (issue 32).
func TestP10PlaceIsTheSurfaces(t *testing.T) {
	at := func(line int) policy.Position { return policy.Position{File: "policy.cue", Line: line, Col: 3} }
	s := &policy.Surface{
		Ref:       "agent",
		Entries:   []string{"Read", "Bash(git:*)", "Read", "Grep", "Glob"},
		EntryPos:  []policy.Position{at(1), at(2), at(3), at(4)},
		Denied:    []string{"Bash(rm:*)", "Write"},
		DeniedPos: []policy.Position{at(7), at(8)},
		Asked:     []string{"Read(/etc/**)"},
	}
	g := &Generation{}
	for _, tc := range []struct{ note, key, entry string }{
		{note: "an allow entry", key: "allowed-tools", entry: "Bash(git:*)"},
		{note: "an entry written twice", key: "allowed-tools", entry: "Read"},
		{note: "an entry past the positions known", key: "allowed-tools", entry: "Glob"},
		{note: "a denied entry", key: allow.DeniedTools, entry: "Write"},
		{note: "an allow entry looked up among the denied", key: allow.DeniedTools, entry: "Grep"},
		{note: "an ask entry without positions", key: allow.AskTools, entry: "Read(/etc/**)"},
		{note: "bad input: an entry not written", key: "allowed-tools", entry: "Edit"},
		{note: "bad input: an unknown key reads the allow list", key: "allowedTools", entry: "Grep"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			want, wok := s.Place(tc.entry, tc.key)
			got, ok := g.Place(s, tc.entry, tc.key)
			if got != want || ok != wok {
				t.Errorf("Place(%s, %s) = %v %v; the surface's scan %v %v", tc.entry, tc.key, got, ok, want, wok)
			}
			if text, ok := g.PlaceText(s, tc.entry, tc.key); ok != wok || ok && text != want.String() {
				t.Errorf("PlaceText(%s, %s) = %q %v; the surface's scan %q %v", tc.entry, tc.key, text, ok, want.String(), wok)
			}
		})
	}
}
