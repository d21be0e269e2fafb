package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
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
		{"a lone surrogate in the id", `{"type":"tool_use","id":"a\ud800","name":"Echo","input":{}}`, "a lone surrogate such as \\ud800) at byte 26"},
		{"a lone surrogate in the input", `{"type":"tool_use","id":"a","name":"Echo","input":{"m":"\udfff"}}`, "a lone surrogate"},
		{"U+FFFD in the id", `{"type":"tool_use","id":"a\ufffd","name":"Echo","input":{}}`, "could not name it"},
		{"a literal", `nul`, "not valid JSON"},
		{"true", `true`, "the line is a JSON boolean, not an object"},
		{"content null block", `{"role":"assistant","content":[null]}`, "content block 0 is JSON null, not an object"},
		{"a tool call's function", `{"role":"assistant","tool_calls":[{"id":"c","function":[]}]}`, "tool call 0's function is a JSON array, not an object"},
		{"a name twice in a tool call", `{"role":"assistant","tool_calls":[{"id":"c","id":"d"}]}`, `tool call 0 gives the name "id" twice`},
		{"a response's output item", `{"object":"response","output":[{"type":"function_call","name":1}]}`, `output item 0 of the response: field "name" must be a string, not a JSON number`},
		{"a response's output", `{"output":{},"object":"response"}`, `field "output" of a response must be an array of items`},
		{"a string where a string is needed", `{"type":["tool_use"]}`, `field "type" must be a string, not a JSON array`},
		{"strict", `{"type":"list_tools","strict":"yes"}`, `field "strict" must be true or false`},
		{"approvals", `{"type":"tool_use","approvals":[1]}`, `field "approvals" must be an array`},
		{"content of another kind", `{"role":"assistant","content":{}}`, `field "content" must be an array of content blocks, or text`},
		{"data after the line", `{"type":"status"} x`, "more than one JSON value"},
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
		line, err := readLine(br, 50, nil)
		if string(line) != w.line || !errors.Is(err, w.err) {
			t.Fatalf("line %d: got %q, %v; want %q, %v", i, line, err, w.line, w.err)
		}
	}
}

// TestR1ReadLinesBatches: the whole lines buffered together are handed
// over in one batch, each as the same text in its string, a line over the
// limit in its place; a batch ends at maxBatch lines, or where no whole
// line is buffered (the rest may not have been sent yet), and the last
// batch with the end of input.
func TestR1ReadLinesBatches(t *testing.T) {
	long := strings.Repeat("x", 100)
	many := strings.Repeat("m\n", maxBatch+3)
	tests := []struct {
		note  string
		input string
		want  [][]string // each batch's lines, "!" for one over the limit
	}{
		{"lines together", "a\nb\r\nc\n", [][]string{{"a", "b", "c"}, {""}}},
		{"one over the limit among them", "a\n" + long + "\nb\n", [][]string{{"a", "!", "b"}, {""}}},
		{"no terminator at the end", "a\nlast", [][]string{{"a"}, {"last"}}},
		{"more than a batch", many, [][]string{slicesRepeat("m", maxBatch), {"m", "m", "m"}, {""}}},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.input), 4096)
			var end error
			// A batch's text is its lines' bytes, not a copy (issue 49):
			// what later batches read must leave it as it was.
			var texts, was []string
			defer func() {
				for i := range texts {
					if texts[i] != was[i] {
						t.Errorf("line %d's text changed to %q after later batches, was %q", i, texts[i], was[i])
					}
				}
			}()
			for i, want := range tc.want {
				rs := readLines(br, 50)
				var got []string
				for _, r := range rs {
					switch {
					case errors.Is(r.err, errTooLong):
						got = append(got, "!")
					case r.err != nil && r.err != io.EOF:
						t.Fatalf("batch %d: %v", i, r.err)
					default:
						got = append(got, string(r.line))
					}
					end = r.err
					texts, was = append(texts, r.text), append(was, strings.Clone(r.text))
					if r.text != string(r.line) {
						t.Errorf("batch %d: text %q is not the line %q", i, r.text, r.line)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("batch %d = %q, want %q", i, got, want)
				}
			}
			if end != io.EOF {
				t.Errorf("the last batch ends with %v, want the end of input", end)
			}
		})
	}
}

func slicesRepeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
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
			line, err := readLine(bufio.NewReaderSize(strings.NewReader(tc.input), 16), 10, []byte("before"))
			line = bytes.TrimPrefix(line, []byte("before"))
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
		{"a system message", `{"type":"message","role":"system","content":[]}`, `must have role \"assistant\"`},
		{"a user message without text", `{"type":"message","role":"user","content":[]}`, `a user message needs its text`},
		{"a lone call's type beside a role", `{"type":"tool_use","role":"assistant","id":"t","name":"Echo","input":{}}`, `both \"role\"`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if out := string(g.Handle(t.Context(), []byte(tc.line))); !strings.Contains(out, tc.want) {
				t.Errorf("%s\ngot  %s\nwant %s", tc.line, out, tc.want)
			}
		})
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

// FuzzR1AppendAnthropicToolsIsMarshal: the anthropic tool list serve
// writes without encoding/json is the bytes marshal writes of its reply,
// whatever the names, descriptions and schemas hold, a schema shared by
// tools included; a schema that is no JSON is left to marshal.
func FuzzR1AppendAnthropicToolsIsMarshal(f *testing.F) {
	for _, s := range []string{"m1m1", "", "a\"b\\c", "line\nnext\t<&>", "é\u2028\u2029", "\x00\x7f\x1f", "\xff\xfe"} {
		f.Add(s, "desc "+s, `{"type":"object","properties":{"message":{"type":"string"}}}`, 3)
		f.Add("Echo", s, "{\n  \"type\": \"object\",\n  \"description\": \"<&> \\u003c \\u2028\"\n}", 2)
	}
	for _, bad := range []string{"", "{", `{"a":}`, "null", "[1, 2 ]"} {
		f.Add("T", "d", bad, 1)
	}
	f.Fuzz(func(t *testing.T, name, desc, schema string, n int) {
		shared := json.RawMessage(schema)
		defs := []ToolDef{{Name: name, Description: desc}} // a tool without a schema
		for i := range 1 + (n&0xff)%4 {
			defs = append(defs, ToolDef{Name: name + strconv.Itoa(i), Description: desc, InputSchema: shared})
		}
		defs = append(defs, ToolDef{Name: "own", Description: desc, InputSchema: json.RawMessage(schema)})
		reply := toolsReply{Type: "tools", Format: "anthropic", Tools: []any{}}
		for _, d := range defs {
			reply.Tools = append(reply.Tools, anthropicTool{d.Name, d.Description, d.InputSchema})
		}
		want := marshal(reply)
		got, ok := appendAnthropicTools(nil, defs)
		if ok != json.Valid(shared) {
			t.Fatalf("appendAnthropicTools of the schema %q: %v; want %v", schema, ok, !ok)
		}
		if ok && !bytes.Equal(got, want) {
			t.Fatalf("appendAnthropicTools %q, marshal %q", got, want)
		}
	})
}

// FuzzR1AppendOpenAIIsMarshal: the Chat Completions tool messages and the
// Responses function_call_output items serve writes without encoding/json
// are the bytes marshal writes of their types, whatever the ids and
// contents hold.
func FuzzR1AppendOpenAIIsMarshal(f *testing.F) {
	for _, s := range []string{"m1m1", "", "a\"b\\c", "line\nnext\t<&>", "é\u2028\u2029", "\x00\x7f\x1f", "\xff\xfe", "\ud7ff\U0001F642"} {
		f.Add("c1", s, 1)
		f.Add(s, "x", 3)
	}
	f.Fuzz(func(t *testing.T, id, content string, n int) {
		n = 1 + (n&0xff)%4
		rs := make([]result, n)
		for i := range rs {
			rs[i] = result{ToolUseID: id + strconv.Itoa(i), Content: strings.Repeat(content, i+1)}
		}
		if got, want := appendChatToolMessages([]byte("p"), rs), append([]byte("p"), marshal(chatToolMessages(rs))...); !bytes.Equal(got, want) {
			t.Fatalf("appendChatToolMessages %q, marshal %q", got, want)
		}
		if got, want := appendFunctionOutputs([]byte("p"), rs, false), append([]byte("p"), marshal(functionOutputs(rs))...); !bytes.Equal(got, want) {
			t.Fatalf("appendFunctionOutputs %q, marshal %q", got, want)
		}
		if got, want := appendFunctionOutputs(nil, rs[:1], true), marshal(functionOutputs(rs)[0]); !bytes.Equal(got, want) {
			t.Fatalf("appendFunctionOutputs of one %q, marshal %q", got, want)
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
