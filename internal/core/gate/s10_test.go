package gate

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"aimon.dev/gw/tools"
)

type readInput struct {
	FilePath string `json:"file_path"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
}

type editInput struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll *bool  `json:"replace_all"`
}

// The gate and a tool's typed binding give the same sentence for the same
// fault (rule S10), except where S11 lets the binding coerce "10".
func TestS10GateAndBindAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	values := []any{nil, "x", "10", true, json.Number("3"), json.Number("3.0"), json.Number("2.5"), map[string]any{}, []any{}}
	for _, tc := range []struct {
		def   string
		names []string
		dst   func() any
	}{
		{"#ReadInput", []string{"file_path", "offset", "limit"}, func() any { return &readInput{} }},
		{"#EditInput", []string{"file_path", "old_string", "new_string", "replace_all"}, func() any { return &editInput{} }},
	} {
		g := builtinGate(t, tc.def)
		for range 300 {
			in := map[string]any{}
			for _, n := range tc.names {
				if r.IntN(4) != 0 {
					in[n] = values[r.IntN(len(values))]
				}
			}
			if spellsNumber(in) {
				continue // S11: the binding may coerce it
			}
			gate := sentenceSet(g.Check(in))
			bind := sentenceSet(tools.Bind(in, tc.dst()))
			if !slices.Equal(gate, bind) {
				b, _ := json.Marshal(in)
				t.Errorf("%s %s:\ngate %q\nbind %q", tc.def, b, gate, bind)
			}
		}
	}
}

func spellsNumber(in map[string]any) bool {
	for _, v := range in {
		if s, ok := v.(string); ok {
			if _, err := strconv.ParseFloat(s, 64); err == nil {
				return true
			}
		}
	}
	return false
}

func sentenceSet(vs []tools.Violation) []string {
	var s []string
	for _, v := range vs {
		s = append(s, v.Sentence)
	}
	slices.Sort(s)
	return s
}
