package gateway

import (
	"fmt"
	"strings"

	"aimon.dev/gw/internal/rule"
	"aimon.dev/gw/policy"
)

// clientTool decides a tool the policy does not define, for a front end
// whose client runs tools of its own (Claude Code's hook): an MCP tool by
// the entries that name it, anything else by the answer unknown ("deny"
// or "ask").
func clientTool(cur *Current, chain []string, unknown, name string) rule.Decision {
	if policy.IsMCPEntry(name) {
		if d, mentioned := clientMCPTool(cur, chain, name); mentioned {
			return d
		}
	}
	d := rule.Refused(rule.P9, fmt.Sprintf("The aimon-gw policy does not mention %s, so it answers %q for it (claudeCode: unknownTools).", name, unknown))
	d.Ask = unknown == "ask"
	return d
}

// clientMCPTool decides an MCP tool of the client by name: mcp__SERVER allows
// every tool of the server, mcp__SERVER__TOOL one tool, and every declared
// list along the chain must allow it (rule P10). mentioned is false when no
// list of the policy names the server at all.
func clientMCPTool(cur *Current, chain []string, name string) (d rule.Decision, mentioned bool) {
	rest := strings.TrimPrefix(name, "mcp__")
	server := "mcp__" + strings.SplitN(rest, "__", 2)[0]
	for _, s := range cur.Surfaces {
		for _, e := range s.Entries {
			e = strings.TrimSpace(e)
			mentioned = mentioned || e == server || strings.HasPrefix(e, server+"__")
		}
	}
	if !mentioned {
		return d, false
	}
	var by []string
	for _, ref := range chain {
		s := cur.Surfaces[ref]
		if s == nil || !s.Declared {
			continue
		}
		found := ""
		for _, e := range s.Entries {
			if e = strings.TrimSpace(e); e == name || e == server {
				found = e
				break
			}
		}
		if found == "" {
			return rule.Refused(rule.P9, fmt.Sprintf("%s is not allowed on this surface: the allowed-tools of %s have no entry %s or %s.", name, ref, server, name)), true
		}
		by = append(by, found)
	}
	if len(by) == 0 {
		return rule.Decision{Allowed: true, Rule: rule.P11, Reason: fmt.Sprintf("%s is allowed: no allowed-tools list limits this surface.", name)}, true
	}
	return rule.Decision{Allowed: true, Rule: rule.P9, Entries: by, Reason: fmt.Sprintf("%s is allowed by %s.", name, strings.Join(by, " and "))}, true
}
