package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/authntest"
)

// TestR5IdentitySurvivesItsProvider: through the binary, an issuer that
// is down when mcp --listen starts keeps the gateway up and not ready —
// /readyz and calls answer 503 with the reason — until the issuer answers,
// when the call runs; a key the issuer then removes is refused within
// --jwks-refresh, and an issuer down at a refresh leaves the keys in
// force and /readyz 200 with a degraded line.
func TestR5IdentitySurvivesItsProvider(t *testing.T) {
	t.Parallel()
	iss := authntest.New(t)
	iss.Down(true)
	const aud = "http://gw.test/mcp"
	g := listenHTTP(t, http.DefaultClient, "--policy", moduleDir(t, httpPolicy), "--workdir", t.TempDir(),
		"--issuer", iss.URL, "--resource", aud, "--jwks-refresh", "300ms")
	readyz := func() (int, string) {
		resp, err := http.Get(g.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"ran"}}}`
	tok := iss.Token(t, iss.Claims("alice", aud))
	waitUntil(t, "the unreachable issuer named in /readyz", func() bool {
		code, body := readyz()
		return code == 503 && strings.Contains(body, "cannot discover the issuer "+iss.URL)
	})
	if status, _, body := g.post("/mcp", tok, call); status != 503 || !strings.Contains(body, "try again") || strings.Contains(body, "ran") {
		t.Errorf("a call before the issuer was reached: %d %s", status, body)
	}
	select {
	case <-g.exited:
		t.Fatalf("the gateway exited with its issuer down: %s", g.logs())
	default:
	}
	iss.Down(false)
	g.waitReady()
	if status, _, body := g.post("/mcp", tok, call); status != 200 || !strings.Contains(body, "ran") {
		t.Fatalf("the call once the issuer answers: %d %s", status, body)
	}
	iss.Rotate(t, "k2")
	iss.Remove("k1")
	waitUntil(t, "the removed key refused", func() bool { status, _, _ := g.post("/mcp", tok, call); return status == 401 })
	if status, _, body := g.post("/mcp", iss.Token(t, iss.Claims("alice", aud)), call); status != 200 || !strings.Contains(body, "ran") {
		t.Errorf("the rotated key's call: %d %s", status, body)
	}
	iss.Down(true)
	waitUntil(t, "the failed refresh named in /readyz", func() bool {
		code, body := readyz()
		return code == 200 && strings.Contains(body, "degraded: the identity provider's keys are not refreshed")
	})
	if status, _, body := g.post("/mcp", iss.Token(t, iss.Claims("alice", aud)), call); status != 200 || !strings.Contains(body, "ran") {
		t.Errorf("with the issuer down, a token of a key fetched before: %d %s", status, body)
	}
}

// waitUntil polls cond for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(25 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestP10HTTPPrincipalNeedsItsScopes: through mcp --listen, a principal
// with scopes serves a caller whose JWT's scope claim carries them, and
// refuses one whose token lacks one with 403 and the scope it lacks.
func TestP10HTTPPrincipalNeedsItsScopes(t *testing.T) {
	t.Parallel()
	iss := authntest.New(t)
	const aud = "http://gw.test/mcp"
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo"]
principals: alice: {subject: "alice", scopes: ["gw:call"], surface: ["agent"]}
`)
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", dir, "--issuer", iss.URL, "--resource", aud)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"ran"}}}`
	with := func(scope string) string {
		c := iss.Claims("alice", aud)
		if scope != "" {
			c["scope"] = scope
		}
		return iss.Token(t, c)
	}
	if status, _, body := g.post("/mcp", with("openid gw:call"), call); status != 200 || !strings.Contains(body, "ran") {
		t.Errorf("with the scope: %d %s", status, body)
	}
	for _, scope := range []string{"", "openid gw:read"} {
		if status, _, body := g.post("/mcp", with(scope), call); status != 403 || !strings.Contains(body, "its token lacks gw:call") || strings.Contains(body, `"ran"`) {
			t.Errorf("scope %q: %d %s", scope, status, body)
		}
	}
}

// TestR5IdentitySurvivesOIDCProvider: the same with a real issuer,
// oidc-provider (npm). mcp --listen started before the issuer listens
// stays up and not ready, /readyz naming the issuer, and serves once it
// comes up; the issuer started again with a new key (a rotation, the old
// key gone from its JWKS) has a token of the old key refused within
// --jwks-refresh and one of the new key served; the gateway never exits.
func TestR5IdentitySurvivesOIDCProvider(t *testing.T) {
	t.Parallel()
	npm := npmDir(t, "oidc-provider")
	const aud = "http://gw.test/mcp"
	clients := []idpClient{{ID: "alice", Secret: "alice-secret-0123456789abcdef"}}
	port := freePort(t)
	issuer := fmt.Sprintf("http://127.0.0.1:%d", port)
	g := listenHTTP(t, http.DefaultClient, "--policy", moduleDir(t, httpPolicy), "--workdir", t.TempDir(),
		"--issuer", issuer, "--resource", aud, "--jwks-refresh", "300ms")
	waitUntil(t, "the unreachable issuer named in /readyz", func() bool {
		resp, err := http.Get(g.base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 503 && strings.Contains(string(b), "cannot discover the issuer "+issuer)
	})
	ip := startIdPAt(t, npm, port, clients)
	ip.wait()
	g.waitReady()
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"ran"}}}`
	old := ip.token(t, "alice", clients[0].Secret, aud)
	if status, _, body := g.post("/mcp", old, call); status != 200 || !strings.Contains(body, "ran") {
		t.Fatalf("the call once the issuer answers: %d %s", status, body)
	}
	ip.stop()
	ip = startIdPAt(t, npm, port, clients)
	ip.wait()
	waitUntil(t, "the old key's token refused", func() bool { status, _, _ := g.post("/mcp", old, call); return status == 401 })
	if status, _, body := g.post("/mcp", ip.token(t, "alice", clients[0].Secret, aud), call); status != 200 || !strings.Contains(body, "ran") {
		t.Errorf("a token of the new key: %d %s", status, body)
	}
	select {
	case <-g.exited:
		t.Fatalf("the gateway exited: %s", g.logs())
	default:
	}
}
