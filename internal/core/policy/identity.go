package policy

import (
	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/rule"
)

// Identity is how a streamable-HTTP server is reached for each caller
// (issue 45): the caller's own credential, in Header after Prefix, from a
// token exchange (Exchange) or a per-caller secret (Secret), never the
// caller's own token nor the gateway's alone.
type Identity struct {
	Header, Prefix string
	Exchange       *Exchange
	Secret         string
}

// Exchange is an RFC 8693 token exchange at the issuer's token endpoint.
type Exchange struct {
	TokenURL, Audience, Resource, Scope string
	// ClientID and ClientSecret are the gateway's client at the issuer;
	// ${NAME} in them is the gateway's environment variable.
	ClientID, ClientSecret string
}

// identityOf reads a server's identity block; nil when it has none.
func identityOf(v cue.Value) *Identity {
	if !v.Exists() {
		return nil
	}
	id := &Identity{Header: str(v.LookupPath(cue.ParsePath("header"))), Prefix: str(v.LookupPath(cue.ParsePath("prefix"))),
		Secret: str(v.LookupPath(cue.ParsePath("secret")))}
	if ev := v.LookupPath(cue.ParsePath("exchange")); ev.Exists() {
		f := func(name string) string { return str(ev.LookupPath(cue.ParsePath(name))) }
		id.Exchange = &Exchange{TokenURL: f("token_url"), Audience: f("audience"), Resource: f("resource"), Scope: f("scope"),
			ClientID: f("client_id"), ClientSecret: f("client_secret")}
	}
	return id
}

// checkIdentity holds a server's identity block to its rules: on a server
// reached at a url, with exactly one of exchange and secret.
func (c *compiler) checkIdentity(server string, sv cue.Value) {
	v := sv.LookupPath(cue.ParsePath("identity"))
	has := func(f string) bool { return v.LookupPath(cue.ParsePath(f)).Exists() }
	switch {
	case !sv.LookupPath(cue.ParsePath("url")).Exists():
		c.fail(v, rule.R5, "server %s has an identity, which is how a server reached at its url is called for each caller; a server the gateway starts is one process for every caller, so give it a url or remove identity.", server)
	case has("exchange") == has("secret"):
		c.fail(v, rule.R5, "server %s's identity needs exactly one of exchange (an RFC 8693 token exchange at the issuer) and secret (a per-caller secret from --secrets).", server)
	case has("exchange") && str(v.LookupPath(cue.ParsePath("exchange.audience"))) == "":
		c.fail(v.LookupPath(cue.ParsePath("exchange")), rule.R5, "server %s's identity.exchange needs an audience: the server as the issuer names it, so that the token exchanged is for it alone.", server)
	}
}
