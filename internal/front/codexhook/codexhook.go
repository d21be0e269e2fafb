// Package codexhook decides Codex's own tool calls as its PreToolUse hook,
// with the same policy and the same decision as Claude Code's hook
// (cchook): Codex's hook input has Claude Code's shape, and its answer is
// read by Codex's own rules, which this package keeps.
//
// Codex takes every answer it does not support (an allow without a
// rewrite, an ask, an unknown field, any exit but 0 and 2) as a failed hook
// and runs the tool, so the answers here are only those it enforces: {} for
// an allowed call, allow with updatedInput for an allowed command wrapped
// in the sandbox, deny with a reason otherwise; an ask is a deny, since
// Codex's hook cannot ask a person.
package codexhook

import (
	"encoding/json"
	"fmt"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
)

// Runtime is Codex's name among the hooks.
const Runtime = "codex"

// ReadInput reads a Codex PreToolUse hook input. An error is a sentence
// saying why the call is blocked.
func ReadInput(data []byte) (cchook.Input, error) {
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if json.Unmarshal(data, &head) == nil && head.Event != "" && head.Event != "PreToolUse" {
		return cchook.Input{}, fmt.Errorf("the hook input is for Codex's %s event, and aimon-gw hook codex answers only PreToolUse; the call is blocked. Configure it under [[hooks.PreToolUse]] in Codex's config.toml.", head.Event)
	}
	in, err := cchook.ReadInput(data)
	if err != nil {
		return in, err
	}
	if in.Cwd == "" {
		return in, fmt.Errorf("the hook input has no cwd, so the paths of the call cannot be read as Codex reads them; the call is blocked. Run the hook from Codex, which always sends cwd.")
	}
	return in, nil
}

// Output is the answer Codex reads: empty for an allowed call as sent.
type Output struct {
	HookSpecificOutput *Specific `json:"hookSpecificOutput,omitempty"`
}

// Specific is Codex's hookSpecificOutput: "allow" only with UpdatedInput.
type Specific struct {
	HookEventName            string         `json:"hookEventName"`
	PermissionDecision       string         `json:"permissionDecision"`
	PermissionDecisionReason string         `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             map[string]any `json:"updatedInput,omitempty"`
}

// Blocked is the answer that blocks a call with a sentence.
func Blocked(reason string) Output {
	return Output{&Specific{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: reason}}
}

// Decide decides one input by cchook's decision, Bash wrapped in aimon-gw
// exec by wrap (nil: as sent), and answers it as Codex enforces.
func Decide(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) Output {
	return answer(cchook.DecideWrapped(gen, in, opts, wrap).HookSpecificOutput)
}

func answer(d cchook.Decision) Output {
	switch d.PermissionDecision {
	case "allow":
		if d.UpdatedInput == nil {
			return Output{}
		}
		return Output{&Specific{HookEventName: "PreToolUse", PermissionDecision: "allow", UpdatedInput: d.UpdatedInput}}
	case "ask":
		return Blocked(d.PermissionDecisionReason + " Codex's hooks cannot ask a person, so the call is refused; approve it where a person can be asked (aimon-gw mcp with an elicitation client), or change the policy.")
	}
	return Blocked(d.PermissionDecisionReason)
}
