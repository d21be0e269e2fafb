package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/gate"
)

// FuzzR7ReadCallsIsJSON: the reader takes a tool_use line exactly when
// encoding/json reads it as one, less a name given twice at any depth,
// invalid UTF-8 or a lone surrogate escape (which encoding/json turns into
// U+FFFD), and yields encoding/json's values, so what a stricter
// parser upstream saw is what runs (rules R2, R7; issue 26).
//
// "The reader" is ReadCalls and then the reading of the call's input that
// every front end does before deciding (Decide: an absent input refused
// by R2, else gate.Decode under gate.DefaultLimits unless ReadCalls decoded
// it already). The property is over what it promises:
//   - lines of the members type, id, name and input only: it ignores other
//     names (they are other forms' or unknown), so those lines are skipped;
//   - a type other than "tool_use" that is a call form ("function_call") is
//     skipped; any other type is refused;
//   - an id or name absent or null reads as "", as encoding/json reads
//     null into a string; the call is then answered, not the line;
//   - an id holding U+FFFD (a lone surrogate decodes to it) is refused
//     (validIDs: its reply could not name it);
//   - inputs past gate.DefaultLimits (depth 64, 256 names, numbers too
//     large for the gate, ...) are refused by design, so lines whose input
//     gate.Within finds past them are skipped; the line's own depth bound is
//     encoding/json's (10000).
func FuzzR7ReadCallsIsJSON(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool_use","id":"a","name":"Echo","input":{"message":"m","times":2}}`,
		` {"type" : "tool_use" , "id":"a","name":"Echo","input":{ }} ` + "\n",
		`{"input":{"a":{"b":[1,2.50,-0,1e3,{"c":null}]}},"name":"Echo","id":"a","type":"tool_use"}`,
		// Duplicate names, plain and escaped, at every depth.
		`{"type":"tool_use","id":"a","id":"b","name":"Echo","input":{}}`,
		`{"type":"tool_use","type":"tool_use","id":"a","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"m":1,"m":2}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"m":1,"\u006d":2}}`,
		`{"type":"tool_use","id":"a","\u006eame":"Echo","name":"Bash","input":{}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"x":[{"k":1,"k":1}]}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"x":{"y":{"z":{"k":{},"k":[]}}}}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"m":1},"input":{"m":2}}`,
		// \u escapes, surrogate pairs and lone surrogates.
		`{"type":"tool_u\u0073e","id":"\ud83d\ude00","name":"Ec\u0068o","input":{"\ud83d\ude00":"\ud83d\ude00\u0000"}}`,
		`{"type":"tool_use","id":"\ud800","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a","name":"\udc00x","input":{"\ud800":"\udfff\ud800"}}`,
		`{"type":"tool_use","id":"\ufffd","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a\"\\\/\b\f\n\r\t","name":"Echo","input":{"s":"\u00e9\u2028"}}`,
		// Invalid UTF-8 and odd white space.
		"{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"Echo\",\"input\":{\"m\":\"\xff\"}}",
		"{\"type\":\"tool_use\",\"id\":\"\xc3\",\"name\":\"Echo\",\"input\":{}}",
		"{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"Echo\",\"input\":{\"\xed\xa0\x80\":1}}",
		"\u00a0{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"Echo\",\"input\":{}}",
		"\ufeff{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"Echo\",\"input\":{}}",
		// Nulls and other kinds.
		`{"type":"tool_use","id":null,"name":null,"input":{"a":null}}`,
		`{"type":"tool_use","name":"Echo","input":{}}`,
		`{"type":null,"id":"a","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":null}`,
		`{"type":"tool_use","id":"a","name":"Echo"}`,
		`{"type":"tool_use","id":1,"name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a","name":["Echo"],"input":{}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":[]}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":"{}"}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"n":1e999999}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"n":1E+2,"m":-0.0e-0}}`,
		// Other forms and broken lines.
		`{"type":"function_call","id":"a","name":"Echo","input":{}}`,
		`{"type":"list_tools","id":"a","name":"Echo","input":{}}`,
		`{"type":"message","id":"a","name":"Echo","input":{}}`,
		`{"TYPE":"tool_use","id":"a","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{}} {}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":{"a":1,}}`,
		`null`, `[]`, `"tool_use"`, ``,
		`{"type":"tool_use","id":"a","name":"Echo","input":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat(`}`, 64) + `}`,
		`{"type":"tool_use","id":"a","name":"Echo","input":` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		want, wantIn, accept, inDomain := referenceToolUse(line)
		if !inDomain {
			return
		}
		calls, surface, err := ReadCalls(line)
		var got Call
		var in map[string]any
		if err == nil {
			if len(calls) != 1 || surface != nil {
				t.Fatalf("%q: ReadCalls gave %d calls and surface %q, want one call and none", line, len(calls), surface)
			}
			got = calls[0]
			if in = got.Decoded; in == nil && len(got.Input) > 0 {
				if in, err = gate.Decode(got.Input, gate.DefaultLimits); err != nil {
					in = nil
				}
			}
		}
		switch {
		case accept && in == nil:
			t.Fatalf("%q: encoding/json reads a tool_use the reader refuses (%v; input %s)", line, err, got.Input)
		case !accept && in != nil:
			t.Fatalf("%q: the reader takes a line encoding/json does not read as a tool_use: %+v", line, got)
		case !accept:
			return
		}
		if got.ID != want.ID || got.Name != want.Name || got.Approvals != nil {
			t.Fatalf("%q: id %q name %q approvals %q, encoding/json id %q name %q", line, got.ID, got.Name, got.Approvals, want.ID, want.Name)
		}
		if !reflect.DeepEqual(in, wantIn) {
			t.Fatalf("%q: input %#v, encoding/json %#v", line, in, wantIn)
		}
		if got.Input != nil {
			if raw, ok := useNumber(got.Input); !ok || !reflect.DeepEqual(raw, wantIn) {
				t.Fatalf("%q: Call.Input %s reads as %#v, encoding/json %#v", line, got.Input, raw, wantIn)
			}
		}
	})
}

// referenceToolUse reads line with encoding/json as the tool_use that
// FuzzR7ReadCallsIsJSON holds the reader to: accept is whether the reader
// must take it, with the call c and its input in; inDomain is false for
// the lines outside the property (see there).
func referenceToolUse(line []byte) (c Call, in map[string]any, accept, inDomain bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(line, &top); err != nil || top == nil {
		return c, nil, false, true
	}
	for name := range top {
		switch name {
		case "type", "id", "name", "input":
		default:
			return c, nil, false, false
		}
	}
	// jsontext's validation (its defaults) refuses invalid UTF-8, a lone
	// surrogate escape and a name given twice at any depth.
	if !jsontext.Value(line).IsValid() {
		return c, nil, false, true
	}
	var typ string
	if json.Unmarshal(top["type"], &typ) != nil || typ == "" {
		return c, nil, false, true
	}
	if typ == "function_call" {
		return c, nil, false, false
	}
	if typ != "tool_use" {
		return c, nil, false, true
	}
	for name, dst := range map[string]*string{"id": &c.ID, "name": &c.Name} {
		if raw, ok := top[name]; ok && json.Unmarshal(raw, dst) != nil {
			return c, nil, false, true
		}
	}
	if strings.ContainsRune(c.ID, utf8.RuneError) {
		return c, nil, false, true
	}
	raw, ok := top["input"]
	if !ok {
		return c, nil, false, true
	}
	if in, ok = useNumber(raw); !ok {
		return c, nil, false, true
	}
	if !gate.Within(in, gate.DefaultLimits) {
		return c, nil, false, false
	}
	return c, in, true, true
}

// useNumber is raw read by encoding/json with UseNumber as an object; false
// for anything else (null included).
func useNumber(raw []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil || d.More() {
		return nil, false
	}
	return m, true
}

// FuzzR7OpenAIArgumentsAreDecode: an OpenAI call's arguments, JSON in a
// string written by any encoder (plain, Go's json.Marshal, Python's
// json.dumps with its \u escapes), read with the line (openaiInput) give
// exactly what gate.Decode of the arguments gives, value or sentence, in
// each form that carries them, and the call's Input is the arguments
// (issue 32: the OpenAI forms read in the line's pass).
func FuzzR7OpenAIArgumentsAreDecode(f *testing.F) {
	for _, s := range []string{`{"message":"m","times":2}`, `{}`, ``, `{"m":"Grüße 🙂 <&>"}`, `{"m":1,"m":2}`,
		`{"a":[1,2.50,{"b":null}]}`, `[]`, `{"m":"\ud83d\ude00"}`, `{"m":"\ud800"}`, `{} {}`, `{"a":`, "{\"m\":\"\xff\"}"} {
		for enc := range 3 {
			f.Add(s, uint8(enc))
		}
	}
	forms := []string{
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"Echo","arguments":%s}}]}`,
		`{"type":"function_call","call_id":"c","name":"Echo","arguments":%s}`,
		`{"object":"response","output":[{"type":"function_call","call_id":"c","name":"Echo","arguments":%s}]}`,
	}
	f.Fuzz(func(t *testing.T, args string, enc uint8) {
		if !utf8.ValidString(args) {
			t.Skip() // every encoder changes it
		}
		quoted := [](func(string) string){rawJSON, goJSON, pythonJSON}[enc%3](args)
		wantText := args
		if args == "" {
			wantText = "{}"
		}
		want, wantErr := gate.Decode([]byte(wantText), gate.DefaultLimits)
		for _, form := range forms {
			line := strings.Replace(form, "%s", quoted, 1)
			calls, _, err := ReadCalls([]byte(line))
			if err != nil || len(calls) != 1 {
				t.Fatalf("%s: %d calls, %v", line, len(calls), err)
			}
			c := calls[0]
			if string(c.Input) != wantText {
				t.Errorf("%s: Input %q, want %q", line, c.Input, wantText)
			}
			if !reflect.DeepEqual(c.Decoded, want) || fmt.Sprint(c.InputErr) != fmt.Sprint(wantErr) {
				t.Errorf("%s: read %#v (%v); gate.Decode %#v (%v)", line, c.Decoded, c.InputErr, want, wantErr)
			}
		}
	})
}
