// Package authn tells who calls the gateway over HTTP: an OAuth 2.1
// resource server's bearer JWTs checked against the issuer's keys (the MCP
// authorization spec), or static tokens from a file for a team without an
// identity provider. Either is an auth.TokenVerifier for the go-sdk's
// RequireBearerToken, and puts the caller's claims in the TokenInfo.
package authn

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/sandbox"
)

// claimsKey holds a caller's claims in TokenInfo.Extra.
const claimsKey = "aimon-gw/claims"

// Claims are the caller's claims that a verifier put in ti; ok is false
// when ti holds none (no verifier of this package made it).
func Claims(ti *auth.TokenInfo) (policy.Claims, bool) {
	if ti == nil {
		return policy.Claims{}, false
	}
	c, ok := ti.Extra[claimsKey].(policy.Claims)
	return c, ok
}

func info(c policy.Claims, exp time.Time, scopes []string) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: c.Subject, Expiration: exp, Scopes: scopes, Extra: map[string]any{claimsKey: c}}
}

// refused is a token that is not accepted: 401, with the sentence.
func refused(format string, args ...any) error {
	return refusal(fmt.Sprintf(format, args...))
}

// refusal is auth.ErrInvalidToken that reads as its sentence alone.
type refusal string

func (r refusal) Error() string        { return string(r) }
func (r refusal) Is(target error) bool { return target == auth.ErrInvalidToken }

// Asymmetric are the signing algorithms accepted: a key the issuer alone
// holds signs, so no shared secret (HS256) and never "none".
var Asymmetric = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// OIDCConfig configures JWT verification.
type OIDCConfig struct {
	// Issuer is the authorization server, exactly as its tokens' iss.
	Issuer string
	// Audience is what a token's aud must hold: this resource's URL (RFC 8707).
	Audience string
	// JWKSURL is where the issuer's keys are; "" to discover it from the
	// issuer's metadata (/.well-known/openid-configuration).
	JWKSURL string
	// GroupsClaim names the claim that lists the caller's groups; "" for "groups".
	GroupsClaim string
	// Client makes the requests to the issuer; nil for one with a 10 s
	// timeout.
	Client *http.Client
	// Refresh is how often the issuer's keys are fetched again, so that a
	// key it removed is refused; 0 for 5 minutes.
	Refresh time.Duration
}

// why is the sentence for a token go-oidc refused.
func why(err error, c OIDCConfig) string {
	var exp *oidc.TokenExpiredError
	msg := strings.TrimPrefix(err.Error(), "oidc: ")
	switch {
	case errors.As(err, &exp):
		return fmt.Sprintf("The bearer token expired at %s; get a new one from %s.", exp.Expiry.UTC().Format(time.RFC3339), c.Issuer)
	case strings.Contains(msg, "expected audience"):
		return fmt.Sprintf("The bearer token is not for this resource (%s); get one from %s with resource=%s.", msg, c.Issuer, c.Audience)
	case strings.Contains(msg, "different provider"):
		return fmt.Sprintf("The bearer token was not issued by %s (%s); get one from it.", c.Issuer, msg)
	case strings.Contains(msg, "nbf"):
		return fmt.Sprintf("The bearer token is not valid yet (%s); check the clocks, or wait.", msg)
	case strings.Contains(msg, "malformed jwt"):
		return fmt.Sprintf("The bearer token is not a JWT signed with one of %s (%s); get one from %s.", strings.Join(Asymmetric, ", "), msg, c.Issuer)
	}
	return fmt.Sprintf("The bearer token is not accepted (%s); get one from %s.", msg, c.Issuer)
}

func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// staticToken is one line of a tokens file.
type staticToken struct {
	hash   [sha256.Size]byte
	claims policy.Claims
}

// StaticTokens reads a file of tokens, one a line as
//
//	sha256:HEX SUBJECT [GROUP,GROUP...]
//
// (HEX is the sha256 of the token, so the file holds no secret; "#"
// starts a comment), and returns a verifier of them. The file must be a
// regular file that no one but its owner may read or write.
func StaticTokens(path string) (auth.TokenVerifier, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tokens file %s: %v", path, unwrapPath(err))
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the tokens file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the tokens file %s may be read or written by others (mode %04o); chmod 600 it", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the tokens file %s: %v", path, unwrapPath(err))
	}
	// A command that added a line would be a caller from the next start.
	if abs, err := filepath.Abs(path); err == nil {
		sandbox.Protect("the tokens file of mcp --listen's callers", abs)
	}
	var tokens []staticToken
	seen := map[[sha256.Size]byte]int{}
	for i, line := range strings.Split(string(data), "\n") {
		if c, _, ok := strings.Cut(line, "#"); ok {
			line = c
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", path, i+1)
		if len(f) > 3 {
			return nil, fmt.Errorf("%s: a line is sha256:HEX SUBJECT [GROUP,...], and this one has %d fields", at, len(f))
		}
		h, ok := strings.CutPrefix(f[0], "sha256:")
		b, err := hex.DecodeString(h)
		if !ok || err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("%s: %q is not sha256: and 64 hex digits; write the token's hash (printf %%s TOKEN | sha256sum), never the token", at, f[0])
		}
		if len(f) < 2 {
			return nil, fmt.Errorf("%s: the token has no subject; write sha256:HEX SUBJECT [GROUP,...]", at)
		}
		t := staticToken{claims: policy.Claims{Subject: f[1]}}
		copy(t.hash[:], b)
		if len(f) == 3 {
			t.claims.Groups = strings.Split(f[2], ",")
		}
		if prev, dup := seen[t.hash]; dup {
			return nil, fmt.Errorf("%s: the same token is on line %d; give each caller its own", at, prev)
		}
		seen[t.hash] = i + 1
		tokens = append(tokens, t)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("the tokens file %s holds no token", path)
	}
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		h := sha256.Sum256([]byte(token))
		var found *staticToken
		for i := range tokens {
			// Every hash is compared, in constant time.
			if subtle.ConstantTimeCompare(h[:], tokens[i].hash[:]) == 1 {
				found = &tokens[i]
			}
		}
		if found == nil {
			return nil, refused("The bearer token is not one of this gateway's tokens; ask its operators for one.")
		}
		return info(found.claims, time.Time{}, nil), nil
	}, nil
}

// unwrapPath is a file system error without the path and system call it
// names ("stat x: no such file"), which the sentence says in words.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
