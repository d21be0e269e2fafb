package authn

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/authntest"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

var quiet = slog.New(slog.DiscardHandler)

// TestR5KeysRotateAndAreRemoved: a token signed with a key the issuer
// rotated in is taken at once (its unknown key id fetches the JWKS again);
// a key the issuer removed is refused once the keys are refreshed, within
// the refresh interval; an issuer that is down at a refresh leaves the
// keys fetched before in force and says so.
func TestR5KeysRotateAndAreRemoved(t *testing.T) {
	iss := authntest.New(t)
	const aud = "https://gw.example/mcp"
	v, err := NewOIDC(OIDCConfig{Issuer: iss.URL, Audience: aud, Refresh: 200 * time.Millisecond}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := v.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	old := iss.Token(t, iss.Claims("alice", aud))
	if _, err := v.Verify(ctx, old, nil); err != nil {
		t.Fatalf("a good token is refused: %v", err)
	}
	v.state.Load().keys.min = 100 * time.Millisecond
	time.Sleep(150 * time.Millisecond) // a rotation comes well after the last fetch
	iss.Rotate(t, "k2")
	rotated := iss.Token(t, iss.Claims("bob", aud))
	if ti, err := v.Verify(ctx, rotated, nil); err != nil || ti.UserID != "bob" {
		t.Fatalf("a token of the key rotated in is refused: %v", err)
	}
	go v.Refreshing(ctx)
	iss.Remove("k1")
	waitFor(t, "the removed key refused", func() bool { _, err := v.Verify(ctx, old, nil); return err != nil })
	if _, err := v.Verify(ctx, old, nil); err == nil || !strings.Contains(err.Error(), "not accepted") {
		t.Errorf("the removed key's refusal: %v", err)
	}
	iss.Down(true)
	waitFor(t, "the failed refresh said", func() bool { return v.Degraded() != nil })
	if _, err := v.Verify(ctx, rotated, nil); err != nil {
		t.Errorf("with the issuer down, a token of a key fetched before is refused: %v", err)
	}
	if err := v.Degraded(); !strings.Contains(err.Error(), "cannot be fetched") {
		t.Errorf("Degraded = %v", err)
	}
	iss.Down(false)
	waitFor(t, "the refresh recovered", func() bool { return v.Degraded() == nil })
}

// TestR5UnknownKeyIDsFetchAtMostOncePerInterval: tokens naming key ids
// the issuer never had do not make the gateway fetch the JWKS for each.
func TestR5UnknownKeyIDsFetchAtMostOncePerInterval(t *testing.T) {
	iss := authntest.New(t)
	const aud = "https://gw.example/mcp"
	v, _ := NewOIDC(OIDCConfig{Issuer: iss.URL, Audience: aud}, quiet)
	if err := v.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	other := authntest.OtherKey(t)
	before := iss.Fetch.Load()
	for i := range 50 {
		tok := authntest.Sign(t, "RS256", other, "forged-"+string(rune('a'+i%26)), iss.Claims("eve", aud))
		if _, err := v.Verify(context.Background(), tok, nil); err == nil {
			t.Fatal("a token of a key the issuer never had is taken")
		}
	}
	if n := iss.Fetch.Load() - before; n > 1 {
		t.Errorf("50 tokens of unknown keys fetched the JWKS %d times, want at most 1", n)
	}
}

// TestR5AnIssuerDownAtStartIsWaitedFor: a verifier whose issuer cannot be
// reached is not ready and says why, refuses tokens with a sentence that
// says to try again, and becomes ready once the issuer answers.
func TestR5AnIssuerDownAtStartIsWaitedFor(t *testing.T) {
	iss := authntest.New(t)
	const aud = "https://gw.example/mcp"
	iss.Down(true)
	v, err := NewOIDC(OIDCConfig{Issuer: iss.URL, Audience: aud}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v.Start(ctx)
	waitFor(t, "the failed discovery said", func() bool { return v.Ready() != nil && strings.Contains(v.Ready().Error(), "cannot discover") })
	tok := iss.Token(t, iss.Claims("alice", aud))
	if _, err := v.Verify(ctx, tok, nil); err == nil || !strings.Contains(err.Error(), "try again shortly") {
		t.Errorf("a token before the issuer was reached: %v", err)
	}
	iss.Down(false)
	waitFor(t, "ready", func() bool { return v.Ready() == nil })
	if _, err := v.Verify(ctx, tok, nil); err != nil {
		t.Errorf("a good token once the issuer answers: %v", err)
	}
}

// TestR5VerifierBadInput: a verifier needs an issuer and an audience, and
// an http(s) JWKS URL.
func TestR5VerifierBadInput(t *testing.T) {
	for _, c := range []OIDCConfig{{Audience: "a"}, {Issuer: "i"}, {Issuer: "i", Audience: "a", JWKSURL: "file:///etc/passwd"}} {
		if _, err := NewOIDC(c, quiet); err == nil {
			t.Errorf("NewOIDC(%+v) took it", c)
		}
	}
}
