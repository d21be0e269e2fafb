package gateway

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

const allBuiltins = `tools: {
	Read: schema.#Read, Write: schema.#Write, Edit: schema.#Edit, Grep: schema.#Grep, Glob: schema.#Glob, Echo: schema.#Echo
	Bash: schema.#Bash & {sandbox: mode: "off"}
}
validation: "enforce"
`

// TestOpenAIShapesAreTheSDKs: the sample calls decode as the official SDK's
// types, and the replies and tool lists decode into its structs with every
// required field present (issue 15).
func TestOpenAIShapesAreTheSDKs(t *testing.T) {
	g, _ := newGateway(t, allBuiltins, nil)
	f, err := os.Open("../../../examples/calls-openai.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 4 {
		t.Fatalf("%d sample lines", len(lines))
	}
	var msg openai.ChatCompletionMessage
	var call responses.ResponseFunctionToolCall
	var resp responses.Response
	for i, into := range []any{&msg, &call, &resp} {
		if err := json.Unmarshal([]byte(lines[i]), into); err != nil {
			t.Fatalf("sample %d is not the SDK's shape: %v", i, err)
		}
	}
	if len(msg.ToolCalls) != 2 || call.CallID != "call_3" || len(resp.Output) != 2 {
		t.Fatalf("samples decoded as %+v / %+v / %+v", msg.ToolCalls, call, resp.Output)
	}

	var chat []openai.ChatCompletionToolMessageParam
	mustDecode(t, g.Handle(t.Context(), []byte(lines[0])), &chat)
	if len(chat) != 2 || chat[0].ToolCallID != "call_1" || chat[0].Content.OfString.Value != "hello hello " || chat[1].ToolCallID != "call_2" {
		t.Errorf("chat reply: %+v", chat)
	}
	var out responses.ResponseInputItemFunctionCallOutputParam
	mustDecode(t, g.Handle(t.Context(), []byte(lines[1])), &out)
	if out.CallID.Value != "call_3" || !strings.Contains(out.Output.OfString.Value, "policy") {
		t.Errorf("function_call_output: %+v", out)
	}
	var outs []responses.ResponseInputItemFunctionCallOutputParam
	mustDecode(t, g.Handle(t.Context(), []byte(lines[2])), &outs)
	if len(outs) != 2 || outs[0].Output.OfString.Value != "one" || !strings.Contains(outs[1].Output.OfString.Value, "not valid JSON") {
		t.Errorf("a bad arguments string must fail its call only: %+v", outs)
	}

	var list struct {
		Tools []responses.FunctionTool `json:"tools"`
	}
	mustDecode(t, g.Handle(t.Context(), []byte(lines[3])), &list)
	var chatList struct {
		Tools []struct {
			Type     string                    `json:"type"`
			Function shared.FunctionDefinition `json:"function"`
		} `json:"tools"`
	}
	mustDecode(t, g.Handle(t.Context(), []byte(`{"type":"list_tools","format":"openai","strict":true}`)), &chatList)
	if len(list.Tools) != 7 || len(chatList.Tools) != 7 {
		t.Fatalf("tool lists: %d and %d tools", len(list.Tools), len(chatList.Tools))
	}
	for i, tool := range list.Tools {
		if !tool.Strict || !tool.JSON.Parameters.Valid() || tool.Parameters["additionalProperties"] != false || tool.Parameters["$schema"] != nil {
			t.Errorf("%s is not a strict function tool: %+v", tool.Name, tool.Parameters)
		}
		if f := chatList.Tools[i]; f.Type != "function" || f.Function.Name != tool.Name || !f.Function.Strict {
			t.Errorf("chat tool %d: %+v", i, f)
		}
	}
}

func mustDecode(t *testing.T, reply []byte, into any) {
	t.Helper()
	if err := json.Unmarshal(reply, into); err != nil {
		t.Fatalf("reply %s does not decode as %T: %v", reply, into, err)
	}
}

// TestS4StrictNullIsMissing: for every built-in, a strict-mode call that
// sends null for each optional field behaves as the call that leaves them
// out (rule S4), and strict mode's requirements hold for its schema.
func TestS4StrictNullIsMissing(t *testing.T) {
	g, _ := newGateway(t, allBuiltins, nil)
	wd := g.opts.Workdir
	os.WriteFile(filepath.Join(wd, "f.txt"), []byte("alpha\nbeta\n"), 0o644)
	required := map[string]map[string]any{
		"Read":  {"file_path": "f.txt"},
		"Grep":  {"pattern": "alpha"},
		"Glob":  {"pattern": "*.txt"},
		"Echo":  {"message": "m"},
		"Bash":  {"command": "echo ok"},
		"Write": {"file_path": "new.txt", "content": "x"},
		"Edit":  {"file_path": "f.txt", "old_string": "beta", "new_string": "gamma"},
	}
	var list struct {
		Tools []struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"tools"`
	}
	mustDecode(t, g.Handle(t.Context(), []byte(`{"type":"list_tools","format":"openai-responses","strict":true}`)), &list)
	for _, tool := range list.Tools {
		t.Run(tool.Name, func(t *testing.T) {
			props := tool.Parameters["properties"].(map[string]any)
			req := tool.Parameters["required"].([]any)
			if len(req) != len(props) {
				t.Errorf("required %v does not list every property", req)
			}
			withNulls := map[string]any{}
			for name := range props {
				if v, ok := required[tool.Name][name]; ok {
					withNulls[name] = v
				} else {
					withNulls[name] = nil
				}
			}
			callTool := func(name string, in map[string]any) map[string]any {
				b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": "1", "name": name, "input": in})
				var r map[string]any
				json.Unmarshal(g.Handle(t.Context(), b), &r)
				return r
			}
			call := func(in map[string]any) map[string]any { return callTool(tool.Name, in) }
			if tool.Name == "Edit" {
				callTool("Read", map[string]any{"file_path": "f.txt"}) // rule C6: read before edit
			}
			if tool.Name == "Edit" {
				if r := call(withNulls); r["is_error"] != false {
					t.Errorf("with nulls: %v", r)
				}
				return
			}
			if tool.Name == "Write" {
				if r := call(withNulls); r["is_error"] != false {
					t.Errorf("with nulls: %v", r)
				}
				return
			}
			a, b := call(withNulls), call(required[tool.Name])
			if a["is_error"] != false || a["content"] != b["content"] {
				t.Errorf("nulls %v differ from leaving them out %v", a, b)
			}
		})
	}
}

// The reply types serve once encoded with encoding/json: the reference
// FuzzR1AppendOpenAIIsMarshal holds the appenders to.

// chatToolMessage is a Chat Completions tool message.
type chatToolMessage struct {
	Role       string `json:"role"`
	ToolCallID string `json:"tool_call_id"`
	Content    string `json:"content"`
}

func chatToolMessages(rs []result) []chatToolMessage {
	out := make([]chatToolMessage, len(rs))
	for i, r := range rs {
		out[i] = chatToolMessage{Role: "tool", ToolCallID: r.ToolUseID, Content: r.Content}
	}
	return out
}

// functionCallOutput is a Responses API function_call_output item.
type functionCallOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

func functionOutputs(rs []result) []functionCallOutput {
	out := make([]functionCallOutput, len(rs))
	for i, r := range rs {
		out[i] = functionCallOutput{Type: "function_call_output", CallID: r.ToolUseID, Output: r.Content}
	}
	return out
}
