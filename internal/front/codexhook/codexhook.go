// Package codexhook decides Codex's own tool calls as its PreToolUse hook,
// with the same policy and the same decision as Claude Code's hook
// (cchook): Codex's hook input has Claude Code's shape, and its answer is
// read by Codex's own rules, which this package keeps.
//
// Codex takes every answer it does not support (an allow without a
// rewrite, an ask, an unknown field, any exit but 0 and 2) as a failed hook
// and runs the tool, so the answers here are only those it enforces: {} for
// an allowed call, allow with updatedInput for an allowed command wrapped
// in the sandbox, deny with a reason otherwise. Codex's hook cannot ask a
// person, so the one decision refuses an ask (gateway.Options.CannotAsk),
// and records the deny it answers.
package codexhook

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
)

// Runtime is Codex's name among the hooks.
const Runtime = "codex"

// ReadInput reads a Codex PreToolUse hook input, or a PostToolUse one,
// whose result labels the session (rule P18; Codex sends session_id). An error is a sentence
// saying why the call is blocked.
func ReadInput(data []byte) (cchook.Input, error) {
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if json.Unmarshal(data, &head) == nil && head.Event != "" && head.Event != "PreToolUse" && head.Event != cchook.PostToolUse {
		return cchook.Input{}, fmt.Errorf("the hook input is for Codex's %s event, and aimon-gw hook codex answers only PreToolUse and PostToolUse; the call is blocked. Configure it under [[hooks.PreToolUse]] (and [[hooks.PostToolUse]], whose results label the session) in Codex's config.toml.", head.Event)
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

// Blocked is the answer that blocks a call with a sentence. Codex hands
// the model the reason followed by ". Command: …", so its own last full
// stop is left off.
func Blocked(reason string) Output {
	return Output{&Specific{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: strings.TrimSuffix(reason, ".")}}
}

// Patch is Codex's patch tool, whose paths are inside its patch.
const Patch = "apply_patch"

// Answer answers one input by cchook's decision, Bash wrapped in aimon-gw
// exec by wrap (nil: as sent), and answers it as Codex enforces.
func Answer(gen *provision.Generation, in cchook.Input, opts gateway.Options, wrap *cchook.Wrap) Output {
	// Its own files, which make it call the hook, are protected from
	// its tools and, through exec, its commands by the decision (rule R9).
	if wrap != nil {
		w := *wrap
		w.Runtime = Runtime
		wrap = &w
	}
	if in.ToolName == Patch && in.Unread == "" {
		in.Writes, in.Unread = patchFiles(in)
	}
	opts.CannotAsk = "Codex's hook"
	return answer(cchook.Answer(Runtime, gen, in, opts, wrap).HookSpecificOutput)
}

// patchFiles are the files a patch Codex would apply adds, updates,
// deletes or moves to, absolute, or why they cannot be told: the policy
// allows apply_patch whole, and the one decision refuses a patch of a
// file where the gateway's own files or an agent's configuration lie as
// a Write there is (rules R8, R9).
func patchFiles(in cchook.Input) (files []string, unread string) {
	var args struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(in.ToolInput, &args) != nil || args.Command == "" {
		return nil, "apply_patch sent no patch as its command, so the files it would write cannot be told; the call is refused."
	}
	for _, line := range strings.Split(args.Command, "\n") {
		line = strings.TrimSpace(line)
		for _, head := range []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"} {
			name, ok := strings.CutPrefix(line, head)
			if !ok {
				continue
			}
			path := strings.TrimSpace(name)
			if !filepath.IsAbs(path) {
				path = filepath.Join(in.Cwd, path)
			}
			files = append(files, path)
		}
	}
	return files, ""
}

func answer(d cchook.Specific) Output {
	switch d.PermissionDecision {
	case "allow":
		if d.UpdatedInput == nil {
			return Output{}
		}
		return Output{&Specific{HookEventName: "PreToolUse", PermissionDecision: "allow", UpdatedInput: d.UpdatedInput}}
	}
	return Blocked(d.PermissionDecisionReason)
}
