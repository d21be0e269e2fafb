package gateway

import (
	"fmt"
	"strings"

	"aimon.dev/gw/tools"
)

// The sentences the gateway itself says to a model about a call, one
// constructor per kind, so that a fix to one is one edit. Refusals of a
// call end with notExecuted; a listing never does.

// notExecuted ends the sentence of a refused call.
func notExecuted(s string) string {
	s = strings.TrimSpace(s)
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s + " The tool was not executed."
}

func unknownTool(name string, names []string) string {
	if name == "" {
		return fmt.Sprintf("The call names no tool; give the tool's name in its \"name\". Available tools: %s.", strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("Unknown tool '%s'.", name)
	if near := tools.Closest(name, names); near != "" {
		msg += fmt.Sprintf(" Did you mean '%s'?", near)
	}
	return msg + fmt.Sprintf(" Available tools: %s.", strings.Join(names, ", "))
}

func noInput(tool string) string {
	return notExecuted(fmt.Sprintf("The call to '%s' has no input; send its parameters as a JSON object (a tool_use block's \"input\", an OpenAI call's \"arguments\").", tool))
}

func badInput(tool string, err error) string {
	return notExecuted(fmt.Sprintf("The input of '%s' cannot be used: %s.", tool, strings.TrimSuffix(err.Error(), ".")))
}

func noID() string {
	return notExecuted("The call has no id; give every call a unique id (a tool_use block's \"id\", an OpenAI call's \"id\" or \"call_id\").")
}

func duplicateID(id string) string {
	return notExecuted(fmt.Sprintf("The id '%s' is used by an earlier call of this batch; give every call a unique id.", id))
}

func cancelledBeforeRun() string {
	return notExecuted("The batch was cancelled before this call ran.")
}

func noImplementation(tool string) string {
	return notExecuted(fmt.Sprintf("Tool '%s' has no implementation in this gateway; tell the operator.", tool))
}

func panicked() string {
	return "The tool failed unexpectedly and did not finish; the operator has the details in the gateway's log. Try another approach."
}

// errorResult is the tool_result of a call that did not run or failed.
func errorResult(id, sentence string) result {
	return result{Type: "tool_result", ToolUseID: id, Content: sentence, IsError: true}
}

func aboveCeiling(tool, effect, ceiling, by string) string {
	return fmt.Sprintf("%s is not allowed on this surface: its side effect is %s, above the ceiling %s that %s sets (max-effect), so it is neither listed nor allowed here whatever the lists say.", tool, effect, ceiling, by)
}

func decisionLogDown(err error) string {
	return notExecuted(fmt.Sprintf("The gateway's decision log cannot be written (%v), so it allows no call until the operator fixes it", err))
}
