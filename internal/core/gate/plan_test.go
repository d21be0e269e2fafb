package gate

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
)

// TestS4EncodeNeedsCUE: a gate that decides some inputs through CUE does
// not encode, so a cache can never hold half a gate.
func TestS4EncodeNeedsCUE(t *testing.T) {
	v := cuecontext.New().CompileString(`#In: {a: int, b?: int & >a}`)
	g, err := Compile(v.LookupPath(cue.ParsePath("#In")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(g); !errors.Is(err, ErrNeedsCUE) {
		t.Fatalf("encoding a schema with a cross-field bound = %v, want ErrNeedsCUE", err)
	}
}

// TestS4DecodeBadInput: what is not an encoded gate is an error, never a gate.
func TestS4DecodeBadInput(t *testing.T) {
	for _, tc := range []struct{ note, data, want string }{
		{"not JSON", `{"Root":`, "unexpected end"},
		{"no schema", `{"Limits":{}}`, "has no schema"},
		{"a field without a schema", `{"Root":{"Kinds":32,"Fields":{"a":{"Required":true}}}}`, `field "a" has no schema`},
		{"a regular expression that does not compile", `{"Root":{"Kinds":16,"Checks":[{"Op":1,"Re":"("}]}}`, "missing closing )"},
		{"a regular expression without its operator", `{"Root":{"Kinds":16,"Checks":[{"Op":1,"Re":"a"}]}}`, "does not go with its operator"},
		{"a match without its regular expression", `{"Root":{"Kinds":16,"Checks":[{"Op":` + jsonOp(cue.RegexMatchOp) + `}]}}`, "does not go with its operator"},
		{"a bad name pattern", `{"Root":{"Kinds":32,"Allow":[{"Re":"[z-a]"}]}}`, "invalid character class range"},
		{"a name pattern without its expression", `{"Root":{"Kinds":32,"Allow":[{}]}}`, "no regular expression"},
		{"a member no schema has", `{"Root":{"Kinds":32,"Feilds":{}}}`, `a gate's schema has no field "Feilds"`},
		{"kinds beyond a byte", `{"Root":{"Kinds":256}}`, "256 is not an unsigned integer of 8 bits"},
		{"a limit that is a string", `{"Limits":{"MaxKeys":"many"},"Root":{}}`, "a string where a number belongs"},
		{"a check's bound that is not an object", `{"Root":{"Kinds":4,"Checks":[{"Op":13,"Num":3}]}}`, "a number where an object belongs"},
		{"a shape that needs CUE", `{"Root":{"Kinds":32,"CUE":true}}`, "needs CUE"},
		{"nested deeper than a compiled schema", `{"Root":` + strings.Repeat(`{"Elem":`, 40) + `{}` + strings.Repeat(`}`, 40) + `}`, "deeper"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			var g Gate
			if err := json.Unmarshal([]byte(tc.data), &g); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decoding %s = %v; want an error saying %q", tc.data, err, tc.want)
			}
		})
	}
}

func jsonOp(op cue.Op) string { b, _ := json.Marshal(op); return string(b) }

// roundTrip encodes g and decodes it again; the decoded gate must be the
// compiled one's values exactly, and encode to the same bytes. It returns
// nil for a gate that needs CUE, which does not encode.
func roundTrip(t testing.TB, g *Gate) *Gate {
	t.Helper()
	data, err := json.Marshal(g)
	if errors.Is(err, ErrNeedsCUE) {
		return nil
	}
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var r Gate
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if !reflect.DeepEqual(r.root, decisive(g.root)) || r.lim != g.lim {
		t.Fatalf("the decoded gate differs from the compiled one: %s", data)
	}
	again, err := json.Marshal(&r)
	if err != nil || string(again) != string(data) {
		t.Fatalf("a decoded gate encodes differently (%v):\n%s\n%s", err, data, again)
	}
	return &r
}

// decisive is a copy of n without what only the JSON Schema export reads,
// which a plan does not encode (it keeps the export itself).
func decisive(n *node) *node {
	if n == nil {
		return nil
	}
	c := *n
	c.def, c.arms, c.required, c.noExport = nil, nil, nil, false
	if n.Fields != nil {
		c.Fields = map[string]*field{}
		for name, f := range n.Fields {
			c.Fields[name] = &field{Node: decisive(f.Node), Required: f.Required}
		}
	}
	if n.Checks != nil {
		c.Checks = slices.Clone(n.Checks)
		for i := range c.Checks {
			c.Checks[i].js = ""
		}
	}
	c.Extra, c.Elem = decisive(n.Extra), decisive(n.Elem)
	return &c
}

// TestS4GatesRoundTrip: every gate of the differential suite that encodes
// decodes to its own values (the random schemas' checks do the same).
func TestS4GatesRoundTrip(t *testing.T) {
	encoded := 0
	for _, c := range diffGates(t) {
		if roundTrip(t, c.gate) != nil {
			encoded++
		}
	}
	if encoded == 0 {
		t.Fatal("no gate of the suite encodes: the round trip is not tested")
	}
}

// FuzzS4DecodedGate: no byte string makes decoding panic, and what decodes
// encodes again to what was read and checks an input without a panic.
func FuzzS4DecodedGate(f *testing.F) {
	for _, c := range diffGates(f) {
		if data, err := json.Marshal(c.gate); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Gate
		if json.Unmarshal(data, &g) != nil {
			return
		}
		if _, err := json.Marshal(&g); err != nil {
			t.Fatalf("a decoded gate does not encode: %v", err)
		}
		g.Check(map[string]any{"a": "x", "b": []any{1.5, nil}})
	})
}

// TestS4EncodingKeepsEmptyApart: the encoding leaves zero fields out, but
// an empty enum (which refuses every value) is not a missing one (which
// refuses none): it survives the round trip and still refuses.
func TestS4EncodingKeepsEmptyApart(t *testing.T) {
	for _, tc := range []struct {
		note    string
		enum    []scalar
		refuses bool
	}{
		{"no enum", nil, false},
		{"an enum of nothing", []scalar{}, true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			a := &node{Kinds: kAll, Enum: tc.enum}
			g := &Gate{root: &node{Kinds: kObject, Fields: map[string]*field{"a": {Node: a}}, names: []string{"a"}}, lim: DefaultLimits}
			r := roundTrip(t, g)
			if got := r.root.Fields["a"].Node.Enum != nil; got != (tc.enum != nil) {
				t.Fatalf("decoded enum present = %v, want %v", got, tc.enum != nil)
			}
			if v := r.Check(map[string]any{"a": "x"}); (len(v) > 0) != tc.refuses {
				t.Fatalf("Check({a: x}) = %v, want refused %v", v, tc.refuses)
			}
		})
	}
}
