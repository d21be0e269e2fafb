package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/authntest"
)

// whoamiServer is an upstream streamable-HTTP MCP server whose tool whoami
// answers with who its Authorization header says calls (check says if the
// header is good); seen keeps every header it got.
func whoamiServer(t *testing.T, check func(auth string) (string, error)) (url string, seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	s := mcp.NewServer(&mcp.Implementation{Name: "whoami", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "who calls"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		auth := req.Extra.Header.Get("Authorization")
		mu.Lock()
		got = append(got, auth)
		mu.Unlock()
		who, err := check(auth)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "refused: " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: who}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

// TestR5EachCallerReachesTheUpstreamAsItself: through mcp --listen, a
// server whose identity is an RFC 8693 exchange is called with a token the
// issuer exchanged for the caller — its subject, for the server's
// audience, acting as the gateway — never with the caller's own token nor
// the gateway's, exchanged once and then cached; a server whose identity
// is a per-caller secret gets the caller's secret, or its group's; a
// caller with no credential is refused with a sentence and its call never
// reaches the server; the decision log names each delegated identity and
// holds no token.
func TestR5EachCallerReachesTheUpstreamAsItself(t *testing.T) {
	t.Parallel()
	iss := authntest.New(t)
	const aud, api = "http://gw.test/mcp", "https://api.test"
	apiURL, apiSeen := whoamiServer(t, func(auth string) (string, error) {
		c, err := iss.Verify(strings.TrimPrefix(auth, "Bearer "))
		if err != nil {
			return "", err
		}
		act, _ := c["act"].(map[string]any)
		if c["aud"] != api {
			return "", fmt.Errorf("the token is for %v, not %s", c["aud"], api)
		}
		return fmt.Sprintf("sub=%v act=%v", c["sub"], act["sub"]), nil
	})
	vaultURL, vaultSeen := whoamiServer(t, func(auth string) (string, error) { return "auth=" + auth, nil })
	secrets := t.TempDir()
	writeFile(t, secrets+"/vault/user.alice", "alice-vault-key\n")
	writeFile(t, secrets+"/vault/group.reviewers", "reviewers-vault-key\n")
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: api: {url: %q, expose: ["whoami"], pin: false, headers: Authorization: "Bearer the-gateways-own",
	identity: exchange: {token_url: %q, audience: %q, client_id: "${AIMON_TEST_CLIENT}", client_secret: "${AIMON_TEST_SECRET}"}}
servers: vault: {url: %q, expose: ["whoami"], pin: false, identity: secret: "vault"}
agent: "allowed-tools": ["api__whoami", "vault__whoami"]
principals: {
	alice: {subject: "alice", surface: ["agent"]}
	reviewers: {group: "reviewers", surface: ["agent"]}
	bob: {subject: "bob", surface: ["agent"]}
}
`, apiURL, iss.URL+"/token", api, vaultURL))
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTPEnv(t, []string{"AIMON_TEST_CLIENT=" + authntest.ClientID, "AIMON_TEST_SECRET=" + authntest.ClientSecret},
		"--policy", dir, "--workdir", dir, "--issuer", iss.URL, "--resource", aud, "--secrets", secrets, "--decision-log", dlog)
	call := func(token, tool string) (string, bool) {
		t.Helper()
		res, err := g.session(token, "", nil).CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return resultText(res), res.IsError
	}
	alice := iss.Token(t, iss.Claims("alice", aud))
	for range 3 {
		if text, isErr := call(alice, "api__whoami"); isErr || text != "sub=alice act="+authntest.ClientID {
			t.Errorf("alice through the exchange: %q", text)
		}
	}
	if n := iss.Exchanges.Load(); n != 1 {
		t.Errorf("three calls with one token made %d exchanges, want 1 (cached)", n)
	}
	rita := iss.Claims("rita", aud)
	rita["groups"] = []string{"reviewers"}
	ritaTok := iss.Token(t, rita)
	if text, isErr := call(ritaTok, "api__whoami"); isErr || text != "sub=rita act="+authntest.ClientID {
		t.Errorf("rita through the exchange: %q", text)
	}
	for _, h := range apiSeen() {
		if tok := strings.TrimPrefix(h, "Bearer "); tok == alice || tok == ritaTok || tok == "the-gateways-own" {
			t.Errorf("the upstream got the caller's own token or the gateway's: %q", h)
		}
	}
	if text, isErr := call(alice, "vault__whoami"); isErr || text != "auth=Bearer alice-vault-key" {
		t.Errorf("alice's own secret: %q", text)
	}
	if text, isErr := call(ritaTok, "vault__whoami"); isErr || text != "auth=Bearer reviewers-vault-key" {
		t.Errorf("rita's group's secret: %q", text)
	}
	before := len(vaultSeen())
	text, isErr := call(iss.Token(t, iss.Claims("bob", aud)), "vault__whoami")
	if !isErr || !strings.Contains(text, "was not run") || !strings.Contains(text, `subject "bob"`) || !strings.Contains(text, "no secret vault") {
		t.Errorf("bob without a secret: %q", text)
	}
	if len(vaultSeen()) != before {
		t.Errorf("bob's call without a credential reached the server")
	}
	g.stop()
	log, err := os.ReadFile(dlog)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"delegated":"subject \"alice\" for audience \"https://api.test\" (token exchange)"`, `"delegated":"subject \"rita\" with secret vault/group.reviewers"`} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the decision log lacks %s:\n%s", want, log)
		}
	}
	for _, secret := range []string{alice, ritaTok, "alice-vault-key", "reviewers-vault-key"} {
		if strings.Contains(string(log), secret) {
			t.Errorf("the decision log holds a credential")
		}
	}
}

// TestR5IdentityBadInput: an identity on a server the gateway starts, one
// with both or neither of exchange and secret, an exchange without an
// audience and a secret name that is a path are load errors at their place.
func TestR5IdentityBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, says string }{
		{`{command: ["x"], expose: ["a"], identity: secret: "v"}`, "a server the gateway starts is one process for every caller"},
		{`{url: "http://x/mcp", expose: ["a"], identity: {}}`, "needs exactly one of exchange"},
		{`{url: "http://x/mcp", expose: ["a"], identity: {secret: "v", exchange: {token_url: "http://i/t", audience: "a"}}}`, "needs exactly one of exchange"},
		{`{url: "http://x/mcp", expose: ["a"], identity: exchange: {token_url: "http://i/t", audience: ""}}`, "needs an audience"},
		{`{url: "http://x/mcp", expose: ["a"], identity: secret: "../etc"}`, "identity.secret"},
	} {
		dir := moduleDir(t, "package policy\n\nservers: s: "+tc.server+"\n")
		out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.says) || !strings.Contains(string(out), "policy.cue:3:") {
			t.Errorf("%s: %v %s; want a finding at policy.cue:3 saying %q", tc.server, err, out, tc.says)
		}
	}
}

// TestR5TokenExchangeAtOIDCProvider: the exchange at a real issuer,
// oidc-provider (npm) given an RFC 8693 grant (testdata/scale/idp.mjs).
// A caller's token it issued, presented to mcp --listen, is exchanged
// there for a token of the same subject for the upstream's audience,
// acting as the gateway, which the upstream verifies against the issuer's
// keys (go-oidc); two calls cost one exchange (the token is cached); a
// caller the issuer will not exchange for is refused with the issuer's
// reason and its call never reaches the upstream.
func TestR5TokenExchangeAtOIDCProvider(t *testing.T) {
	t.Parallel()
	npm := npmDir(t, "oidc-provider")
	const aud, api = "http://gw.test/mcp", "https://api.test"
	clients := []idpClient{
		{ID: "alice", Secret: "alice-secret-0123456789abcdef", Scope: "mcp mcp:delegate"},
		{ID: "bob", Secret: "bob-secret-0123456789abcdef", Scope: "mcp"},
		{ID: "aimon-gw", Secret: "gw-secret-0123456789abcdef", GrantTypes: []string{"urn:ietf:params:oauth:grant-type:token-exchange"}},
	}
	ip := startIdPClients(t, npm, clients)
	gatewayBinary(t) // builds while node starts
	ip.wait()
	ctx := context.Background()
	provider, err := oidc.NewProvider(ctx, ip.issuer)
	if err != nil {
		t.Fatalf("the identity provider's discovery: %v", err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: api})
	apiURL, apiSeen := whoamiServer(t, func(auth string) (string, error) {
		tok, err := verifier.Verify(ctx, strings.TrimPrefix(auth, "Bearer "))
		if err != nil {
			return "", err
		}
		var c struct {
			Act      struct{ Sub string } `json:"act"`
			ClientID string               `json:"client_id"`
		}
		if err := tok.Claims(&c); err != nil {
			return "", err
		}
		return fmt.Sprintf("sub=%s act=%s client=%s", tok.Subject, c.Act.Sub, c.ClientID), nil
	})
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: api: {url: %q, expose: ["whoami"], pin: false,
	identity: exchange: {token_url: %q, audience: %q, client_id: "${AIMON_TEST_CLIENT}", client_secret: "${AIMON_TEST_SECRET}"}}
agent: "allowed-tools": ["api__whoami"]
principals: {
	alice: {subject: "alice", surface: ["agent"]}
	bob: {subject: "bob", surface: ["agent"]}
}
`, apiURL, ip.issuer+"/token", api))
	g := startHTTPEnv(t, []string{"AIMON_TEST_CLIENT=aimon-gw", "AIMON_TEST_SECRET=gw-secret-0123456789abcdef"},
		"--policy", dir, "--workdir", dir, "--issuer", ip.issuer, "--resource", aud)
	call := func(token string) (string, bool) {
		t.Helper()
		res, err := g.session(token, "", nil).CallTool(ctx, &mcp.CallToolParams{Name: "api__whoami", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("api__whoami: %v", err)
		}
		return resultText(res), res.IsError
	}
	alice := ip.tokenScoped(t, "alice", clients[0].Secret, aud, "mcp mcp:delegate")
	for i := range 2 {
		if text, isErr := call(alice); isErr || text != "sub=alice act=aimon-gw client=aimon-gw" {
			t.Errorf("alice's call %d through the exchange: %q", i+1, text)
		}
	}
	if n := ip.exchanges(t); n != 1 {
		t.Errorf("two calls with one token made %d exchanges at the issuer, want 1 (cached)", n)
	}
	seen := apiSeen()
	for _, h := range seen {
		if strings.TrimPrefix(h, "Bearer ") == alice {
			t.Errorf("the upstream got the caller's own token")
		}
	}
	text, isErr := call(ip.token(t, "bob", clients[1].Secret, aud))
	if !isErr || !strings.Contains(text, "api__whoami was not run") || !strings.Contains(text, "the issuer refused to exchange") ||
		!strings.Contains(text, "the subject bob does not let a client act for it") {
		t.Errorf("bob, whom the issuer will not exchange for: %q", text)
	}
	if len(apiSeen()) != len(seen) {
		t.Errorf("bob's call without a credential reached the upstream")
	}
	if n := ip.exchanges(t); n != 1 {
		t.Errorf("the issuer granted %d exchanges, want alice's one", n)
	}
}
