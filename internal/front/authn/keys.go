package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"aimon.dev/gw/internal/core/policy"
)

// keySet is the issuer's JWKS as last fetched (an oidc.KeySet): fetched
// again on a schedule, so that a key the issuer removed is refused within
// the refresh interval on every replica, and when a token names a key id
// it does not hold (a rotation), at most once per minInterval. A failed
// fetch keeps the keys it has: an issuer that is down does not turn away
// the tokens it signed before.
type keySet struct {
	url    string
	client *http.Client
	keys   atomic.Pointer[jose.JSONWebKeySet]
	min    time.Duration // between fetches for unknown key ids
	mu     sync.Mutex    // one fetch at a time
	last   time.Time     // of the last fetch, under mu
	err    atomic.Pointer[error]
}

// minInterval bounds how often an unknown key id fetches the JWKS.
const minInterval = 5 * time.Second

// maxJWKS bounds a JWKS document.
const maxJWKS = 1 << 20

// fetch reads the JWKS and replaces the keys with it.
func (k *keySet) fetch(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fetchLocked(ctx)
}

func (k *keySet) fetchLocked(ctx context.Context) error {
	k.last = time.Now()
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
		if err != nil {
			return err
		}
		resp, err := k.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("it answered %s", resp.Status)
		}
		var set jose.JSONWebKeySet
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKS)).Decode(&set); err != nil {
			return fmt.Errorf("its JWKS does not read: %v", err)
		}
		k.keys.Store(&set)
		return nil
	}()
	if err != nil {
		err = fmt.Errorf("the issuer's keys at %s cannot be fetched: %w", k.url, err)
		k.err.Store(&err)
		return err
	}
	k.err.Store(nil)
	return nil
}

// lastError is why the last fetch failed; nil when it did not.
func (k *keySet) lastError() error {
	if p := k.err.Load(); p != nil {
		return *p
	}
	return nil
}

// VerifySignature is oidc.KeySet's: the payload of jwt when a key of the
// set with its key id, or any when it names none, signed it.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, algs())
	if err != nil {
		return nil, fmt.Errorf("oidc: malformed jwt: %v", err)
	}
	kid := ""
	if len(jws.Signatures) > 0 {
		kid = jws.Signatures[0].Header.KeyID
	}
	if p, ok := k.verify(jws, kid); ok {
		return p, nil
	}
	// A key id the set lacks may be a key the issuer rotated in.
	k.mu.Lock()
	if time.Since(k.last) >= k.min && !k.has(kid) {
		k.fetchLocked(ctx)
	}
	k.mu.Unlock()
	if p, ok := k.verify(jws, kid); ok {
		return p, nil
	}
	return nil, errors.New("failed to verify signature: no key of the issuer's JWKS signed it")
}

func (k *keySet) has(kid string) bool {
	set := k.keys.Load()
	return set != nil && kid != "" && len(set.Key(kid)) > 0
}

func (k *keySet) verify(jws *jose.JSONWebSignature, kid string) ([]byte, bool) {
	set := k.keys.Load()
	if set == nil {
		return nil, false
	}
	for _, key := range set.Keys {
		if kid != "" && key.KeyID != kid || key.Use != "" && key.Use != "sig" {
			continue
		}
		if p, err := jws.Verify(key); err == nil {
			return p, true
		}
	}
	return nil, false
}

func algs() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(Asymmetric))
	for i, a := range Asymmetric {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}

// An OIDCVerifier verifies an issuer's JWTs and survives the issuer: it
// is made before the issuer is reached, finds the issuer's keys with
// back-off until it does (not ready until then), and keeps them fresh.
type OIDCVerifier struct {
	c     OIDCConfig
	log   *slog.Logger
	state atomic.Pointer[oidcState]
	err   atomic.Pointer[error] // why it is not ready
}

type oidcState struct {
	keys *keySet
	v    *oidc.IDTokenVerifier
}

// NewOIDC is a verifier of c's tokens that has not reached the issuer
// yet; Start reaches it.
func NewOIDC(c OIDCConfig, log *slog.Logger) (*OIDCVerifier, error) {
	if c.Issuer == "" || c.Audience == "" {
		return nil, errors.New("a JWT verifier needs the issuer and the audience")
	}
	if c.JWKSURL != "" {
		if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("the JWKS URL %q is not an http(s) URL", c.JWKSURL)
		}
	}
	if c.GroupsClaim == "" {
		c.GroupsClaim = "groups"
	}
	if c.Client == nil {
		c.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if c.Refresh <= 0 {
		c.Refresh = 5 * time.Minute
	}
	if log == nil {
		log = slog.Default()
	}
	v := &OIDCVerifier{c: c, log: log}
	err := fmt.Errorf("the issuer %s has not been reached yet", c.Issuer)
	v.err.Store(&err)
	return v, nil
}

// Connect reaches the issuer once: its metadata (unless JWKSURL is given)
// and its keys, bounded by ctx.
func (v *OIDCVerifier) Connect(ctx context.Context) error {
	jwks := v.c.JWKSURL
	if jwks == "" {
		p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.c.Client), v.c.Issuer)
		if err != nil {
			return fmt.Errorf("cannot discover the issuer %s's keys: %v", v.c.Issuer, err)
		}
		var meta struct {
			JWKS string `json:"jwks_uri"`
		}
		if err := p.Claims(&meta); err != nil || meta.JWKS == "" {
			return fmt.Errorf("the issuer %s's metadata names no jwks_uri; give --jwks-url", v.c.Issuer)
		}
		if u, err := url.Parse(meta.JWKS); err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("the JWKS URL %q is not an http(s) URL", meta.JWKS)
		}
		jwks = meta.JWKS
	}
	keys := &keySet{url: jwks, client: v.c.Client, min: minInterval}
	if err := keys.fetch(ctx); err != nil {
		return err
	}
	v.state.Store(&oidcState{keys: keys, v: oidc.NewVerifier(v.c.Issuer, keys, &oidc.Config{ClientID: v.c.Audience, SupportedSigningAlgs: Asymmetric})})
	v.err.Store(nil)
	return nil
}

// Start reaches the issuer, retrying with back-off (1 s doubling to 30 s)
// until it does, then fetches its keys every Refresh, until ctx is done.
func (v *OIDCVerifier) Start(ctx context.Context) {
	go func() {
		for wait := time.Second; v.state.Load() == nil; wait = min(2*wait, 30*time.Second) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := v.Connect(cctx)
			cancel()
			if err == nil {
				v.log.Info("identity provider reached", "issuer", v.c.Issuer)
				break
			}
			v.err.Store(&err)
			v.log.Warn("identity provider not reached; retrying", "issuer", v.c.Issuer, "in", wait, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		v.Refreshing(ctx)
	}()
}

// Refreshing fetches the keys every Refresh until ctx is done.
func (v *OIDCVerifier) Refreshing(ctx context.Context) {
	t := time.NewTicker(v.c.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := v.state.Load()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := st.keys.fetch(cctx); err != nil {
			v.log.Warn("the identity provider's keys were not refreshed; the last ones stay in force", "issuer", v.c.Issuer, "err", err)
		}
		cancel()
	}
}

// Ready is nil once the issuer's keys are known; else why not.
func (v *OIDCVerifier) Ready() error {
	if p := v.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Degraded is why the last refresh of the keys failed, while the keys
// fetched before stay in force; nil when it did not.
func (v *OIDCVerifier) Degraded() error {
	if st := v.state.Load(); st != nil {
		return st.keys.lastError()
	}
	return nil
}

// Verify is an auth.TokenVerifier of the issuer's JWTs: signed with an
// asymmetric key of the issuer's JWKS, issued by the issuer, for the
// audience, not expired and already valid (nbf).
func (v *OIDCVerifier) Verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	st := v.state.Load()
	if st == nil {
		return nil, fmt.Errorf("the gateway cannot check bearer tokens yet: %v; try again shortly", v.Ready())
	}
	t, err := st.v.Verify(ctx, token)
	if err != nil {
		return nil, refused("%s", why(err, v.c))
	}
	var raw map[string]any
	if err := t.Claims(&raw); err != nil {
		return nil, refused("the bearer token's claims cannot be read (%v).", err)
	}
	cl := policy.Claims{Subject: t.Subject, Groups: strs(raw[v.c.GroupsClaim]), Token: token}
	if cl.Client, _ = raw["client_id"].(string); cl.Client == "" {
		cl.Client, _ = raw["azp"].(string)
	}
	scope, _ := raw["scope"].(string)
	cl.Scopes = strings.Fields(scope)
	return info(cl, t.Expiry, cl.Scopes), nil
}
