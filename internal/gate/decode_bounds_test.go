package gate

import (
	"reflect"
	"strings"
	"testing"
)

// TestS4DecodedSizeIsBounded: an input of many small values within the line
// limit is refused by count, before it is all held in memory (issue 11).
func TestS4DecodedSizeIsBounded(t *testing.T) {
	lim := DefaultLimits
	lim.MaxValues = 1000
	tests := []struct {
		note string
		in   string
		ok   bool
	}{
		{"at the bound", `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", 998), ",") + `]}`, true},
		{"one past", `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", 1000), ",") + `]}`, false},
		{"nested arrays count too", `{"a":[` + strings.TrimSuffix(strings.Repeat("[1,2],", 400), ",") + `]}`, false},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Decode([]byte(tc.in), lim)
			if (err == nil) != tc.ok {
				t.Fatalf("Decode = %v, want ok %v", err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "more than 1000 values") {
				t.Errorf("error %q does not say the bound", err)
			}
		})
	}
}

// FuzzDecodeFastIsSlow: the one-pass decoding and the token-by-token one
// accept the same inputs and give the same values (issue 21: a hand-written
// check is fuzzed against encoding/json's own reading).
func FuzzDecodeFastIsSlow(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"x":1},{"x":1,"x":2}]}`,
		`{"a":"x:y"}`, `{"a\":":1}`, `{"a":1e999}`, `{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"a":1} x`, `[1]`, `null`, `{"\u00e9":1,"é":2}`, `{"a":"\ud800"}`} {
		f.Add([]byte(s))
	}
	lim := DefaultLimits
	lim.MaxKeys, lim.MaxItems, lim.MaxString, lim.MaxValues, lim.MaxDepth, lim.MaxKeyLen = 4, 4, 8, 20, 6, 6
	f.Fuzz(func(t *testing.T, data []byte) {
		slow, serr := decodeSlow(data, lim)
		fast, ok := decodeFast(data, lim)
		if ok && serr != nil {
			t.Fatalf("%q: the fast path accepts what the slow one refuses: %v", data, serr)
		}
		if ok && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q: fast %v, slow %v", data, fast, slow)
		}
		// The one-pass scanner too: what it accepts, as the slow path reads it.
		if sc, ok := scan(data, lim); ok && (serr != nil || !reflect.DeepEqual(sc, slow)) {
			t.Fatalf("%q: the scanner gives %v where the slow path gives %v, %v", data, sc, slow, serr)
		}
		got, err := Decode(data, lim)
		if (err == nil) != (serr == nil) || err != nil && err.Error() != serr.Error() || err == nil && !reflect.DeepEqual(got, slow) {
			t.Fatalf("%q: Decode %v %v, slow %v %v", data, got, err, slow, serr)
		}
	})
}
