package gateway

import (
	"fmt"

	"aimon.dev/gw/internal/core/decide"
)

// The sentences the gateway itself says to a model about a call it does
// not run for a reason of its own (the decision's are decide's), one
// constructor per kind, so that a fix to one is one edit. Refusals of a
// call end with decide.NotExecuted.

func noID() string {
	return decide.NotExecuted("The call has no id; give every call a unique id (a tool_use block's \"id\", an OpenAI call's \"id\" or \"call_id\").")
}

func duplicateID(id string) string {
	return decide.NotExecuted(fmt.Sprintf("The id '%s' is used by an earlier call of this batch; give every call a unique id.", id))
}

func cancelledBeforeRun() string {
	return decide.NotExecuted("The batch was cancelled before this call ran.")
}

func noImplementation(tool string) string {
	return decide.NotExecuted(fmt.Sprintf("Tool '%s' has no implementation in this gateway; tell the operator.", tool))
}

func panicked() string {
	return "The tool failed unexpectedly and did not finish; the operator has the details in the gateway's log. Try another approach."
}

// errorResult is the tool_result of a call that did not run or failed.
func errorResult(id, sentence string) result {
	return result{Type: "tool_result", ToolUseID: id, Content: sentence, IsError: true}
}

func decisionLogDown(err error) string {
	return decide.NotExecuted(fmt.Sprintf("The gateway's decision log cannot be written (%v), so it allows no call until the operator fixes it", err))
}
