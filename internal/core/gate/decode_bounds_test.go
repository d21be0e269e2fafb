package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
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

// FuzzS4DecodeIsJSON: Decode accepts exactly the inputs encoding/json
// reads as an object, less those with a name given twice at any depth or
// invalid UTF-8 (what jsontext's validation refuses) and those past the
// limits, and yields encoding/json's values (issue 26: one reader, held to
// encoding/json rather than to a second reader of the project's own).
func FuzzS4DecodeIsJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"x":1},{"x":1,"x":2}]}`,
		`{"a":"x:y"}`, `{"a\":":1}`, `{"a":1e999}`, `{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
		`{"a":1} x`, `[1]`, `null`, `{"\u00e9":1,"é":2}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00\u0041"}`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	lim := DefaultLimits
	lim.MaxKeys, lim.MaxItems, lim.MaxString, lim.MaxValues, lim.MaxDepth, lim.MaxKeyLen = 4, 4, 8, 20, 6, 6
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		err := d.Decode(&want)
		if err == nil {
			if _, end := d.Token(); end != io.EOF {
				err = errors.New("data after the object")
			}
		}
		accept := err == nil && want != nil && jsontext.Value(data).IsValid() && Within(want, lim)
		got, gerr := Decode(data, lim)
		switch {
		case accept && gerr != nil:
			t.Fatalf("%q: encoding/json reads %v, Decode refuses: %v", data, want, gerr)
		case !accept && gerr == nil:
			t.Fatalf("%q: Decode accepts %v, which the reference refuses (%v)", data, got, err)
		case accept && !reflect.DeepEqual(got, want):
			t.Fatalf("%q: Decode %v, encoding/json %v", data, got, want)
		}
	})
}
