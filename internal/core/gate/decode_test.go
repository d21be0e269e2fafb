package gate

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	lim := Limits{MaxDepth: 3, MaxKeys: 3, MaxKeyLen: 5, MaxString: 5, MaxItems: 2}
	cases := []struct{ in, err string }{
		{`{"a": 1, "b": [true, null], "c": {"d": "xx"}}`, ""},
		{`{"a": 1.50}`, ""},
		{` {} `, ""},
		{`{"a": 1, "a": 2}`, `the input gives the name "a" twice; send each parameter once`},
		{`{"o": {"a": 1, "a": 2}}`, `'o' gives the name "a" twice; send each parameter once`},
		{`{"a": {"b": {"c": {}}}}`, "'a.b.c' is nested more than 3 levels deep"},
		{`{"a": [[[]]]}`, "'a[0][0]' is nested more than 3 levels deep"},
		{`{"a": 1, "b": 2, "c": 3, "d": 4}`, "the input has more than 3 names"},
		{`{"abcdef": 1}`, `the input has a name of 6 bytes ("abcdef"); at most 5 are accepted`},
		{`{"a": "123456"}`, "'a' is a string of 6 bytes; at most 5 are accepted"},
		{`{"a": [1, 2, 3]}`, "'a' has more than 2 items"},
		{`{"a": [1, {"b": 1e99999}]}`, "'a[1].b' is a number too large to check (1e99999)"},
		{`[1]`, "the input must be a JSON object, got an array"},
		{`"x"`, `the input must be a JSON object, got string "x"`},
		{`null`, "the input must be a JSON object, got null"},
		{`{} {}`, "the input has data after its object; send one JSON object"},
		{`{"a": 1`, "the input is not valid JSON: unexpected EOF"},
		{``, "the input is not valid JSON: unexpected EOF"},
		{`{"a" 1}`, "the input is not valid JSON"},
		{`{"a": tru}`, "the input is not valid JSON"},
	}
	for _, tc := range cases {
		m, err := Decode([]byte(tc.in), lim)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
		case tc.err == "":
			var want map[string]any
			d := json.NewDecoder(strings.NewReader(tc.in))
			d.UseNumber()
			if err := d.Decode(&want); err != nil {
				t.Fatal(err)
			}
			if mb, wb := mustJSON(m), mustJSON(want); mb != wb {
				t.Errorf("%s: decoded %s, encoding/json %s", tc.in, mb, wb)
			}
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// FuzzDecode: no panic, and what Decode accepts encoding/json reads the same.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"a": [1, {"b": "c"}], "d": null}`, `{"a": 1, "a": 2}`, `{"a": {"b": {"c": {"d": {}}}}}`, `[]`, `{"\u00e9": 1e5}`} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxDepth: 8, MaxKeys: 16, MaxKeyLen: 32, MaxString: 1 << 10, MaxItems: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, lim)
		if err != nil {
			return
		}
		var want map[string]any
		d := json.NewDecoder(strings.NewReader(string(data)))
		d.UseNumber()
		if err := d.Decode(&want); err != nil {
			t.Fatalf("Decode accepted %q, encoding/json: %v", data, err)
		}
		if mustJSON(m) != mustJSON(want) {
			t.Fatalf("%q: decoded %s, encoding/json %s", data, mustJSON(m), mustJSON(want))
		}
	})
}

// TestReadTextIsReadString: ReadText reads a string as ReadString does,
// with its bytes beside it, escapes and all, and fails where it fails
// (issue 32: an OpenAI call's arguments).
func TestReadTextIsReadString(t *testing.T) {
	for _, tc := range []struct{ note, in string }{
		{note: "plain", in: `"{\"m\":1}"`},
		{note: "no escapes", in: `"abc"`},
		{note: "empty", in: `""`},
		{note: "Go's escapes", in: `"a \u003c b \u0026\u0026 c \u003e d"`},
		{note: "Python's escapes and a surrogate pair", in: `"Gr\u00fc\u00dfe \ud83d\ude42"`},
		{note: "bad input: a lone surrogate", in: `"\ud800"`},
		{note: "bad input: cut short", in: `"abc`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			d := NewTextDecoder([]byte(tc.in), tc.in)
			text, data, err := d.ReadText()
			d.Release()
			d = NewTextDecoder([]byte(tc.in), tc.in)
			want, werr := d.ReadString()
			d.Release()
			if text != want || (err == nil) != (werr == nil) || string(data) != text {
				t.Errorf("ReadText = %q, %q, %v; ReadString = %q, %v", text, data, err, want, werr)
			}
		})
	}
}
