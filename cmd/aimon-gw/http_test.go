package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/authntest"
	"aimon.dev/gw/internal/testkit/lockedbuf"
	"aimon.dev/gw/internal/testkit/mcptest"
)

// httpPolicy maps alice to the agent and the reviewers group (and the ci
// client) to the reviewer, whose list is narrower.
const httpPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read, Glob: schema.#Glob, Bash: schema.#Bash & {sandbox: mode: "off"}}
validation: "enforce"
agent: "allowed-tools": ["Echo", "Read(./**)", "Glob(./**)", "Bash(sleep:*)"]
subagents: reviewer: {"allowed-tools": ["Read(./**)"], "max-effect": "read"}
principals: {
	alice:     {subject: "alice", surface: ["agent"]}
	reviewers: {group: "reviewers", surface: ["agent", "subagent:reviewer"]}
	"ci-bot":  {client: "ci", surface: ["agent", "subagent:reviewer"]}
}
`

// tokensFile writes a static tokens file: token → "SUBJECT [GROUPS]".
func tokensFile(t *testing.T, tokens map[string]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test tokens\n")
	for tok, who := range tokens {
		h := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&b, "sha256:%s %s\n", hex.EncodeToString(h[:]), who)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var staticTokens = map[string]string{"tok-alice": "alice", "tok-rita": "rita reviewers", "tok-eve": "eve guests"}

// httpGW is aimon-gw mcp --listen running as a process.
type httpGW struct {
	t      *testing.T
	base   string
	client *http.Client
	cmd    *exec.Cmd
	stderr lockedbuf.Buffer
	exited chan struct{}
}

func (g *httpGW) logs() string {
	return g.stderr.String()
}

// startHTTP runs mcp --listen on a port of its choosing with args and
// waits until /readyz says a policy is in force. client reaches it (TLS).
func startHTTP(t *testing.T, client *http.Client, args ...string) *httpGW {
	t.Helper()
	g := listenHTTP(t, client, args...)
	g.waitReady()
	return g
}

// startHTTPEnv is startHTTP with env added to the gateway's environment.
func startHTTPEnv(t *testing.T, env []string, args ...string) *httpGW {
	t.Helper()
	g := listenHTTPEnv(t, http.DefaultClient, env, args...)
	g.waitReady()
	return g
}

// listenHTTP runs mcp --listen as startHTTP does, and waits until it
// listens only.
func listenHTTP(t *testing.T, client *http.Client, args ...string) *httpGW {
	t.Helper()
	return listenHTTPEnv(t, client, nil, args...)
}

func listenHTTPEnv(t *testing.T, client *http.Client, env []string, args ...string) *httpGW {
	t.Helper()
	scheme := "http"
	if client.Transport != nil {
		scheme = "https"
	}
	g := &httpGW{t: t, client: client, exited: make(chan struct{})}
	g.cmd = exec.Command(gatewayBinary(t), append([]string{"mcp", "--listen", "127.0.0.1:0", "--log-format", "json", "--drain-delay", "0"}, args...)...)
	if env != nil {
		g.cmd.Env = append(os.Environ(), env...)
	}
	errPipe, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			g.stderr.Write(append(sc.Bytes(), '\n'))
			var l struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "listening" {
				addr <- l.Addr
			}
		}
		g.cmd.Wait()
		close(g.exited)
	}()
	t.Cleanup(func() { g.stop() })
	select {
	case a := <-addr:
		g.base = scheme + "://" + a
	case <-g.exited:
		t.Fatalf("the gateway exited before listening: %s", g.logs())
	}
	return g
}

// waitReady waits until /readyz answers 200.
func (g *httpGW) waitReady() {
	t := g.t
	t.Helper()
	for {
		resp, err := g.client.Get(g.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-g.exited:
			t.Fatalf("the gateway exited before it was ready: %s", g.logs())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits; it returns the exit code.
func (g *httpGW) stop() int {
	select {
	case <-g.exited:
	default:
		g.cmd.Process.Signal(syscall.SIGTERM)
		<-g.exited
	}
	return g.cmd.ProcessState.ExitCode()
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	base := b.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// session connects the Go SDK's streamable-HTTP client with token, at
// protocol version (the SDK's latest when "").
func (g *httpGW) session(token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	g.t.Helper()
	hc := &http.Client{Transport: bearer{token, g.client.Transport}}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, opts).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: g.base + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		g.t.Fatalf("connecting with %s: %v\n%s", token, err, g.logs())
	}
	g.t.Cleanup(func() { s.Close() })
	return s
}

// post sends body to path with a bearer token ("" for none).
func (g *httpGW) post(path, token, body string) (int, http.Header, string) {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestR7HTTPVerdictsEqualCheck: the Go SDK's streamable-HTTP client, at
// the stateless 2026-07-28 protocol and at 2025-11-25 (the SDK's
// stateless mode), lists the tools of its principal's chain (rule P9) and
// gets, call for call, the verdict check gives for that principal; the
// decision log names the principal.
func TestR7HTTPVerdictsEqualCheck(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	writeFile(t, filepath.Join(wd, "a.txt"), "hello\n")
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--decision-log", dlog)
	calls := []struct {
		note string
		name string
		args map[string]any
	}{
		{"echo", "Echo", map[string]any{"message": "hi"}},
		{"a file under the working directory", "Read", map[string]any{"file_path": filepath.Join(wd, "a.txt")}},
		{"a file outside it", "Read", map[string]any{"file_path": "/etc/hostname"}},
		{"a glob", "Glob", map[string]any{"pattern": "*.txt"}},
		{"a misspelt parameter", "Read", map[string]any{"file_paht": "a.txt"}},
		{"an unknown tool", "Wirte", map[string]any{}},
	}
	var lines []string
	for i, c := range calls {
		line, _ := json.Marshal(map[string]any{"type": "tool_use", "id": fmt.Sprint(i), "name": c.name, "input": c.args})
		lines = append(lines, string(line))
	}
	for _, who := range []struct{ token, principal, tools string }{
		{"tok-alice", "alice", "Bash,Echo,Glob,Read"},
		{"tok-rita", `{"sub":"rita","groups":["reviewers"]}`, "Read"},
	} {
		// check's verdicts on the calls as this principal: one process,
		// one load of the policy, for both protocol versions.
		verdicts := checkLines(t, lines, "--policy", dir, "--workdir", wd, "--principal", who.principal)
		for _, version := range []string{"", "2025-11-25"} {
			t.Run(who.token+" "+version, func(t *testing.T) {
				s := g.session(who.token, version, nil)
				if got := toolNames(t, s); got != who.tools {
					t.Errorf("tools %s, want %s", got, who.tools)
				}
				for i, c := range calls {
					var v struct {
						Allowed bool
						Reason  string
					}
					if err := json.Unmarshal([]byte(verdicts[i]), &v); err != nil {
						t.Fatalf("check %s as %s: %v: %s", c.name, who.principal, err, verdicts[i])
					}
					allowed, reason := v.Allowed, v.Reason
					res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: c.args})
					if err != nil {
						t.Fatalf("%s: a protocol error: %v", c.note, err)
					}
					if res.IsError == allowed || !allowed && resultText(res) != reason {
						t.Errorf("%s: MCP says %q (isError %v); check says allowed %v, %q", c.note, resultText(res), res.IsError, allowed, reason)
					}
				}
			})
		}
	}
	if code := g.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM: %s", code, g.logs())
	}
	principals := map[string]int{}
	for _, r := range readRecords(t, dlog) {
		principals[fmt.Sprint(r["principal"])]++
	}
	if principals["alice"] != 2*len(calls) || principals["rita"] != 2*len(calls) || len(principals) != 2 {
		t.Errorf("the decision log's principals: %v", principals)
	}
}

// TestP10HTTPPrincipalsAndTokens: a request without a token, with a token
// the gateway does not know, or of a caller the policy does not map is
// refused with 401 or 403 and a sentence, and nothing is decided or run;
// a 401 says where the protected-resource metadata is (RFC 9728).
func TestP10HTTPPrincipalsAndTokens(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens),
		"--decision-log", dlog, "--resource", "http://gw.example/mcp")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"x"}}}`
	tests := []struct {
		note, path, token string
		status            int
		says              string
	}{
		{"no token", "/mcp", "", 401, "carries no bearer token"},
		{"a token the gateway does not know", "/mcp", "tok-mallory", 401, "not one of this gateway's tokens"},
		{"a caller the policy does not map", "/mcp", "tok-eve", 403, `The caller with subject "eve", groups ["guests"] may not call, because no entry of the policy's principals matches it`},
		{"the hook, no token", "/hooks/claude-code", "", 401, "carries no bearer token"},
		{"the hook, a caller the policy does not map", "/hooks/claude-code", "tok-eve", 403, "may not call"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			status, h, body := g.post(tc.path, tc.token, call)
			if status != tc.status || !strings.Contains(body, tc.says) {
				t.Errorf("%d %q, want %d saying %q", status, body, tc.status, tc.says)
			}
			if status == 401 && h.Get("WWW-Authenticate") != `Bearer resource_metadata="http://gw.example/.well-known/oauth-protected-resource/mcp"` {
				t.Errorf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
		})
	}
	resp, err := http.Get(g.base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta["resource"] != "http://gw.example/mcp" {
		t.Errorf("metadata %v", meta)
	}
	g.stop()
	if b, _ := os.ReadFile(dlog); len(b) != 0 {
		t.Errorf("a refused caller's call was decided: %s", b)
	}
}

// TestR3HTTPReloadReachesTheClient: a policy edit reaches a connected
// streamable-HTTP client as tools/list_changed, and its next list is the
// new one.
func TestR3HTTPReloadReachesTheClient(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens))
	changed := make(chan struct{}, 8)
	s := g.session("tok-rita", "", &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	if got := toolNames(t, s); got != "Read" {
		t.Fatalf("tools %s", got)
	}
	writeFile(t, filepath.Join(dir, "policy.cue"), strings.Replace(httpPolicy, `"allowed-tools": ["Read(./**)"]`, `"allowed-tools": ["Read(./**)", "Glob(./**)"]`, 1))
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatalf("no tools/list_changed: %s", g.logs())
	}
	if got := toolNames(t, s); got != "Glob,Read" {
		t.Errorf("tools after the reload %s", got)
	}
}

// TestR7HTTPHookAnswersAsTheCommandHook: the inputs of the command hook's
// tests, posted to /hooks/claude-code, get exactly the answer aimon-gw
// hook claude-code gives them.
func TestR7HTTPHookAnswersAsTheCommandHook(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../internal/front/cchook/hook_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, policy, _ := strings.Cut(string(src), "const testPolicy = `")
	policy, _, _ = strings.Cut(policy, "`")
	policy = strings.Replace(policy, "claudeCode:", "principals: alice: {subject: \"alice\", surface: [\"agent\"]}\nclaudeCode:", 1)
	dir, proj := moduleDir(t, policy), t.TempDir()
	inputs, err := os.ReadFile("../../internal/front/cchook/testdata/hook_inputs.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", proj, "--tokens", tokensFile(t, staticTokens))
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(inputs), "/work/proj", proj)), "\n")
	lines = append(lines, `{"input":{"tool_name":`, `{"note":"a relative cwd","input":{"cwd":"relative","tool_name":"Read","tool_input":{}}}`)
	for i, line := range lines {
		var tc struct {
			Note  string          `json:"note"`
			Input json.RawMessage `json:"input"`
		}
		if json.Unmarshal([]byte(line), &tc) != nil {
			tc.Note, tc.Input = "an input that is not JSON", json.RawMessage(`{"tool_name":`)
		}
		t.Run(fmt.Sprint(i, " ", tc.Note), func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", dir, "--cache", "off")
			cmd.Stdin = bytes.NewReader(tc.Input)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			want, _ := cmd.Output()
			status, _, got := g.post("/hooks/claude-code", "tok-alice", string(tc.Input))
			if status != 200 {
				t.Fatalf("status %d: %s", status, got)
			}
			if cmd.ProcessState.ExitCode() == 2 {
				// The command blocks with a sentence on standard error; the
				// HTTP hook with a deny carrying it.
				var o struct {
					HookSpecificOutput struct{ PermissionDecision, PermissionDecisionReason string }
				}
				json.Unmarshal([]byte(got), &o)
				sentence := strings.TrimPrefix(strings.TrimSpace(stderr.String()), "aimon-gw hook claude-code: ")
				if o.HookSpecificOutput.PermissionDecision != "deny" || !strings.EqualFold(o.HookSpecificOutput.PermissionDecisionReason, sentence) {
					t.Errorf("HTTP %s; command blocked with %q", got, sentence)
				}
				return
			}
			// Each ticket is one of its own (its nonce); the rest is the same.
			if unticketed(got) != unticketed(string(want)) {
				t.Errorf("HTTP  %s\ncommand %s", got, want)
			}
		})
	}
}

// TestR2HTTPShutdownAnswersCallsInFlight: SIGTERM makes the gateway stop
// taking requests, answer the call in flight, and exit 0. The call reads
// a FIFO that the test opens only once the gateway says it is shutting
// down, so it is in flight then however slow the machine is.
func TestR2HTTPShutdownAnswersCallsInFlight(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, strings.Replace(httpPolicy, `"Bash(sleep:*)"`, `"Bash(cat:*)"`, 1)), t.TempDir()
	fifo := filepath.Join(wd, "in-flight")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens))
	s := g.session("tok-alice", "", nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "cat " + fifo}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	for len(marked("cat "+fifo)) == 0 {
		select {
		case res := <-done:
			t.Fatalf("the call ended before SIGTERM: %s\n%s", resultText(res), g.logs())
		case <-time.After(10 * time.Millisecond):
		}
	}
	g.cmd.Process.Signal(syscall.SIGTERM)
	for !strings.Contains(g.logs(), "shutting down") {
		select {
		case res := <-done:
			t.Fatalf("the call ended before the gateway began shutting down: %s\n%s", resultText(res), g.logs())
		case <-g.exited:
			t.Fatalf("the gateway exited with the call in flight: %s", g.logs())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The gateway is shutting down with the call in flight: let it end
	// (the write waits for cat to open the FIFO; should the call end
	// otherwise, its result below says how).
	go os.WriteFile(fifo, []byte("answered after SIGTERM\n"), 0o600)
	if res := <-done; res.IsError || !strings.Contains(resultText(res), "answered after SIGTERM") {
		t.Errorf("the call in flight: %s", resultText(res))
	}
	if code := g.stop(); code != 0 {
		t.Errorf("exit %d: %s", code, g.logs())
	}
}

// TestR5HTTPBadFlags: flags that cannot serve exit 2 with a sentence,
// before listening.
func TestR5HTTPBadFlags(t *testing.T) {
	t.Parallel()
	tokens := tokensFile(t, staticTokens)
	open := filepath.Join(t.TempDir(), "open")
	writeFile(t, open, "sha256:"+strings.Repeat("a", 64)+" alice\n")
	os.Chmod(open, 0o644)
	bad := func(body string) string {
		p := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hash := "sha256:" + strings.Repeat("b", 64)
	tests := []struct {
		note string
		args []string
		says string
	}{
		{"no authentication", []string{"--listen", "127.0.0.1:0"}, "every caller must authenticate"},
		{"both ways", []string{"--listen", "127.0.0.1:0", "--tokens", tokens, "--issuer", "https://idp.example"}, "give one"},
		{"an issuer without a resource", []string{"--listen", "127.0.0.1:0", "--issuer", "https://idp.example"}, "--issuer needs --resource"},
		{"a resource that is not a URL", []string{"--listen", "127.0.0.1:0", "--tokens", tokens, "--resource", "gw.example/mcp"}, "not an absolute http(s) URL"},
		{"a certificate without its key", []string{"--listen", "127.0.0.1:0", "--tokens", tokens, "--tls-cert", tokens}, "go together"},
		{"a flag of --listen without it", []string{"--tokens", tokens}, "--tokens is for serving over HTTP"},
		{"an address that cannot be listened on", []string{"--listen", "256.0.0.1:1", "--tokens", tokens}, "cannot listen on 256.0.0.1:1"},
		{"a tokens file others may read", []string{"--listen", "127.0.0.1:0", "--tokens", open}, "may be read or written by others (mode 0644); chmod 600 it"},
		{"a missing tokens file", []string{"--listen", "127.0.0.1:0", "--tokens", open + ".none"}, "cannot read the tokens file"},
		{"a token written in the clear", []string{"--listen", "127.0.0.1:0", "--tokens", bad("s3cret alice\n")}, `:1: "s3cret" is not sha256: and 64 hex digits`},
		{"a token without a subject", []string{"--listen", "127.0.0.1:0", "--tokens", bad("# x\n" + hash + "\n")}, ":2: the token has no subject"},
		{"a token twice", []string{"--listen", "127.0.0.1:0", "--tokens", bad(hash + " a\n" + hash + " b\n")}, ":2: the same token is on line 1"},
		{"too many fields", []string{"--listen", "127.0.0.1:0", "--tokens", bad(hash + " a g extra\n")}, "has 4 fields"},
		{"no token at all", []string{"--listen", "127.0.0.1:0", "--tokens", bad("# none\n")}, "holds no token"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), append([]string{"mcp"}, tc.args...)...)
			cmd.Stdin = strings.NewReader("")
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), tc.says) {
				t.Errorf("exit %d: %s; want 2 saying %q", code, out, tc.says)
			}
		})
	}
}

// TestR5HTTPBadTokens: through the binary, against an issuer the test
// serves, every token that fails a check is refused with 401 or 403 and a
// sentence, and nothing is decided or run; the good token's call runs.
func TestR5HTTPBadTokens(t *testing.T) {
	t.Parallel()
	iss := authntest.New(t)
	const aud = "http://gw.test/mcp"
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--issuer", iss.URL, "--resource", aud, "--decision-log", dlog)
	with := func(change map[string]any) string {
		c := iss.Claims("alice", aud)
		maps.Copy(c, change)
		return iss.Token(t, c)
	}
	tests := []struct {
		note, token string
		status      int
		says        string
	}{
		{"expired", with(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), 401, "The bearer token expired at"},
		{"not yet valid", with(map[string]any{"nbf": time.Now().Add(time.Hour).Unix()}), 401, "The bearer token is not valid yet"},
		{"wrong audience", with(map[string]any{"aud": "http://other.test/mcp"}), 401, "The bearer token is not for this resource"},
		{"wrong issuer", with(map[string]any{"iss": "http://idp.evil.test"}), 401, "The bearer token was not issued by " + iss.URL},
		{"alg none", authntest.Unsigned(iss.Claims("alice", aud)), 401, "is not a JWT signed with one of RS256"},
		{"a key not in the JWKS", authntest.Sign(t, jose.RS256, authntest.OtherKey(t), "k9", iss.Claims("alice", aud)), 401, "The bearer token is not accepted"},
		{"a principal the policy does not map", iss.Token(t, iss.Claims("mallory", aud)), 403, `The caller with subject "mallory" may not call`},
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"ran"}}}`
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			status, h, body := g.post("/mcp", tc.token, call)
			if status != tc.status || !strings.Contains(body, tc.says) || strings.Contains(body, "ran") {
				t.Errorf("%d %q, want %d saying %q", status, body, tc.status, tc.says)
			}
			if status == 401 && !strings.Contains(h.Get("WWW-Authenticate"), `resource_metadata="http://gw.test/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
		})
	}
	s := g.session(iss.Token(t, iss.Claims("alice", aud)), "", nil)
	if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "ran"}}); err != nil || resultText(res) != "ran" {
		t.Fatalf("the good token's call: %v %v", res, err)
	}
	g.stop()
	if recs := readRecords(t, dlog); len(recs) != 1 || recs[0]["principal"] != "alice" {
		t.Errorf("the decision log holds more than the good call: %v", recs)
	}
}

// TestR5HTTPOverTLS: with a certificate and key, the gateway speaks TLS,
// and the SDK's client lists and calls through it.
func TestR5HTTPOverTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	g := startHTTP(t, client, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(g.base, "https://") {
		t.Fatalf("base %s", g.base)
	}
	s := g.session("tok-alice", "", nil)
	if res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "over TLS"}}); err != nil || resultText(res) != "over TLS" {
		t.Fatalf("%v %v", res, err)
	}
	// A plain request to the TLS listener gets Go's 400, never an answer.
	if resp, err := http.Get(strings.Replace(g.base, "https", "http", 1) + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP was answered on the TLS listener")
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aimon-gw test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestP10CheckTakesAPrincipal: check --principal decides on the chain the
// policy maps the caller to; a caller it does not map, or whose chain is
// above --surface, is a finding (exit 1), and claims that cannot be read
// a usage error (exit 2).
func TestP10CheckTakesAPrincipal(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, httpPolicy)
	call := `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"x"}}`
	tests := []struct {
		note, principal, surface string
		exit                     int
		says                     string
	}{
		{"alice, on the agent", "alice", "agent", 0, `"allowed": true`},
		{"a reviewer, whose list has no Echo", `{"sub":"rita","groups":["reviewers"]}`, "agent", 1, `"rule": "P9"`},
		{"the ci client, by its client id", `{"sub":"bot","client_id":"ci"}`, "agent", 1, `"subagent:reviewer"`},
		{"a caller the policy does not map", "eve", "agent", 1, `The caller with subject "eve" may not call`},
		{"a chain above --surface", "alice", "agent,subagent:reviewer", 1, "does not begin with --surface agent,subagent:reviewer"},
		{"claims that are not JSON", `{"sub":`, "agent", 2, "is not claims as JSON"},
		{"a claim check does not know", `{"sub":"a","role":"admin"}`, "agent", 2, `unknown field "role"`},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), "check", "--policy", dir, "--surface", tc.surface, "--principal", tc.principal, call)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.exit || !strings.Contains(string(out), tc.says) {
				t.Errorf("exit %d: %s; want %d saying %q", code, out, tc.exit, tc.says)
			}
		})
	}
}

// TestP15HTTPAsksThePerson: over HTTP an ask is an input request whose
// state is the sealed token (nothing kept between the requests): the
// person's approval runs the call, a decline refuses it. A client before
// 2026-07-28 is served statelessly, where the server cannot ask it: the
// call is refused with a sentence that says so (not that the client
// declares no elicitation, which it does), never run.
func TestP15HTTPAsksThePerson(t *testing.T) {
	t.Parallel()
	dir, wd := askSetup(t)
	writeFile(t, filepath.Join(dir, "principals.cue"), "package policy\n\nprincipals: alice: {subject: \"alice\", surface: [\"agent\"]}\n")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens))
	for _, version := range []string{"", "2025-11-25"} {
		for _, tc := range []struct {
			answer  string
			isError bool
			says    string
		}{{"accept", false, "the secret"}, {"decline", true, "did not approve"}} {
			t.Run(tc.answer+" "+version, func(t *testing.T) {
				s := g.session("tok-alice", version, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: tc.answer, Content: map[string]any{"approve": tc.answer == "accept"}}, nil
				}})
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Read", Arguments: map[string]any{"file_path": filepath.Join(wd, "secret/a")}})
				if err != nil {
					t.Fatal(err)
				}
				if version != "" {
					// The true reason: the transport, not the client's
					// capabilities, which it declared.
					tc.isError, tc.says = true, "stateless HTTP under MCP protocol 2025-11-25"
				}
				if res.IsError != tc.isError || !strings.Contains(resultText(res), tc.says) || strings.Contains(resultText(res), "declares no elicitation") {
					t.Errorf("%q (isError %v), want %q", resultText(res), res.IsError, tc.says)
				}
			})
		}
	}
}

// TestR5HTTPProcessChainIsACeiling: under --surface agent,subagent:reviewer
// a caller the policy maps to the agent is refused (403), one mapped to the
// reviewer is served; and the HTTP hook denies an input whose chain is
// above its caller's, with the sentence serve gives a line, and records
// it.
func TestR5HTTPProcessChainIsACeiling(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--surface", "agent,subagent:reviewer", "--tokens", tokensFile(t, staticTokens), "--decision-log", dlog)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if status, _, body := g.post("/mcp", "tok-alice", list); status != 403 || !strings.Contains(body, "does not begin with this gateway's chain [agent, subagent:reviewer]") {
		t.Errorf("alice, on the agent: %d %q", status, body)
	}
	if got := toolNames(t, g.session("tok-rita", "", nil)); got != "Read" {
		t.Errorf("rita's tools: %s", got)
	}
	input := `{"cwd":"` + wd + `","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"` + wd + `/a"},"tool_use_id":"up"}`
	if status, _, body := g.post("/hooks/claude-code", "tok-rita", input); status != 200 || !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, "does not begin with this gateway's chain [agent, subagent:reviewer]") {
		t.Errorf("the hook, an input on the agent from a reviewer: %d %s", status, body)
	}
	// Nothing moves for it either: a leading cd is refused with the call.
	cd := `{"cwd":"` + wd + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cd /"},"tool_use_id":"cd"}`
	if status, _, body := g.post("/hooks/claude-code", "tok-rita", cd); status != 200 || !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, "does not begin with this gateway's chain") {
		t.Errorf("the hook, a cd on the agent from a reviewer: %d %s", status, body)
	}
	// An input whose cwd is not the directory the policy's ./ patterns
	// were resolved against cannot be decided as Claude Code means it.
	other := t.TempDir()
	elsewhere := `{"cwd":"` + other + `","hook_event_name":"PreToolUse","agent_type":"reviewer","tool_name":"Read","tool_input":{"file_path":"` + other + `/a"},"tool_use_id":"elsewhere"}`
	if status, _, body := g.post("/hooks/claude-code", "tok-rita", elsewhere); status != 200 || !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, "and the input's cwd is "+other) {
		t.Errorf("the hook, an input in another directory: %d %s", status, body)
	}
	g.stop()
	// Refused by the one decision, so recorded as every refusal is.
	recs := readRecords(t, dlog)
	if len(recs) != 3 || recs[0]["call_id"] != "up" || recs[0]["rule"] != "R5" || recs[0]["principal"] != "rita" || recs[1]["call_id"] != "cd" || recs[1]["allowed"] != false ||
		recs[2]["call_id"] != "elsewhere" || recs[2]["rule"] != "R7" {
		t.Errorf("the decision log: %v", recs)
	}
}

// TestR7HTTPTokenStaysAtTheGateway: a caller's bearer token goes no
// further than the gateway: the upstream server behind it accepts only its
// own token, from the policy's header, and answers the caller's call.
func TestR7HTTPTokenStaysAtTheGateway(t *testing.T) {
	srv := mcptest.NewEcho(t, "s3cret")
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: web: {url: %q, headers: Authorization: "Bearer ${AIMON_TEST_TOKEN}", expose: ["echo"], pin: false}
agent: "allowed-tools": ["web__echo"]
principals: alice: {subject: "alice", surface: ["agent"]}
`, srv.URL))
	t.Setenv("AIMON_TEST_TOKEN", "s3cret")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", dir, "--tokens", tokensFile(t, staticTokens))
	s := g.session("tok-alice", "", nil)
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "web__echo", Arguments: map[string]any{"text": "hello"}})
	if err != nil || res.IsError || resultText(res) != "echo hello" {
		t.Fatalf("%v %v", res, err)
	}
	if got := srv.Got(); len(got) != 1 || got[0] != "hello" {
		t.Errorf("the server received %q", got)
	}
}

// TestP10TestTakesAPrincipal: aimon-gw test --principal runs the cases
// that name no caller of their own as that caller, on its chain.
func TestP10TestTakesAPrincipal(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, httpPolicy+`tests: {
	"echo":                 {tool: "Echo", input: message: "x", allowed: true}
	"alice's own echo":     {principal: subject: "alice", tool: "Echo", input: message: "x", allowed: true}
}
`)
	tests := []struct {
		note, principal string
		exit            int
		says            string
	}{
		{"no caller", "", 0, "ok: 2 tests passed"},
		{"as alice", "alice", 0, "ok: 2 tests passed"},
		{"as a reviewer, whose list has no Echo", `{"sub":"rita","groups":["reviewers"]}`, 1, `test "echo": want allowed, got refused by P9`},
		{"as a caller the policy does not map", "eve", 1, "no entry of the policy's principals matches"},
		{"claims that are not JSON", "{", 2, "is not claims as JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			cmd := exec.Command(gatewayBinary(t), "test", "--principal", tc.principal, dir)
			if tc.principal == "" {
				cmd = exec.Command(gatewayBinary(t), "test", dir)
			}
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.exit || !strings.Contains(string(out), tc.says) {
				t.Errorf("exit %d: %s; want %d saying %q", code, out, tc.exit, tc.says)
			}
		})
	}
}
