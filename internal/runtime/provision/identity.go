package provision

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/policy"
)

// Each caller's identity upstream (issue 45): a server with an identity
// is called with the caller's own credential, exchanged at the issuer
// (RFC 8693) or found among the gateway's secrets, never with the
// caller's own token, and a caller without one is refused.

type callerKey struct{}

type caller struct {
	claims *policy.Claims
	told   func(who string)
}

// WithCaller is ctx carrying who calls, for a server reached with each
// caller's identity; told learns the delegated identity a call used (its
// subject and audience, never the token), for the decision log.
func WithCaller(ctx context.Context, c *policy.Claims, told func(who string)) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, callerKey{}, caller{c, told})
}

func callerFrom(ctx context.Context) *policy.Claims {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c.claims
}

// tell tells ctx's caller the delegated identity a call used.
func tell(ctx context.Context, who string) {
	if c, _ := ctx.Value(callerKey{}).(caller); c.told != nil {
		c.told(who)
	}
}

// A credential is the header one call of a server carries.
type credential struct {
	header, value string
	// who names the delegated identity for the record: its subject and
	// audience, never the token.
	who string
}

type credentialKey struct{}

// credentialFor is the caller's credential for the server s, or the
// sentence of why there is none.
func (s *upstream) credentialFor(ctx context.Context) (*credential, error) {
	id := s.spec.Identity
	c := callerFrom(ctx)
	if c == nil || c.Subject == "" {
		return nil, fmt.Errorf("the MCP server %s is reached with each caller's own identity, and this call names no caller; call it through mcp --listen with a bearer token", s.spec.Server)
	}
	if id.Exchange != nil {
		tok, err := s.u.exchanges.get(ctx, id.Exchange, c)
		if err != nil {
			return nil, err
		}
		return &credential{header: id.Header, value: id.Prefix + tok, who: fmt.Sprintf("subject %q for audience %q (token exchange)", c.Subject, id.Exchange.Audience)}, nil
	}
	val, from, err := s.u.secretFor(id.Secret, c)
	if err != nil {
		return nil, fmt.Errorf("the MCP server %s is reached with each caller's own credential, and %s has none: %v; ask the operator for one", s.spec.Server, c, err)
	}
	return &credential{header: id.Header, value: id.Prefix + val, who: fmt.Sprintf("subject %q with secret %s/%s", c.Subject, id.Secret, from)}, nil
}

// secretFor reads the secret name of caller c: DIR/NAME/user.SUBJECT,
// else DIR/NAME/group.GROUP of its first group with one.
func (u *Upstreams) secretFor(name string, c *policy.Claims) (val, from string, err error) {
	if u.Secrets == "" {
		return "", "", errors.New("the gateway was started without --secrets")
	}
	keys := []string{"user." + c.Subject}
	for _, g := range c.Groups {
		keys = append(keys, "group."+g)
	}
	for _, k := range keys {
		if strings.ContainsAny(k, "/\x00") || k == "user.." || k == "group.." {
			continue // a name that is not one file of the directory
		}
		b, err := os.ReadFile(filepath.Join(u.Secrets, name, k))
		if err == nil {
			return strings.TrimRight(string(b), "\r\n"), k, nil
		}
	}
	return "", "", fmt.Errorf("no secret %s in %s for user.%s or its groups", name, u.Secrets, c.Subject)
}

// exchanges caches the tokens received by RFC 8693 token exchange, by
// the caller's token and the exchange, until shortly before they expire.
type exchanges struct {
	mu     sync.Mutex
	tokens map[[sha256.Size]byte]exchanged
	client *http.Client
}

type exchanged struct {
	token   string
	expires time.Time
}

// maxExchanged bounds the cache; past it, expired tokens are swept.
const maxExchanged = 10_000

func (e *exchanges) get(ctx context.Context, x *policy.Exchange, c *policy.Claims) (string, error) {
	if c.Token == "" {
		return "", fmt.Errorf("the caller %s has no token of an issuer to exchange (static tokens cannot be); give it a JWT of the issuer", c)
	}
	key := sha256.Sum256([]byte(c.Token + "\x00" + x.TokenURL + "\x00" + x.Audience + "\x00" + x.Resource + "\x00" + x.Scope))
	e.mu.Lock()
	if t, ok := e.tokens[key]; ok && time.Now().Before(t.expires) {
		e.mu.Unlock()
		return t.token, nil
	}
	e.mu.Unlock()
	tok, ttl, err := e.exchange(ctx, x, c.Token)
	if err != nil {
		return "", err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tokens == nil {
		e.tokens = map[[sha256.Size]byte]exchanged{}
	}
	if len(e.tokens) >= maxExchanged {
		for k, t := range e.tokens {
			if time.Now().After(t.expires) {
				delete(e.tokens, k)
			}
		}
	}
	if ttl > 30*time.Second && len(e.tokens) < maxExchanged {
		e.tokens[key] = exchanged{tok, time.Now().Add(ttl - 30*time.Second)}
	}
	return tok, nil
}

// exchange is one RFC 8693 request at the issuer's token endpoint.
func (e *exchanges) exchange(ctx context.Context, x *policy.Exchange, subject string) (string, time.Duration, error) {
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {subject},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:access_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
		"audience":             {x.Audience},
	}
	if x.Resource != "" {
		form.Set("resource", x.Resource)
	}
	if x.Scope != "" {
		form.Set("scope", x.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if x.ClientID != "" {
		id, err := expandEnv(x.ClientID)
		if err != nil {
			return "", 0, fmt.Errorf("identity.exchange.client_id %v; set it in the gateway's environment", err)
		}
		secret, err := expandEnv(x.ClientSecret)
		if err != nil {
			return "", 0, fmt.Errorf("identity.exchange.client_secret %v; set it in the gateway's environment", err)
		}
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	}
	client := e.client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("the issuer's token endpoint %s cannot be reached for a token exchange: %v", x.TokenURL, err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil && resp.StatusCode == http.StatusOK {
		return "", 0, fmt.Errorf("the issuer's token endpoint %s answered a token exchange with what is not JSON: %v", x.TokenURL, err)
	}
	if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return "", 0, fmt.Errorf("the issuer refused to exchange the caller's token for audience %q (%s %s: %s), so the caller has no credential for it until the issuer grants the exchange", x.Audience, resp.Status, out.Error, out.Description)
	}
	return out.AccessToken, time.Duration(out.ExpiresIn) * time.Second, nil
}
