package gate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestS4ScanReadsCommonInputs: the one pass reads what tool calls usually
// hold, so that it is the path taken, and as the exact path reads it.
func TestS4ScanReadsCommonInputs(t *testing.T) {
	for _, in := range []string{
		`{}`, ` { "file_path" : "/srv/a.go" , "limit": 3 } `, `{"message":"m1","times":2}`,
		`{"command":"go test ./...\n","timeout":120000,"description":"Run the tests"}`,
		`{"a":[1,2.5,-0,1e3,1E+2,-3.25e-2],"b":{"c":null,"d":true,"e":false},"f":[]}`,
		`{"content":"line one\nline \"two\"\t\\ end \/","é":"ünï"}`,
		`{"edits":[{"old_string":"x","new_string":"y"},{"old_string":"","new_string":"z"}]}`,
	} {
		got, ok := scan([]byte(in), DefaultLimits)
		if !ok {
			t.Errorf("the scanner does not read %s", in)
			continue
		}
		want, err := decodeSlow([]byte(in), DefaultLimits)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: scanner %v, exact path %v %v", in, got, want, err)
		}
	}
}

// TestS4ScanLeavesTheRestToTheExactPaths: what the scanner does not read, or
// a limit refuses, goes to the paths that give the sentence.
func TestS4ScanLeavesTheRestToTheExactPaths(t *testing.T) {
	lim := DefaultLimits
	lim.MaxKeys, lim.MaxItems, lim.MaxString, lim.MaxDepth, lim.MaxKeyLen = 2, 2, 4, 3, 4
	for _, tc := range []struct{ note, in string }{
		{"a name given twice", `{"a":1,"a":2}`},
		{"a \\u escape", `{"a":"\u00e9"}`},
		{"a lone surrogate", `{"a":"\ud800"}`},
		{"invalid UTF-8", "{\"a\":\"\xff\"}"},
		{"a control character", "{\"a\":\"\x01\"}"},
		{"a leading zero", `{"a":01}`},
		{"a bare fraction", `{"a":1.}`},
		{"a plus sign", `{"a":+1}`},
		{"a trailing comma", `{"a":1,}`},
		{"data after the object", `{"a":1} 2`},
		{"not an object", `[1]`},
		{"too many names", `{"a":1,"b":2,"c":3}`},
		{"too many items", `{"a":[1,2,3]}`},
		{"too long a string", `{"a":"abcde"}`},
		{"too long a name", `{"abcde":1}`},
		{"too deep", `{"a":{"b":{"c":{}}}}`},
		{"a number too large to check", `{"a":1e99999}`},
		{"a truncated literal", `{"a":tru}`},
		{"no end", `{"a":1`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if m, ok := scan([]byte(tc.in), lim); ok {
				t.Fatalf("the scanner read %q as %v", tc.in, m)
			}
		})
	}
}

// FuzzS4EnvelopeIsDecode: a line the one pass reads gives the strings and
// the input that encoding/json and Decode give it.
func FuzzS4EnvelopeIsDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"m","times":2}}`,
		`{"type":"tool_use","id":"c1","name":"Echo","input":{"a":1},"id":"c2"}`,
		`{"type":"tool_use","input":{},"name":"\u0045cho"}`, `{"input":[]}`, `{"x":1,"input":{}}`,
		`{"type":"a\nb","input":{"a":{"b":[1,{"c":null}]}}} `,
		`{"type":"function_call","arguments":"{\"a\":1}"}`, `{}`, `{"input":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got := map[string]string{}
		in, raw, ok := Envelope(line, "input", DefaultLimits, func(name, v string) bool {
			got[name] = v
			return name != "refuse"
		})
		if !ok {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(line, &top); err != nil {
			t.Fatalf("%q: Envelope reads what encoding/json refuses: %v", line, err)
		}
		read := len(got)
		if in != nil {
			read++
		}
		if len(top) != read {
			t.Fatalf("%q: %d names, Envelope read %d", line, len(top), read)
		}
		for name, v := range got {
			var want string
			if err := json.Unmarshal(top[name], &want); err != nil || want != v {
				t.Fatalf("%q: %s is %q, encoding/json says %q (%v)", line, name, v, want, err)
			}
		}
		if _, has := top["input"]; !has {
			if in != nil || raw != nil {
				t.Fatalf("%q: Envelope read an input the line does not have", line)
			}
			return
		}
		want, err := decodeSlow(top["input"], DefaultLimits)
		if err != nil || !reflect.DeepEqual(in, want) || strings.TrimSpace(string(raw)) != strings.TrimSpace(string(top["input"])) {
			t.Fatalf("%q: input %v (%s), Decode %v %v", line, in, raw, want, err)
		}
	})
}

// FuzzS4EnvelopesIsDecode: what Envelopes reads is what encoding/json reads
// of the line, member by member, with each object's input as Decode reads
// it on its own.
func FuzzS4EnvelopesIsDecode(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"m","times":2}}]}`,
		`{"role":"assistant","content":[]}`, `{"role":"assistant"}`, `{"content":[{"input":{}},{"input":{}}]}`,
		`{"content":[{"input":{"a":1},"input":{}}]}`, `{"content":[{}],"content":[]}`, `{"content":[{"a":"b"},]}`,
		`{"content":[{"input":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}]}`,
		`{"type":"message","content":[{"input":{},"skip_cache":{"a":[1]}}],"skip_usage":{"n":1},"skip_stop":null}`,
		`{"content":[],"noskip":1}`, `{"content":[],"skip":{"a":1,"a":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		top := map[string]string{}
		var items []map[string]string
		skipped := map[int]int{} // by item, -1 for the line
		ins, ok := Envelopes(line, "content", "input", DefaultLimits, func(item int, name, v string) bool {
			if item < 0 {
				top[name] = v
				return name != "refuse"
			}
			for len(items) <= item {
				items = append(items, map[string]string{})
			}
			items[item][name] = v
			return true
		}, func(item int, name string) bool {
			if strings.HasPrefix(name, "skip") {
				skipped[item]++
				return true
			}
			return false
		})
		if !ok {
			return
		}
		var whole map[string]json.RawMessage
		if err := json.Unmarshal(line, &whole); err != nil {
			t.Fatalf("%q: Envelopes reads what encoding/json refuses: %v", line, err)
		}
		if len(whole) != len(top)+skipped[-1]+1 {
			t.Fatalf("%q: %d names, Envelopes read %d", line, len(whole), len(top)+skipped[-1]+1)
		}
		for name, v := range top {
			var want string
			if err := json.Unmarshal(whole[name], &want); err != nil || want != v {
				t.Fatalf("%q: %s is %q, encoding/json says %q (%v)", line, name, v, want, err)
			}
		}
		var blocks []map[string]json.RawMessage
		if err := json.Unmarshal(whole["content"], &blocks); err != nil || len(blocks) != len(ins) {
			t.Fatalf("%q: %d objects, encoding/json reads %d (%v)", line, len(ins), len(blocks), err)
		}
		for i, b := range blocks {
			strs := 0
			if i < len(items) {
				strs = len(items[i])
				for name, v := range items[i] {
					var want string
					if err := json.Unmarshal(b[name], &want); err != nil || want != v {
						t.Fatalf("%q: object %d's %s is %q, encoding/json says %q (%v)", line, i, name, v, want, err)
					}
				}
			}
			raw, has := b["input"]
			if has {
				strs++
			}
			strs += skipped[i]
			if len(b) != strs {
				t.Fatalf("%q: object %d has %d names, Envelopes read %d", line, i, len(b), strs)
			}
			if !has {
				if ins[i] != nil {
					t.Fatalf("%q: object %d has an input only Envelopes sees", line, i)
				}
				continue
			}
			want, err := decodeSlow(raw, DefaultLimits)
			if err != nil || !reflect.DeepEqual(ins[i], want) {
				t.Fatalf("%q: object %d input %v, Decode %v %v", line, i, ins[i], want, err)
			}
		}
	})
}
