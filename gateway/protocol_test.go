package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/gate"
)

func TestDecodeForms(t *testing.T) {
	tests := []struct {
		name, line string
		check      func(*request) bool
	}{
		{"tool_use", `{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a","limit":3.0}}`,
			func(r *request) bool {
				return r.Type == "tool_use" && r.ID == "t1" && r.Name == "Read" && string(r.Input) == `{"file_path":"/a","limit":3.0}`
			}},
		{"assistant message", `{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"a","name":"Echo","input":{}}]}`,
			func(r *request) bool {
				return r.Role == "assistant" && len(r.Content) == 2 && r.Content[1].Name == "Echo"
			}},
		{"assistant text content", `{"role":"assistant","content":"just text"}`,
			func(r *request) bool { return r.hasContent && len(r.Content) == 0 }},
		{"list_tools", `{"type":"list_tools","format":"mcp"}`,
			func(r *request) bool { return r.Type == "list_tools" && r.Format == "mcp" }},
		{"surface", `{"type":"list_tools","surface":["agent","skill:lint"]}`,
			func(r *request) bool { return len(r.Surface) == 2 && r.Surface[1] == "skill:lint" }},
		{"unknown fields are ignored", `{"type":"tool_use","id":"x","name":"Echo","input":{},"cache_control":{"type":"ephemeral"}}`,
			func(r *request) bool { return r.ID == "x" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := decode([]byte(tt.line))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !tt.check(r) {
				t.Errorf("decoded %+v", r)
			}
		})
	}
}

func TestR2DecodeBadLines(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"not json", `not json`, "not valid JSON"},
		{"truncated", `{"type":"tool_use"`, "not valid JSON"},
		{"array", `[1,2]`, "not an object"},
		{"string", `"hello"`, "not an object"},
		{"two values", `{} {}`, "more than one JSON value"},
		{"content not blocks", `{"role":"assistant","content":[1]}`, "content block 0 is a JSON number, not an object"},
		// Issue 19: what a stricter parser upstream saw and what runs cannot differ.
		{"a name twice in the envelope", `{"type":"tool_use","id":"a","name":"Echo","name":"Bash","input":{}}`, `gives the name "name" twice`},
		{"a name twice in a block", `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Echo","name":"Bash","input":{}}]}`, `content block 0 gives the name "name" twice`},
		{"a lone surrogate in the id", `{"type":"tool_use","id":"a\ud800","name":"Echo","input":{}}`, "could not name it"},
		{"invalid UTF-8", "{\"type\":\"tool_use\",\"id\":\"a\xff\",\"name\":\"Echo\",\"input\":{}}", "not valid UTF-8"},
		{"null", `null`, "the line is JSON null, not an object"},
		{"too deep", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "not an object"},
		{"too deep in an object", `{"input":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "nested deeper than 10000 levels"},
		{"surface not list", `{"type":"list_tools","surface":"agent"}`, `field "surface"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("decode(%q) = %v, want an error containing %q", tt.line, err, tt.want)
			}
		})
	}
}

func TestReadLineLimit(t *testing.T) {
	long := strings.Repeat("x", 100)
	br := bufio.NewReaderSize(strings.NewReader("short\n"+long+"\nnext\r\nlast"), 16)
	want := []struct {
		line string
		err  error
	}{{"short", nil}, {"", errTooLong}, {"next", nil}, {"last", io.EOF}}
	for i, w := range want {
		line, err := readLine(br, 50)
		if string(line) != w.line || !errors.Is(err, w.err) {
			t.Fatalf("line %d: got %q, %v; want %q, %v", i, line, err, w.line, w.err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"type":"tool_use","id":"a","name":"Read","input":{"file_path":"/x"}}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Echo","input":{"message":"m"}}]}`,
		`{"type":"list_tools","format":"openai"}`, `{`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := decode(line)
		if (r == nil) == (err == nil) {
			t.Fatalf("decode returned %v and %v", r, err)
		}
	})
}

// TestR2LineLimitCountsContent: the limit counts a line's content without
// its terminator, both ways (issue 19).
func TestR2LineLimitCountsContent(t *testing.T) {
	x := strings.Repeat("x", 10)
	tests := []struct {
		note  string
		input string
		ok    bool
	}{
		{"the limit, newline", x + "\n", true},
		{"the limit, CRLF", x + "\r\n", true},
		{"the limit, no terminator", x, true},
		{"one over, no terminator", x + "y", false},
		{"one over, newline", x + "y\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			line, err := readLine(bufio.NewReaderSize(strings.NewReader(tc.input), 16), 10)
			if tc.ok != (err == nil || err == io.EOF) || tc.ok && string(line) != x {
				t.Errorf("readLine = %q, %v; want ok %v", line, err, tc.ok)
			}
		})
	}
}

// TestR2OnlyJSONWhitespaceIsBlank: lines of other white space get an error
// line, not silence (issue 19).
func TestR2OnlyJSONWhitespaceIsBlank(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	for _, l := range []string{"\u00a0", "\v", "\f", "\u2028", "\u0085"} {
		var out strings.Builder
		if err := g.Serve(t.Context(), strings.NewReader(l+"\n"), &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), `"type":"error"`) {
			t.Errorf("line %q got %q; want an error line", l, out.String())
		}
	}
	var out strings.Builder
	g.Serve(t.Context(), strings.NewReader(" \t\r\n\n"), &out)
	if out.Len() != 0 {
		t.Errorf("a JSON-blank line got %q", out.String())
	}
}

// TestR2MessagesAPIResponse: a Messages API response, type "message", is
// an assistant message as it came and is answered as one; "message" with
// another role, or beside a lone call's fields, is not.
func TestR2MessagesAPIResponse(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	for _, tc := range []struct{ note, line, want string }{
		{"a response as it came",
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Echo","input":{"message":"hi"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1}}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"hi","is_error":false}]}`},
		{"a response that calls no tool",
			`{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn"}`,
			`no tool_use block`},
		{"a user message", `{"type":"message","role":"user","content":[]}`, `must have role \"assistant\"`},
		{"a lone call's type beside a role", `{"type":"tool_use","role":"assistant","id":"t","name":"Echo","input":{}}`, `both \"role\"`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if out := string(g.Handle(t.Context(), []byte(tc.line))); !strings.Contains(out, tc.want) {
				t.Errorf("%s\ngot  %s\nwant %s", tc.line, out, tc.want)
			}
		})
	}
}

// TestR2BlocksSkipOnlyWhatTheExactReadingIgnores: the one pass drops a
// member of another kind only under a name decodeExact does not read, so
// a member decodeExact would refuse or use is never dropped unseen.
func TestR2BlocksSkipOnlyWhatTheExactReadingIgnores(t *testing.T) {
	for _, name := range lineNames {
		if name == "content" {
			continue
		}
		line := `{"role":"assistant","content":[],` + strconv.Quote(name) + `:{"x":1}}`
		if name == "role" {
			line = `{"content":[],"role":{"x":1}}`
		}
		if _, ok := decodeBlocks([]byte(line)); ok {
			t.Errorf("decodeBlocks dropped %q, which decodeExact reads: %s", name, line)
		}
	}
	for _, name := range blockNames {
		line := `{"role":"assistant","content":[{` + strconv.Quote(name) + `:[1]}]}`
		if _, ok := decodeBlocks([]byte(line)); ok {
			t.Errorf("decodeBlocks dropped the block member %q, which blocks reads: %s", name, line)
		}
	}
	if _, ok := decodeBlocks([]byte(`{"role":"assistant","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"usage":{"n":1},"stop_sequence":null}`)); !ok {
		t.Error("decodeBlocks did not drop members decodeExact ignores")
	}
}

// TestR2AmbiguousLines: a line that is two forms at once is refused.
func TestR2AmbiguousLines(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	out := string(g.Handle(t.Context(), []byte(`{"role":"assistant","type":"tool_use","id":"x","name":"Echo","input":{"message":"top"},"content":[{"type":"tool_use","id":"y","name":"Echo","input":{"message":"inner"}}]}`)))
	if !strings.Contains(out, `both \"role\"`) || strings.Contains(out, "inner") || strings.Contains(out, "top") {
		t.Errorf("ambiguous line: %s", out)
	}
	out = string(g.Handle(t.Context(), []byte(`{"type":"tool_use","id":"x","NAME":"Bash","name":"Echo","input":{"message":"exact"}}`)))
	if !strings.Contains(out, `"content":"exact"`) {
		t.Errorf("names must match exactly (NAME is not name): %s", out)
	}
}

// TestS5IntegersAreExact: an integer is carried exactly to the tool, one
// too large for it is out of range, never "not an integer" (issue 19).
func TestS5IntegersAreExact(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\nvalidation: \"enforce\"\n", nil)
	tests := []struct{ note, input, want string }{
		{"past 2^53, exact", `{"message":"x","times":9007199254740993}`, "'times' 9007199254740993 would make"},
		{"larger than int64", `{"message":"x","times":99999999999999999999999}`, "from -9223372036854775808 to 9223372036854775807, got number 99999999999999999999999, which is out of range"},
		{"3.0 is 3", `{"message":"ab","times":3.0}`, "ababab"},
		{"a long message, no times", `{"message":"` + strings.Repeat("m", 1<<20+1) + `"}`, "Parameter 'message' is"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			out := string(g.Handle(t.Context(), []byte(`{"type":"tool_use","id":"1","name":"Echo","input":`+tc.input+`}`)))
			if !strings.Contains(out, tc.want) || strings.Contains(out, "must be an integer, got") {
				t.Errorf("reply %.300s; want %q", out, tc.want)
			}
		})
	}
}

// referenceMembers is the token-by-token reading members replaced: the
// scanner of members is held to it for equal acceptance and the same
// duplicate (issue 21: a hand-written scanner is fuzzed against
// encoding/json).
func referenceMembers(data []byte) (names []string, dup string, hasDup, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, "", false, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "", false, false
		}
		k := tok.(string)
		if seen[k] && !hasDup {
			dup, hasDup = k, true
		}
		seen[k] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "", false, false
		}
		names = append(names, k)
	}
	if _, err := dec.Token(); err != nil {
		return nil, "", false, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false, false
	}
	return names, dup, hasDup, true
}

func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"a":1,"a":2},"b":[{"a":1}]}`, `{"a\"b":1,"a\"b":2}`, `{"\u0061":1,"a":2}`,
		`{"a":"}","b":"{","a":3}`, `[1]`, `null`, `{"a":1} {}`, `{"a":`, ` {"x" : [ "," , {"y":1} ] , "x":1} `, `{"a":1,"b":2,"c":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := members(data, "the line")
		names, dup, hasDup, ok := referenceMembers(data)
		switch {
		case ok && !hasDup && err != nil:
			t.Fatalf("%q: members refuses (%v) what encoding/json reads as an object", data, err)
		case ok && hasDup && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q twice", dup))):
			t.Fatalf("%q: members = %v, want the duplicate %q", data, err, dup)
		case !ok && err == nil:
			t.Fatalf("%q: members accepts what encoding/json does not: %v", data, m)
		case ok && !hasDup && len(m) != len(names):
			t.Fatalf("%q: %d members, want %d", data, len(m), len(names))
		}
	})
}

// FuzzR2ItemIsDecode: a line the one-pass reading takes gives the request
// the exact reading gives it, with the input gate.Decode reads from it
// (issue 21: the same verdict and sentence on every input).
func FuzzR2ItemIsDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"m1","times":2}}`,
		`{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"m1","times":"2"}}`,
		`{"type":"tool_use","id":"c\nd","name":"Echo","input":{"a":[1,{"b":null}]}}`,
		`{"type":"tool_use","id":"c1","id":"c2","name":"Echo","input":{}}`,
		`{"type":"tool_use","id":"\ud800","name":"Echo","input":{}}`,
		`{"type":"tool_use","name":"Echo","input":{},"surface":["agent"]}`,
		`{"type":"list_tools"}`, `{"type":"tool_use","input":{"x":1e999}}`,
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"Echo","arguments":"{\"message\":\"m\"}","status":"completed"}`,
		`{"type":"function_call","call_id":"call_1","name":"Echo","arguments":""}`,
		`{"type":"function_call","call_id":"call_1","name":"Echo"}`,
		`{"type":"function_call","call_id":"\ud800","name":"Echo","arguments":"{}"}`,
		`{"type":"function_call","call_id":"c","name":"Echo","arguments":"{}","arguments":"{}"}`,
		`{"type":"function_call","call_id":"c","name":"Echo","arguments":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := decodeItem(line)
		if !ok {
			return
		}
		exact, err := decodeExact(line)
		if err != nil {
			t.Fatalf("%q: the one pass reads a line the exact reading refuses: %v", line, err)
		}
		if exact.Input == nil {
			if fast.decoded != nil || fast.Input != nil {
				t.Fatalf("%q: the one pass read an input the exact reading did not", line)
			}
		} else if in, err := gate.Decode(exact.Input, gate.DefaultLimits); err != nil || !reflect.DeepEqual(in, fast.decoded) {
			t.Fatalf("%q: input %v, gate.Decode %v %v", line, fast.decoded, in, err)
		}
		fast.decoded, fast.Input, exact.Input = nil, nil, nil
		if !reflect.DeepEqual(fast, exact) {
			t.Fatalf("%q: one pass %+v, exact %+v", line, fast, exact)
		}
	})
}

// TestR2ItemsTakeTheOnePass: the common lines are read in one pass, so the
// fuzz tests above compare a path that is taken.
func TestR2ItemsTakeTheOnePass(t *testing.T) {
	for _, line := range []string{
		`{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"m1","times":2}}`,
		` {"name":"Read","input":{"file_path":"/tmp/a b\tc"},"id":"toolu_01","type":"tool_use"} `,
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"Echo","arguments":"{\"message\":\"m\"}","status":"completed"}`,
	} {
		if _, ok := decodeItem([]byte(line)); !ok {
			t.Errorf("not read in one pass: %s", line)
		}
	}
	for _, msg := range []string{
		`{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a"}},{"type":"tool_use","id":"toolu_2","name":"Echo","input":{"message":"m"}}]}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Echo","arguments":"{\"message\":\"x\"}"}}]}`,
	} {
		if _, ok := decodeMessage([]byte(msg)); !ok {
			t.Errorf("not read in one pass: %s", msg)
		}
	}
	for _, msg := range []string{
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Reading.","signature":"x"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a"}}]}`,
		`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":2}}`,
	} {
		if _, ok := decodeBlocks([]byte(msg)); !ok {
			t.Errorf("not read block by block: %s", msg)
		}
	}
}

// FuzzR1AppendResultIsMarshal: the reply serve writes without encoding/json
// is the bytes marshal writes, whatever the id and content hold.
func FuzzR1AppendResultIsMarshal(f *testing.F) {
	for _, s := range []string{"m1m1", "", "a\"b\\c", "line\nnext\t<&>", "é\u2028\u2029", "\x00\x7f", "\xff\xfe"} {
		f.Add("c1", s, false)
		f.Add(s, "x", true)
	}
	f.Fuzz(func(t *testing.T, id, content string, isErr bool) {
		r := result{Type: "tool_result", ToolUseID: id, Content: content, IsError: isErr}
		if got, want := appendResult([]byte("prefix"), r), append([]byte("prefix"), marshal(r)...); !bytes.Equal(got, want) {
			t.Fatalf("appendResult %q, marshal %q", got, want)
		}
	})
}

// FuzzR2MessageIsDecode: an assistant message the one-pass reading takes
// gives the request the exact reading gives it, each block's input as
// gate.Decode reads it from its bytes (issue 21).
func FuzzR2MessageIsDecode(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"x","times":2}}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Echo","input":{"a":1,"a":2}}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Echo"}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"Echo","input":null}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"\ud800","name":"E","input":{}}]}`,
		`{"role":"assistant","content":"text"}`, `{"role":"user","content":[]}`, `{"role":"assistant","content":null}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Echo","arguments":"{\"message\":\"x\"}"}}]}`,
		`{"role":"assistant","tool_calls":[{"id":"call_1","function":{"name":"Echo"}},{"id":"call_2","type":"function","function":{"arguments":""}}]}`,
		`{"role":"assistant","tool_calls":null}`, `{"role":"assistant","tool_calls":[{"id":3}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"c","name":"E","input":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}]}`,
		`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"x"},"cache_control":{"type":"ephemeral"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":1}}`,
		`{"type":"message","role":"assistant","content":[],"strict":true}`, `{"role":"assistant","content":[],"surface":null}`,
		`{"role":"assistant","content":[{"type":1}]}`, `{"role":"assistant","content":[],"format":"x","name":"n","call_id":"c","object":"o"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := decodeMessage(line)
		if !ok {
			return
		}
		exact, err := decodeExact(line)
		if err != nil {
			t.Fatalf("%q: the one pass reads a message the exact reading refuses: %v", line, err)
		}
		if len(fast.Content) != len(exact.Content) {
			t.Fatalf("%q: %d blocks, exact %d", line, len(fast.Content), len(exact.Content))
		}
		for i, b := range exact.Content {
			fb := fast.Content[i]
			if (fb.decoded == nil) != (len(b.Input) == 0) {
				t.Fatalf("%q: block %d has an input in one reading only", line, i)
			}
			if fb.decoded != nil {
				in, err := gate.Decode(b.Input, gate.DefaultLimits)
				if err != nil || !reflect.DeepEqual(in, fb.decoded) {
					t.Fatalf("%q: block %d input %v, gate.Decode %v %v", line, i, fb.decoded, in, err)
				}
			}
			fast.Content[i].decoded, exact.Content[i].Input = nil, nil
		}
		if !reflect.DeepEqual(fast, exact) {
			t.Fatalf("%q: one pass %+v, exact %+v", line, fast, exact)
		}
	})
}

// FuzzR1AppendUserMessageIsMarshal: the user message serve writes without
// encoding/json is the bytes marshal writes.
func FuzzR1AppendUserMessageIsMarshal(f *testing.F) {
	f.Add("c1", "ok", "c2", "a\"\n<é>", true)
	f.Fuzz(func(t *testing.T, id1, c1, id2, c2 string, isErr bool) {
		for _, rs := range [][]result{nil, {}, {{Type: "tool_result", ToolUseID: id1, Content: c1}}, {{Type: "tool_result", ToolUseID: id1, Content: c1}, {Type: "tool_result", ToolUseID: id2, Content: c2, IsError: isErr}}} {
			if got, want := appendUserMessage(nil, rs), marshal(userMessage{Role: "user", Content: rs}); !bytes.Equal(got, want) {
				t.Fatalf("appendUserMessage %q, marshal %q", got, want)
			}
		}
	})
}

// TestR2LoneLineIsAnsweredAtOnce: a line with nothing after it is answered
// while the input stays open, as an agent that waits for the answer before
// it sends more needs: replies are held back only while more lines wait
// (issue 21).
func TestR2LoneLineIsAnsweredAtOnce(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, inR, outW) }()
	defer func() {
		cancel()
		inW.Close()
		outR.Close()
		<-done
	}()
	replies := bufio.NewReader(outR)
	for i := range 3 {
		fmt.Fprintf(inW, `{"type":"tool_use","id":"c%d","name":"Echo","input":{"message":"m"}}`+"\n", i)
		got := make(chan string, 1)
		go func() {
			line, _ := replies.ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			if !strings.Contains(line, fmt.Sprintf(`"tool_use_id":"c%d"`, i)) {
				t.Fatalf("reply %d: %s", i, line)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("line %d, alone, is not answered while the input stays open", i)
		}
	}
}
