package cchook

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/jsontok"
)

// readInput reads a hook input as json v2 reads it into an Input, token
// by token (package jsontok): names matched exactly, each given once, a
// name Input does not have skipped, null as the zero value, tool_input
// and tool_response as their bytes. json v2's reflection built Input's
// decoder in every hook process, for one input (issues 42, 43). Any error
// is ReadInput's cue to read it with json v2, whose words it gives.
func readInput(data []byte) (Input, error) {
	var in Input
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "session_id":
			return jsontok.String(dec, &in.SessionID)
		case "cwd":
			return jsontok.String(dec, &in.Cwd)
		case "hook_event_name":
			return jsontok.String(dec, &in.HookEventName)
		case "tool_name":
			return jsontok.String(dec, &in.ToolName)
		case "tool_use_id":
			return jsontok.String(dec, &in.ToolUseID)
		case "agent_id":
			return jsontok.String(dec, &in.AgentID)
		case "agent_type":
			return jsontok.String(dec, &in.AgentType)
		case "permission_mode":
			return jsontok.String(dec, &in.PermissionMode)
		case "tool_input":
			return jsontok.Raw(dec, &in.ToolInput)
		case "tool_response":
			return jsontok.Raw(dec, &in.ToolResponse)
		case "prompt":
			if dec.PeekKind() == 'n' {
				in.Prompt = nil
				_, err := dec.ReadToken()
				return err
			}
			var p string
			err := jsontok.String(dec, &p)
			in.Prompt = &p
			return err
		}
		return dec.SkipValue() // a name of Claude Code's the hook does not read
	})
	if err == nil {
		err = jsontok.End(dec, "hook input")
	}
	return in, err
}
