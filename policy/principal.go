package policy

import ipolicy "aimon.dev/gw/internal/core/policy"

// A Principal is a caller as an identity provider names it: the claims of
// its token, which the policy's principals: field maps to the surface
// chain its calls run on (rule R5), as aimon-gw mcp --listen does.
type Principal struct {
	Subject  string   // its sub claim
	Groups   []string // its groups claim
	ClientID string   // its client_id claim
	Scopes   []string // the scopes its token carries
}

// ParsePrincipal reads a principal as aimon-gw --principal takes it: a
// subject ("alice"), or the claims as JSON
// ({"sub":"alice","groups":["docs"],"client_id":"cli"}). A spec that is
// neither is an error that says how to write it.
func ParsePrincipal(spec string) (Principal, error) {
	c, err := ipolicy.ParseClaims(spec)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Subject: c.Subject, Groups: c.Groups, ClientID: c.Client, Scopes: c.Scopes}, nil
}

// String names the principal in a sentence, as the policy's refusals do.
func (pr Principal) String() string { return pr.claims().String() }

func (pr Principal) claims() ipolicy.Claims {
	return ipolicy.Claims{Subject: pr.Subject, Groups: pr.Groups, Client: pr.ClientID, Scopes: pr.Scopes}
}

// PrincipalSurface is the surface chain the policy maps pr to, main agent
// first: that of the deepest of the principals that match it. A caller
// that no principal maps, whose token lacks a principal's scopes, or
// whose principals' chains diverge, is refused with a sentence that says
// what to change.
func (p *Policy) PrincipalSurface(pr Principal) ([]string, error) {
	chain, _, err := p.ref.Gen.Principal(pr.claims())
	if err != nil {
		return nil, err
	}
	return chain, nil
}

// Extends reports whether chain begins with ceiling, both rooted: whether
// a gateway (or a principal) of chain ceiling may decide a call of chain,
// which may only go deeper (rule R5).
func Extends(ceiling, chain []string) bool {
	return ipolicy.Extends(ipolicy.Rooted(ceiling), chain)
}

// Rooted is chain with the main agent first, as every chain is decided:
// ["subagent:reviewer"] is ["agent", "subagent:reviewer"], and nil is
// ["agent"]. A chain that begins with "agent" is returned as it is.
func Rooted(chain []string) []string { return ipolicy.Rooted(chain) }
