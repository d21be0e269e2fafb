package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const principalsPolicy = header + `
tools: {Read: schema.#Read}
subagents: "docs-writer": "allowed-tools": ["Read(/srv/docs/**)"]
subagents: reviewer: {}
skills: lint: {}
principals: {
	staff:    {group: "staff", surface: ["agent"]}
	docs:     {group: "docs", surface: ["agent", "subagent:docs-writer"]}
	alice:    {subject: "alice", surface: ["subagent:reviewer"]}
	"ci-bot": {client: "ci", group: "bots", surface: ["agent", "subagent:reviewer", "skill:lint"]}
}
`

// TestP10PrincipalsMapCallersToChains: a caller runs under the deepest
// chain of the principals that match it, when they lie along one chain;
// one no principal matches, or two that diverge, is refused.
func TestP10PrincipalsMapCallersToChains(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": principalsPolicy}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		note   string
		claims Claims
		want   string // the chain, or the error's words
	}{
		{"by group", Claims{Subject: "bob", Groups: []string{"staff"}}, "agent"},
		{"the deeper of two along one chain", Claims{Subject: "carol", Groups: []string{"staff", "docs"}}, "agent,subagent:docs-writer"},
		{"by subject, the chain rooted at the agent", Claims{Subject: "alice"}, "agent,subagent:reviewer"},
		{"every claim a principal names must hold", Claims{Subject: "x", Client: "ci", Groups: []string{"bots"}}, "agent,subagent:reviewer,skill:lint"},
		{"one claim of two is not enough", Claims{Subject: "x", Client: "ci"}, "no entry of the policy's principals matches"},
		{"unmapped", Claims{Subject: "mallory", Groups: []string{"guests"}}, "no entry of the policy's principals matches"},
		{"two chains that diverge", Claims{Subject: "alice", Groups: []string{"docs"}}, "whose chains diverge"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			chain, _, err := g.Principal(tc.claims)
			got := strings.Join(chain, ",")
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if strings.Contains(tc.want, "matches") && !errors.Is(err, ErrUnmapped) {
				t.Fatalf("an unmapped caller's error is not ErrUnmapped: %v", err)
			}
		})
	}
}

// TestP10PrincipalsBadInput: a principal on an undeclared surface, or
// naming no claim, stops the load at its place.
func TestP10PrincipalsBadInput(t *testing.T) {
	tests := []struct {
		note, body, want string
	}{
		{"an undeclared surface", `principals: x: {group: "g", surface: ["agent", "subagent:nobody"]}`, "policy.cue:6:48: principal \"x\" runs on subagent:nobody, a surface the policy does not declare"},
		{"no claim", `principals: x: {surface: ["agent"]}`, "policy.cue:6:13: principal \"x\" names no claim"},
		{"an empty claim", `principals: x: {subject: "", surface: ["agent"]}`, "principals.x.subject"},
		{"an empty chain", `principals: x: {subject: "a", surface: []}`, "principals.x.surface"},
		{"a misspelt field", `principals: x: {subjet: "a", surface: ["agent"]}`, "field not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + "tools: {Read: schema.#Read}\n" + tc.body + "\n"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestP10PrincipalsSurviveSave: a restored generation (the hook's cache)
// maps callers as the load did.
func TestP10PrincipalsSurviveSave(t *testing.T) {
	_, r := loadRestored(t, principalsPolicy)
	chain, names, err := r.Principal(Claims{Groups: []string{"docs"}})
	if err != nil || !slices.Equal(chain, []string{"agent", "subagent:docs-writer"}) || !slices.Equal(names, []string{"docs"}) {
		t.Fatalf("got %v %v %v", chain, names, err)
	}
}

// TestP10PrincipalsRequireScopes: a principal with scopes matches only a
// caller whose token carries every one of them; a caller with its claims
// but not its scopes falls to the principals it still matches, or is
// refused with the scopes it lacks; an empty scope is a load error.
func TestP10PrincipalsRequireScopes(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read}
subagents: reviewer: {}
principals: {
	writers: {group: "staff", scopes: ["repo:write", "gw"], surface: ["agent"]}
	readers: {group: "staff", surface: ["agent", "subagent:reviewer"]}
	ops:     {subject: "olga", scopes: ["ops"], surface: ["agent"]}
}
`}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		note   string
		claims Claims
		want   string
	}{
		{"every scope carried", Claims{Subject: "bob", Groups: []string{"staff"}, Scopes: []string{"gw", "repo:write", "x"}}, "agent,subagent:reviewer"},
		{"one scope short: the narrower principal alone", Claims{Subject: "bob", Groups: []string{"staff"}, Scopes: []string{"gw"}}, "agent,subagent:reviewer"},
		{"the scope lacked names it", Claims{Subject: "olga", Scopes: []string{"gw"}}, `principal "ops", whose claims it carries, also requires the scopes ops, and its token lacks ops`},
		{"with it", Claims{Subject: "olga", Scopes: []string{"ops"}}, "agent"},
	} {
		chain, _, err := g.Principal(tc.claims)
		got := strings.Join(chain, ",")
		if err != nil {
			got = err.Error()
		}
		if tc.want == "agent" && got != "agent" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.note, got, tc.want)
		}
	}
	// Which principal: writers' chain is agent alone, readers' deeper one
	// wins when both match; a caller of writers' scopes is still bounded.
	if _, names, _ := g.Principal(Claims{Subject: "bob", Groups: []string{"staff"}, Scopes: []string{"gw"}}); slices.Contains(names, "writers") {
		t.Errorf("a caller without writers' scopes matched it: %v", names)
	}
	if _, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
principals: p: {subject: "a", scopes: [""], surface: ["agent"]}
`})); err == nil || !strings.Contains(err.Error(), "policy.cue:") {
		t.Errorf("an empty scope: %v", err)
	}
}
