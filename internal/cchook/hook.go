// Package cchook decides Claude Code's tool calls as its PreToolUse hook:
// one hook input in, one decision out (allow, deny or ask), made by the
// same gate and permission lattice as every other front end.
package cchook

import (
	"encoding/json"
	"fmt"
	"strings"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/provision"
	"aimon.dev/gw/policy"
)

// Input is a PreToolUse hook input as Claude Code sends it; fields it adds
// later are ignored.
type Input struct {
	SessionID      string          `json:"session_id"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	AgentID        string          `json:"agent_id"`
	AgentType      string          `json:"agent_type"`
	PermissionMode string          `json:"permission_mode"`
}

// Output is the hook's answer.
type Output struct {
	HookSpecificOutput Decision `json:"hookSpecificOutput"`
}

// Decision is "allow", "deny" or "ask", with the sentence Claude Code shows.
type Decision struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
}

// Chain is the surface chain of a hook input: the main agent, and the
// subagent whose type the input names when the policy declares it. A
// subagent type the policy does not declare (Claude Code's own, such as
// general-purpose) is a child without a list: bounded by the agent's
// (rules P10, P11), never refused.
func Chain(gen *policy.Generation, in Input) []string {
	if in.AgentType != "" {
		if _, ok := gen.Surfaces["subagent:"+in.AgentType]; ok {
			return []string{"agent", "subagent:" + in.AgentType}
		}
	}
	return []string{"agent"}
}

// Decide decides one hook input under gen, with the working directory the
// input gives.
func Decide(gen *provision.Generation, in Input, opts gateway.Options) Output {
	chain := Chain(gen.Generation, in)
	answer := func(decision, reason string) Output {
		return Output{Decision{HookEventName: "PreToolUse", PermissionDecision: decision, PermissionDecisionReason: reason}}
	}
	if _, defined := gen.Tools[in.ToolName]; !defined {
		if policy.IsMCPEntry(in.ToolName) {
			if ok, reason, mentioned := mcpTool(gen.Generation, chain, in.ToolName); mentioned {
				if ok {
					return answer("allow", reason)
				}
				return answer("deny", reason)
			}
		}
		reason := fmt.Sprintf("The aimon-gw policy does not mention %s, so it answers %q for it (claudeCode: unknownTools).", in.ToolName, unknown(gen.Generation))
		return answer(unknown(gen.Generation), reason)
	}
	opts.Workdir, opts.Chain = in.Cwd, chain
	gw := gateway.New(gen, opts)
	input := in.ToolInput
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	id := in.ToolUseID
	if id == "" {
		id = "hook"
	}
	d := gw.Check(chain, id, in.ToolName, input)
	if d.Allowed {
		return answer("allow", d.Reason)
	}
	return answer("deny", d.Reason)
}

func unknown(gen *policy.Generation) string {
	if gen.UnknownTools == "ask" {
		return "ask"
	}
	return "deny"
}

// mcpTool decides a Claude Code MCP tool the policy does not define, by
// name: mcp__SERVER allows every tool of the server, mcp__SERVER__TOOL one
// tool, and every declared list along the chain must allow it (rule P10).
// mentioned is false when no list of the policy names the server at all.
func mcpTool(gen *policy.Generation, chain []string, name string) (ok bool, reason string, mentioned bool) {
	rest := strings.TrimPrefix(name, "mcp__")
	server := "mcp__" + strings.SplitN(rest, "__", 2)[0]
	names := func(e string) bool { e = strings.TrimSpace(e); return e == name || e == server }
	for _, s := range gen.Surfaces {
		for _, e := range s.Entries {
			e = strings.TrimSpace(e)
			mentioned = mentioned || e == server || strings.HasPrefix(e, server+"__")
		}
	}
	if !mentioned {
		return false, "", false
	}
	var by []string
	for _, ref := range chain {
		s := gen.Surfaces[ref]
		if s == nil || !s.Declared {
			continue
		}
		found := ""
		for _, e := range s.Entries {
			if names(e) {
				found = e
				break
			}
		}
		if found == "" {
			return false, fmt.Sprintf("%s is not allowed on this surface: the allowed-tools of %s have no entry %s or %s.", name, ref, server, name), true
		}
		by = append(by, found)
	}
	if len(by) == 0 {
		return true, fmt.Sprintf("%s is allowed: no allowed-tools list limits this surface.", name), true
	}
	return true, fmt.Sprintf("%s is allowed by %s.", name, strings.Join(by, " and ")), true
}
