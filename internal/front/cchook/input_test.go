package cchook

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/readsas"
)

// TestR2HookInputReadsAsJSONv2: the hook input's reader token by token
// (readInput) reads every input as json v2 reads it into an Input, or
// fails where json v2 fails (and ReadInput then gives json v2's words):
// each captured Claude Code input, and inputs of nulls, escapes, nested
// and spaced values, names in another case, unknown names of every kind,
// duplicates, wrong types, and bytes that are not one JSON object.
func TestR2HookInputReadsAsJSONv2(t *testing.T) {
	data, err := os.ReadFile("testdata/hook_inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var tc struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal([]byte(line), &tc); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(tc.Input))
	}
	inputs = append(inputs,
		`{}`, `null`, ` {"tool_name":"Bash"} `, `{"tool_name":null,"cwd":null,"prompt":null,"tool_input":null,"tool_response":null}`,
		`{"prompt":""}`, `{"prompt":"the user's \u00e9 words\n"}`, `{"hook_event_name":"UserPromptSubmit","prompt":"x","session_id":"s"}`,
		`{"tool_input": { "command" : "ls  -l", "n": [1, 2.5e3, {"a": null}] } ,"tool_name":"Bash"}`,
		`{"tool_response":[{"type":"text","text":"ok"}],"tool_input":"a string","tool_name":"T"}`,
		`{"transcript_path":"/t","extra":{"deep":[1,{"x":true}]},"n":1,"b":false,"z":null,"tool_name":"Read"}`,
		`{"TOOL_NAME":"Bash","Cwd":"/"}`, `{"agent_id":"a1","agent_type":"reviewer","permission_mode":"plan","tool_use_id":"u"}`,
		`{"tool_name":"\ud83d\ude00\t\"q\""}`,
		// What json v2 refuses.
		`{"tool_name":"Read","tool_name":"Bash"}`, `{"tool_input":{"command":"ls","command":"rm"}}`, `{"x":1,"x":2}`,
		`{"tool_name":1}`, `{"tool_name":["Bash"]}`, `{"prompt":5}`, `{"cwd":{}}`, `{"session_id":true}`,
		`[]`, `"x"`, `1`, ``, `{`, `{"tool_name":"Bash"}{}`, `{"tool_name":"Bash"} x`, `{"tool_name":"B\xffash"}`,
		`{"tool_input":{"a":}}`, `{"tool_name":"Bash",}`, `{'tool_name':'Bash'}`,
	)
	readsas.JSONv2(t, readInput, inputs...)
}
