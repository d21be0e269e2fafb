package gateway

import "aimon.dev/gw/internal/core/gate"

// The OpenAI forms of PROTOCOL.md (4 and 5): calls whose arguments are a
// JSON string, answered in OpenAI's own shapes. Chat Completions has no
// error flag, so a failed call's content is its sentence.

// openaiInput makes a call of an OpenAI tool call. Its arguments are a JSON
// string; one that does not hold a JSON object fails this call only, with
// the gate's sentence. They are read here, as a tool_use line's input is
// read with the line, the strings in them parts of the arguments' string.
func openaiInput(id, name string, args arguments) Call {
	c := Call{ID: id, Name: name}
	if args.given {
		text, data := args.text, args.data
		if text == "" {
			text, data = "{}", nil // no arguments: an empty object
		}
		if data == nil {
			data = []byte(text)
		}
		c.Input = data
		c.Decoded, c.InputErr = gate.DecodeText(data, text, gate.DefaultLimits)
	}
	return c
}

// appendChatToolMessages appends the tool messages of rs and a newline to
// dst as marshal would encode them, byte for byte
// (FuzzR1AppendOpenAIIsMarshal).
func appendChatToolMessages(dst []byte, rs []result) []byte {
	dst = appendReplies(append(dst, '['), rs, `{"role":"tool","tool_call_id":`, `,"content":`)
	return append(dst, "]\n"...)
}

// appendFunctionOutputs appends the function_call_output items of rs and a
// newline to dst as marshal would encode them, or their one item when one,
// byte for byte (FuzzR1AppendOpenAIIsMarshal).
func appendFunctionOutputs(dst []byte, rs []result, one bool) []byte {
	const head, name = `{"type":"function_call_output","call_id":`, `,"output":`
	if one {
		return append(appendReplies(dst, rs, head, name), '\n')
	}
	dst = appendReplies(append(dst, '['), rs, head, name)
	return append(dst, "]\n"...)
}

// appendReplies appends one object per result, comma-separated: head, the
// call id, name, the content.
func appendReplies(dst []byte, rs []result, head, name string) []byte {
	for i, r := range rs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(append(dst, head...), r.ToolUseID)
		dst = appendString(append(dst, name...), r.Content)
		dst = append(dst, '}')
	}
	return dst
}
