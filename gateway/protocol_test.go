package gateway

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
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
		{"content not blocks", `{"role":"assistant","content":[1]}`, "must not be a JSON number"},
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
