package authn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/auth"

	"aimon.dev/gw/internal/testkit/authntest"
)

// TestR5JWTsAreCheckedWhole: a token is taken only when an asymmetric key
// of the issuer's JWKS signed it, for this audience, by this issuer, and
// it is valid now; each refusal is ErrInvalidToken (401) with a sentence.
// (R5, the closest rule: who calls sets the chain that bounds the call.)
func TestR5JWTsAreCheckedWhole(t *testing.T) {
	iss := authntest.New(t)
	const aud = "https://gw.example/mcp"
	verify, err := OIDC(context.Background(), OIDCConfig{Issuer: iss.URL, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	with := func(change map[string]any) map[string]any {
		c := iss.Claims("alice", aud)
		maps.Copy(c, change)
		maps.DeleteFunc(c, func(_ string, v any) bool { return v == nil })
		return c
	}
	hour := time.Hour
	tests := []struct {
		note, token, says string
	}{
		{"good, with groups and a client", iss.Token(t, with(map[string]any{"groups": []string{"docs", "staff"}, "azp": "cli"})), ""},
		{"aud a list that holds this resource", iss.Token(t, with(map[string]any{"aud": []string{"other", aud}})), ""},
		{"expired", iss.Token(t, with(map[string]any{"exp": time.Now().Add(-hour).Unix()})), "expired at"},
		{"no expiry", iss.Token(t, with(map[string]any{"exp": nil})), "expired at"},
		{"not valid yet", iss.Token(t, with(map[string]any{"nbf": time.Now().Add(hour).Unix()})), "not valid yet"},
		{"another audience", iss.Token(t, with(map[string]any{"aud": "https://other.example/mcp"})), "not for this resource"},
		{"another issuer", iss.Token(t, with(map[string]any{"iss": "https://idp.evil.example"})), "was not issued by"},
		{"alg none", authntest.Unsigned(iss.Claims("alice", aud)), "not a JWT signed with one of"},
		{"a shared secret", authntest.Sign(t, jose.HS256, []byte(strings.Repeat("k", 32)), iss.KID, iss.Claims("alice", aud)), "not a JWT signed with one of"},
		{"a key not in the JWKS", authntest.Sign(t, jose.RS256, authntest.OtherKey(t), "k2", iss.Claims("alice", aud)), "not accepted"},
		{"the issuer's kid, another key", authntest.Sign(t, jose.RS256, authntest.OtherKey(t), iss.KID, iss.Claims("alice", aud)), "not accepted"},
		{"not a JWT", "tok-alice", "not a JWT"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			ti, err := verify(context.Background(), tc.token, nil)
			if tc.says == "" {
				c, ok := Claims(ti)
				if err != nil || !ok || c.Subject != "alice" || ti.Expiration.IsZero() {
					t.Fatalf("%v %+v", err, ti)
				}
				if strings.Contains(tc.note, "groups") && (!slices.Equal(c.Groups, []string{"docs", "staff"}) || c.Client != "cli") {
					t.Errorf("claims %+v", c)
				}
				return
			}
			if !errors.Is(err, auth.ErrInvalidToken) || !strings.Contains(err.Error(), tc.says) || !strings.HasSuffix(err.Error(), ".") {
				t.Errorf("got %v, want a refusal saying %q", err, tc.says)
			}
		})
	}
}

// TestR5JWTVerifierBadInput: an issuer whose metadata cannot be had, or a
// JWKS URL that is not http(s), fails at start with a sentence.
func TestR5JWTVerifierBadInput(t *testing.T) {
	iss := authntest.New(t)
	tests := []struct {
		note string
		c    OIDCConfig
		says string
	}{
		{"no audience", OIDCConfig{Issuer: iss.URL}, "needs the issuer and the audience"},
		{"no discovery", OIDCConfig{Issuer: iss.URL + "/nowhere", Audience: "a"}, "cannot discover the issuer"},
		{"a JWKS URL of another scheme", OIDCConfig{Issuer: iss.URL, Audience: "a", JWKSURL: "file:///etc/jwks"}, "not an http(s) URL"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			if _, err := OIDC(context.Background(), tc.c); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want %q", err, tc.says)
			}
		})
	}
}

// TestR5StaticTokens: a token of the file is its line's caller; any other
// is refused; the file's problems are sentences with their line.
func TestR5StaticTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	// a hash of no token the test sends
	body := "# callers\nsha256:0c1c2ea7f2a4f3a5cd9e83b1d7a5e6d4c4bb0e7c14e5aa1b5ff3c8c8e4b51d3e a\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	verify, err := StaticTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verify(context.Background(), "tok-x", nil); !errors.Is(err, auth.ErrInvalidToken) {
		t.Errorf("an unknown token: %v", err)
	}
	good := "sha256:" + sha("tok-b") + " bob docs,staff\n"
	if err := os.WriteFile(path, []byte(body+good), 0o600); err != nil {
		t.Fatal(err)
	}
	if verify, err = StaticTokens(path); err != nil {
		t.Fatal(err)
	}
	ti, err := verify(context.Background(), "tok-b", (*http.Request)(nil))
	if c, _ := Claims(ti); err != nil || c.Subject != "bob" || !slices.Equal(c.Groups, []string{"docs", "staff"}) {
		t.Errorf("tok-b: %+v %v", ti, err)
	}
	os.Chmod(path, 0o640)
	if _, err := StaticTokens(path); err == nil || !strings.Contains(err.Error(), "mode 0640") {
		t.Errorf("a file the group may read: %v", err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// OIDC returns a verifier of the issuer's bearer JWTs, having reached the
// issuer now, bounded by ctx (see OIDCVerifier for one that waits for it).
func OIDC(ctx context.Context, c OIDCConfig) (auth.TokenVerifier, error) {
	v, err := NewOIDC(c, nil)
	if err != nil {
		return nil, err
	}
	if err := v.Connect(ctx); err != nil {
		return nil, err
	}
	return v.Verify, nil
}
