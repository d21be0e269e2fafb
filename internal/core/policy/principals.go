package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/jsonwords"
)

// A Principal maps the callers whose token carries its claims to the
// surface chain they run under (rule P10: the lattice that bounds agents
// bounds people too).
type Principal struct {
	Name string
	// The claims a caller must carry, each that is not "": its subject,
	// one of its groups, its client.
	Subject, Group, Client string
	// Scopes must each be among the scopes the caller's token carries
	// (its scope claim), or the principal does not match it.
	Scopes []string
	// Surface is the chain, main agent first.
	Surface []string
	Pos     Position
}

// Claims are who a caller is, as its token (or a test) says.
type Claims struct {
	Subject string   `json:"sub,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	Client  string   `json:"client_id,omitempty"`
	// Scopes are the scopes its token carries (its scope claim).
	Scopes []string `json:"scopes,omitempty"`
	// Token is the caller's bearer JWT, for an RFC 8693 token exchange on
	// its behalf; never recorded nor sent upstream as it is.
	Token string `json:"-"`
}

// String names the caller in a sentence.
func (c Claims) String() string {
	var parts []string
	if c.Subject != "" {
		parts = append(parts, fmt.Sprintf("subject %q", c.Subject))
	}
	if len(c.Groups) > 0 {
		parts = append(parts, fmt.Sprintf("groups %q", c.Groups))
	}
	if c.Client != "" {
		parts = append(parts, fmt.Sprintf("client %q", c.Client))
	}
	if len(parts) == 0 {
		return "A caller with no subject, group or client"
	}
	return "The caller with " + strings.Join(parts, ", ")
}

func (p *Principal) matches(c Claims) bool {
	return p.claims(c) && len(p.missing(c)) == 0
}

// claims reports whether c carries the principal's subject, group and
// client, whatever its scopes.
func (p *Principal) claims(c Claims) bool {
	return (p.Subject == "" || p.Subject == c.Subject) &&
		(p.Group == "" || slices.Contains(c.Groups, p.Group)) &&
		(p.Client == "" || p.Client == c.Client)
}

// missing are the principal's scopes c's token does not carry.
func (p *Principal) missing(c Claims) []string {
	var out []string
	for _, s := range p.Scopes {
		if !slices.Contains(c.Scopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// ErrUnmapped is Principal's error when the policy maps the caller to no
// chain: such a caller is refused.
var ErrUnmapped = errors.New("the caller is mapped to no surface")

type unmapped struct{ sentence string }

func (e unmapped) Error() string        { return e.sentence }
func (e unmapped) Is(target error) bool { return target == ErrUnmapped }

// Principal is the surface chain the caller runs under, and the names of
// the principals that matched it. When several match, their chains must
// lie along one chain, and the deepest (the narrowest, rule P10) is the
// caller's; otherwise, or when none matches, the caller is refused.
func (g *Generation) Principal(c Claims) (chain []string, names []string, err error) {
	var deepest *Principal
	for _, p := range g.Principals {
		if !p.matches(c) {
			continue
		}
		names = append(names, p.Name)
		switch {
		case deepest == nil || Extends(deepest.Surface, p.Surface):
			deepest = p
		case Extends(p.Surface, deepest.Surface):
		default:
			return nil, names, fmt.Errorf("%s is matched by principals %q (%s) and %q (%s), whose chains diverge, so it is refused; map it once, or make one chain extend the other", c, deepest.Name, strings.Join(deepest.Surface, ","), p.Name, strings.Join(p.Surface, ","))
		}
	}
	if deepest == nil {
		for _, p := range g.Principals {
			if p.claims(c) {
				return nil, nil, unmapped{fmt.Sprintf("%s may not call: principal %q, whose claims it carries, also requires the scopes %s, and its token lacks %s; get a token with them", c, p.Name, strings.Join(p.Scopes, " "), strings.Join(p.missing(c), " "))}
			}
		}
		if len(g.Principals) == 0 {
			return nil, nil, unmapped{fmt.Sprintf("%s may not call, because the policy maps no principal; add a principals entry for its subject, group or client", c)}
		}
		return nil, nil, unmapped{fmt.Sprintf("%s may not call, because no entry of the policy's principals matches it; add one for its subject, group or client", c)}
	}
	return slices.Clone(deepest.Surface), names, nil
}

// principals reads the principals block; a chain through a surface the
// policy does not declare is an error at its place.
func (c *compiler) principals(g *Generation, v cue.Value) {
	iter, err := v.Fields()
	if err != nil {
		return
	}
	for iter.Next() {
		pv := iter.Value()
		p := &Principal{Name: iter.Selector().Unquoted(), Pos: c.pos(pv, 0),
			Subject: str(pv.LookupPath(cue.ParsePath("subject"))), Group: str(pv.LookupPath(cue.ParsePath("group"))),
			Client: str(pv.LookupPath(cue.ParsePath("client")))}
		_ = pv.LookupPath(cue.ParsePath("scopes")).Decode(&p.Scopes)
		if p.Subject == "" && p.Group == "" && p.Client == "" {
			c.fail(pv, "P10", "principal %q names no claim, so it would match every caller; give it a subject, group or client.", p.Name)
			continue
		}
		sv := pv.LookupPath(cue.ParsePath("surface"))
		if sv.Decode(&p.Surface) != nil {
			continue // the schema has reported it
		}
		p.Surface = Rooted(p.Surface)
		ok := true
		for i, ref := range p.Surface {
			if _, declared := g.Surfaces[ref]; !declared {
				at := sv
				if el := sv.LookupPath(cue.MakePath(cue.Index(i - (len(p.Surface) - lenList(sv))))); el.Exists() {
					at = el
				}
				c.fail(at, "P10", "principal %q runs on %s, a surface the policy does not declare; declared are %s.", p.Name, ref, joinNames(g.SurfaceRefs()))
				ok = false
			}
		}
		if ok {
			g.Principals = append(g.Principals, p)
		}
	}
	sort.Slice(g.Principals, func(i, j int) bool { return g.Principals[i].Name < g.Principals[j].Name })
}

func lenList(v cue.Value) int {
	n, _ := v.Len().Int64()
	return int(n)
}

// ParseClaims reads a caller as check and test name it: a JSON object of
// a token's claims ({"sub":"alice","groups":["docs"],"client_id":"cli"}),
// or a subject alone.
func ParseClaims(s string) (Claims, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		if s == "" {
			return Claims{}, errors.New("the principal is empty; give a subject, or the claims as JSON such as {\"sub\":\"alice\",\"groups\":[\"docs\"]}")
		}
		return Claims{Subject: s}, nil
	}
	var c Claims
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Claims{}, fmt.Errorf("the principal %s is not claims as JSON (%s); write {\"sub\":\"alice\",\"groups\":[\"docs\"],\"client_id\":\"cli\"}", s, jsonwords.Problem(err))
	}
	return c, nil
}
