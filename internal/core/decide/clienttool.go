package decide

import (
	"fmt"
	"slices"
	"strings"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
)

// clientTool decides a tool the policy does not define, for a front end
// whose client runs tools of its own (Claude Code's hook): an MCP tool by
// the entries that name it, anything else by the answer unknown ("deny"
// or "ask").
func clientTool(cur *policy.Generation, chain []string, unknown, name string) rule.Decision {
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
func clientMCPTool(cur *policy.Generation, chain []string, name string) (d rule.Decision, mentioned bool) {
	rest := strings.TrimPrefix(name, "mcp__")
	server := "mcp__" + strings.SplitN(rest, "__", 2)[0]
	for _, s := range cur.Surfaces {
		for _, e := range slices.Concat(s.Entries, s.Denied, s.Asked) {
			e = strings.TrimSpace(e)
			mentioned = mentioned || e == server || strings.HasPrefix(e, server+"__")
		}
	}
	if !mentioned {
		return d, false
	}
	// Deny beats ask beats allow, along the whole chain (rule P14).
	names := func(e string) bool { e = strings.TrimSpace(e); return e == name || e == server }
	for _, list := range []struct {
		entries func(*policy.Surface) []string
		key     string
		ask     bool
	}{{func(s *policy.Surface) []string { return s.Denied }, "denied-tools", false}, {func(s *policy.Surface) []string { return s.Asked }, "ask-tools", true}} {
		for _, ref := range chain {
			s := cur.Surfaces[ref]
			if s == nil {
				continue
			}
			if i := slices.IndexFunc(list.entries(s), names); i >= 0 {
				e := list.entries(s)[i]
				d := rule.Refused(rule.P14, fmt.Sprintf("%s is denied on this surface by %s in the %s of %s.", name, e, list.key, ref))
				if list.ask {
					d.Reason = fmt.Sprintf("%s needs approval on this surface: %s in the %s of %s asks for it.", name, e, list.key, ref)
				}
				d.Ask, d.Entries = list.ask, []string{e}
				return d, true
			}
		}
	}
	var by []string
	for _, ref := range chain {
		s := cur.Surfaces[ref]
		if s == nil || !s.Declared {
			continue
		}
		found := ""
		if i := slices.IndexFunc(s.Entries, names); i >= 0 {
			found = strings.TrimSpace(s.Entries[i])
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
