// Package authntest is an OAuth issuer for tests: its metadata and JWKS
// served by httptest, and the tokens it signs, good and bad.
package authntest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// An Issuer signs tokens with the key its JWKS lists.
type Issuer struct {
	URL string
	Key *rsa.PrivateKey
	KID string

	mu    sync.Mutex
	keys  []jose.JSONWebKey // what its JWKS lists
	down  bool              // it answers every request 503
	Fetch atomic.Int64      // how many times its JWKS was fetched
	// Exchanges counts the RFC 8693 token exchanges it granted.
	Exchanges atomic.Int64
}

// ClientID and ClientSecret are the one client its token endpoint takes.
const ClientID, ClientSecret = "aimon-gw", "gw-client-secret"

// exchange is an RFC 8693 token exchange: a subject token it signed
// itself, still valid, for the audience asked, by its client; the token
// it returns is the subject's, for that audience, acting as the client.
func (iss *Issuer) exchange(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, kind, why string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": kind, "error_description": why})
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != ClientID || secret != ClientSecret {
		fail(http.StatusUnauthorized, "invalid_client", "unknown client")
		return
	}
	if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || r.FormValue("audience") == "" {
		fail(http.StatusBadRequest, "invalid_request", "not a token exchange for an audience")
		return
	}
	iss.mu.Lock()
	keys := jose.JSONWebKeySet{Keys: slices.Clone(iss.keys)}
	iss.mu.Unlock()
	var claims map[string]any
	tok, err := jwt.ParseSigned(r.FormValue("subject_token"), []jose.SignatureAlgorithm{jose.RS256})
	if err == nil {
		err = tok.Claims(keys, &claims)
	}
	if err != nil {
		fail(http.StatusBadRequest, "invalid_grant", "the subject token is not one of this issuer's: "+err.Error())
		return
	}
	if exp, _ := claims["exp"].(float64); int64(exp) < time.Now().Unix() {
		fail(http.StatusBadRequest, "invalid_grant", "the subject token expired")
		return
	}
	out := iss.Claims(claims["sub"].(string), r.FormValue("audience"))
	out["act"] = map[string]any{"sub": ClientID}
	iss.mu.Lock()
	key, kid := iss.Key, iss.KID
	iss.mu.Unlock()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		fail(http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	signed, _ := jwt.Signed(s).Claims(out).Serialize()
	iss.Exchanges.Add(1)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"access_token": signed, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
		"token_type": "Bearer", "expires_in": 3600})
}

// Verify checks a token it signed and returns its claims.
func (iss *Issuer) Verify(token string) (map[string]any, error) {
	iss.mu.Lock()
	keys := jose.JSONWebKeySet{Keys: slices.Clone(iss.keys)}
	iss.mu.Unlock()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	return claims, tok.Claims(keys, &claims)
}

// New starts an issuer for the test: /.well-known/openid-configuration
// and /jwks, over plain HTTP on the loopback interface.
func New(t testing.TB) *Issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &Issuer{Key: key, KID: "k1"}
	iss.keys = []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: iss.KID, Algorithm: "RS256", Use: "sig"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": iss.URL, "jwks_uri": iss.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		iss.Fetch.Add(1)
		iss.mu.Lock()
		defer iss.mu.Unlock()
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: iss.keys})
	})
	mux.HandleFunc("POST /token", iss.exchange)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.mu.Lock()
		down := iss.down
		iss.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	iss.URL = srv.URL
	return iss
}

// Rotate makes a new key with id kid the one Token signs with, listed
// beside the old ones.
func (iss *Issuer) Rotate(t testing.TB, kid string) {
	t.Helper()
	key := OtherKey(t)
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.Key, iss.KID = key, kid
	iss.keys = append(iss.keys, jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
}

// Remove takes the key with id kid out of the JWKS.
func (iss *Issuer) Remove(kid string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keys = slices.DeleteFunc(iss.keys, func(k jose.JSONWebKey) bool { return k.KeyID == kid })
}

// Down makes the issuer answer every request 503 (true) or serve again.
func (iss *Issuer) Down(down bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.down = down
}

// Claims are a good token's for subject and audience: issued by iss,
// valid from a minute ago for an hour.
func (iss *Issuer) Claims(subject, audience string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": iss.URL, "sub": subject, "aud": audience,
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Token signs claims with the issuer's key.
func (iss *Issuer) Token(t testing.TB, claims map[string]any) string {
	iss.mu.Lock()
	key, kid := iss.Key, iss.KID
	iss.mu.Unlock()
	return Sign(t, jose.RS256, key, kid, claims)
}

// Sign signs claims with key under kid, with alg.
func Sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Unsigned is claims as a JWT of alg "none", which no verifier may take.
func Unsigned(claims map[string]any) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "."
}

// OtherKey is an RSA key no JWKS of an Issuer lists.
func OtherKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
