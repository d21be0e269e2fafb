package gate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// TestS4SaveNeedsCUE: a gate that decides some inputs through CUE is not
// saved, so a cache can never hold half a gate.
func TestS4SaveNeedsCUE(t *testing.T) {
	v := cuecontext.New().CompileString(`#In: {a: int, b?: int & >a}`)
	g, err := Compile(v.LookupPath(cue.ParsePath("#In")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Save(); !errors.Is(err, ErrNeedsCUE) {
		t.Fatalf("Save of a schema with a cross-field bound = %v, want ErrNeedsCUE", err)
	}
}

// TestS4RestoreBadInput: what is not a saved gate is an error, never a gate.
func TestS4RestoreBadInput(t *testing.T) {
	for _, tc := range []struct{ note, data, want string }{
		{"not JSON", `{"Root":`, "unexpected end"},
		{"no schema", `{"Limits":{}}`, "has no schema"},
		{"a field without a schema", `{"Root":{"Kinds":32,"Fields":{"a":{"Required":true}}}}`, `field "a" has no schema`},
		{"a regular expression that does not compile", `{"Root":{"Kinds":16,"Checks":[{"Op":1,"Re":"("}]}}`, "missing closing )"},
		{"a bad name pattern", `{"Root":{"Kinds":32,"Allow":[{"Re":"[z-a]"}]}}`, "invalid character class range"},
		{"nested deeper than a compiled schema", `{"Root":` + strings.Repeat(`{"Elem":`, 40) + `{}` + strings.Repeat(`}`, 40) + `}`, "deeper"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			g, err := restoreJSON([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, %v; want an error saying %q", g, err, tc.want)
			}
		})
	}
}

func restoreJSON(data []byte) (*Gate, error) {
	var s Saved
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return Restore(&s)
}

// FuzzS4RestoredGate: no byte string makes Restore panic, and what it accepts
// saves again to what it read.
func FuzzS4RestoredGate(f *testing.F) {
	for _, c := range diffGates(f) {
		if s, err := c.gate.Save(); err == nil {
			data, _ := json.Marshal(s)
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := restoreJSON(data)
		if err != nil {
			return
		}
		if _, err := g.Save(); err != nil {
			t.Fatalf("a restored gate does not save: %v", err)
		}
		g.Check(map[string]any{"a": "x", "b": []any{1.5, nil}})
	})
}

// TestS4SavedFormKeepsEmptyApart: the saved form leaves zero fields out of
// its JSON, but an empty enum (which refuses every value) is not a missing
// one (which refuses none): it survives the round trip and still refuses.
func TestS4SavedFormKeepsEmptyApart(t *testing.T) {
	for _, tc := range []struct {
		note    string
		enum    []scalar
		refuses bool
	}{
		{"no enum", nil, false},
		{"an enum of nothing", []scalar{}, true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			a := &node{kinds: kAll, enum: tc.enum}
			g := &Gate{root: &node{kinds: kObject, fields: map[string]*field{"a": {node: a}}, names: []string{"a"}}, lim: DefaultLimits}
			s, err := g.Save()
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			r, err := restoreJSON(data)
			if err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if got := r.root.fields["a"].node.enum != nil; got != (tc.enum != nil) {
				t.Fatalf("%s: restored enum present = %v, want %v", data, got, tc.enum != nil)
			}
			if v := r.Check(map[string]any{"a": "x"}); (len(v) > 0) != tc.refuses {
				t.Fatalf("%s: Check({a: x}) = %v, want refused %v", data, v, tc.refuses)
			}
		})
	}
}
