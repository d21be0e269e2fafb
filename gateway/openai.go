package gateway

import "encoding/json"

// The OpenAI forms of PROTOCOL.md (4 and 5): calls whose arguments are a
// JSON string, answered in OpenAI's own shapes. Chat Completions has no
// error flag, so a failed call's content is its sentence.

// openaiInput makes a call of an OpenAI tool call. Its arguments are a JSON
// string; one that does not hold a JSON object fails this call only, with
// the gate's sentence.
func openaiInput(id, name string, arguments *string) call {
	c := call{ID: id, Name: name}
	if arguments != nil {
		c.Input = json.RawMessage(*arguments)
		if len(c.Input) == 0 {
			c.Input = json.RawMessage("{}") // no arguments: an empty object
		}
	}
	return c
}

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
