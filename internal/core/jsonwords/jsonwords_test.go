package jsonwords

import (
	"encoding/json"

	"fmt"
	jsonv2 "github.com/go-json-experiment/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestC2JSONProblemsInWords: a decoder's refusal reads as JSON's kinds at
// the member's path and position, never as a Go type (issue 47 item 4).
func TestC2JSONProblemsInWords(t *testing.T) {
	type settings struct {
		Permissions struct {
			Allow []string `json:"allow"`
			Depth int      `json:"depth"`
		} `json:"permissions"`
	}
	for _, tc := range []struct{ data, where, says string }{
		{`{"permissions":{"allow":"Bash"}}`, "f:1:30", "at permissions.allow, a string is given where a list of strings belongs"},
		{"{\"permissions\":\n {\"allow\":[1]}}", "f:2:12", "at permissions.allow, a number is given where a string belongs"},
		{`{"permissions":{"depth":1.5}}`, "f:1:27", "at permissions.depth, a number is given where a whole number belongs"},
		{`[1]`, "f:1:1", "a list is given where an object belongs"},
		{"{\n x}", "f:2:2", "invalid character 'x' looking for beginning of object key string"},
	} {
		var s settings
		err := json.Unmarshal([]byte(tc.data), &s)
		if err == nil {
			t.Fatalf("%s decoded", tc.data)
		}
		if got := Problem(err); got != tc.says {
			t.Errorf("%s: Problem = %q, want %q", tc.data, got, tc.says)
		}
		if got := Where("f", []byte(tc.data), err); got != tc.where {
			t.Errorf("%s: Where = %q, want %q", tc.data, got, tc.where)
		}
		if strings.Contains(Problem(err), "Go ") {
			t.Errorf("%s: %q names a Go type", tc.data, Problem(err))
		}
	}
}

// TestC2JSONProblemsOfTheMCPDecoder: the MCP SDK's decoder (segmentio)
// holds the quoted start of the value, wrapped in its own sentence.
func TestC2JSONProblemsOfTheMCPDecoder(t *testing.T) {
	err := fmt.Errorf("unmarshaling: %w", &json.UnmarshalTypeError{Value: strconv.Quote(`1}`), Type: reflect.TypeOf(""), Field: "name"})
	if got, want := Problem(err), "at name, a number is given where a string belongs"; got != want {
		t.Errorf("Problem = %q, want %q", got, want)
	}
}

// TestC2JSONProblemsOfJSONv2: the hooks' reader (json v2) says the member
// by its pointer and the kinds in JSON's words; an empty input is empty.
func TestC2JSONProblemsOfJSONv2(t *testing.T) {
	var in struct {
		Name string `json:"tool_name"`
	}
	for _, tc := range []struct{ data, says string }{
		{`{"tool_name":1}`, "at tool_name, a number is given where a string belongs"},
		{``, "it is empty"},
		{`x`, "invalid character 'x' at start of value"},
		{`{"tool_name":"a","tool_name":"b"}`, `duplicate object member name "tool_name"`},
	} {
		err := jsonv2.Unmarshal([]byte(tc.data), &in)
		if got := Problem(err); got != tc.says {
			t.Errorf("%q: Problem = %q, want %q (%v)", tc.data, got, tc.says, err)
		}
	}
}
