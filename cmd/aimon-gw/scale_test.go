package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/lockedbuf"
	"aimon.dev/gw/internal/testkit/need"
)

// needCommand finds a program the scale-out test needs on PATH: without it
// the test skips, except under CI, where it fails.
func needCommand(t *testing.T, name, pkg string) string {
	t.Helper()
	return need.Command(t, name, fmt.Sprintf(".ci/run installs it (%s)", pkg))
}

// npmDir is where the npm packages the test runs are installed: .ci/npm,
// or $AIMON_GW_NPM_DIR. Without them the test skips, except under CI.
func npmDir(t *testing.T, pkgs ...string) string {
	t.Helper()
	dir := os.Getenv("AIMON_GW_NPM_DIR")
	if dir == "" {
		dir, _ = filepath.Abs("../../.ci/npm")
	}
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need.Missing(t, "the npm package %s is needed in %s; run npm ci in .ci/npm (.ci/run does)", p, dir)
		}
	}
	return dir
}

// freePort is a port on the loopback that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// process runs a helper (the identity provider, HAProxy) until the test
// ends, and waits until it prints ready on its standard output or stderr.
func process(t *testing.T, ready string, name string, args ...string) {
	t.Helper()
	startProcess(t, ready, name, args...)()
}

// startProcess starts the helper and returns the wait for its ready line,
// so that the test can do other work while the helper starts.
func startProcess(t *testing.T, ready string, name string, args ...string) (wait func()) {
	t.Helper()
	wait, _ = spawn(t, ready, name, args...)
	return wait
}

// spawn is startProcess that also returns how to stop the helper before
// the test ends (SIGTERM, then SIGKILL after 5 s).
func spawn(t *testing.T, ready string, name string, args ...string) (wait, stop func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out lockedbuf.Buffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); pw.Close(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(stop)
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			if strings.Contains(sc.Text(), ready) {
				once.Do(func() { close(seen) })
			}
		}
	}()
	wait = func() {
		t.Helper()
		select {
		case <-seen:
		case <-exited:
			t.Fatalf("%s exited before it was ready:\n%s", filepath.Base(name), out.String())
		case <-time.After(60 * time.Second):
			t.Fatalf("%s was not ready within a minute:\n%s", filepath.Base(name), out.String())
		}
	}
	return wait, stop
}

// idp is oidc-provider (npm) issuing JWT access tokens by client
// credentials, and by RFC 8693 token exchange (testdata/scale/idp.mjs),
// with a new key of its own each time it starts.
type idp struct {
	issuer string
	wait   func() // until it serves
	stop   func()
}

// idpClient is one client of the identity provider; GrantTypes defaults
// to client credentials.
type idpClient struct {
	ID         string   `json:"client_id"`
	Secret     string   `json:"client_secret"`
	GrantTypes []string `json:"grant_types,omitempty"`
	Scope      string   `json:"scope,omitempty"`
}

func startIdP(t *testing.T, npm string, clients map[string]string) *idp {
	t.Helper()
	var cs []idpClient
	for id, secret := range clients {
		cs = append(cs, idpClient{ID: id, Secret: secret})
	}
	return startIdPClients(t, npm, cs)
}

func startIdPClients(t *testing.T, npm string, clients []idpClient) *idp {
	t.Helper()
	return startIdPAt(t, npm, freePort(t), clients)
}

// startIdPAt starts the identity provider on port.
func startIdPAt(t *testing.T, npm string, port int, clients []idpClient) *idp {
	t.Helper()
	js, _ := json.Marshal(clients)
	script, _ := filepath.Abs("testdata/scale/idp.mjs")
	wait, stop := spawn(t, "listening", needCommand(t, "node", "nodejs"), script, npm, fmt.Sprint(port), string(js))
	return &idp{issuer: fmt.Sprintf("http://127.0.0.1:%d", port), wait: wait, stop: stop}
}

// token is an access token for client, for the resource (its audience).
func (p *idp) token(t *testing.T, client, secret, resource string) string {
	t.Helper()
	return p.tokenScoped(t, client, secret, resource, "mcp")
}

// tokenScoped is token with the scopes asked.
func (p *idp) tokenScoped(t *testing.T, client, secret, resource, scope string) string {
	t.Helper()
	resp, err := http.PostForm(p.issuer+"/token", url.Values{"grant_type": {"client_credentials"}, "client_id": {client},
		"client_secret": {secret}, "resource": {resource}, "scope": {scope}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("the identity provider gave %s no token (%d): %v %s", client, resp.StatusCode, err, tok.Error)
	}
	return tok.AccessToken
}

// exchanges is how many token exchanges the identity provider granted.
func (p *idp) exchanges(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(p.issuer + "/test/exchanges")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n struct{ Exchanges int }
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		t.Fatalf("the identity provider's exchange count: %v", err)
	}
	return n.Exchanges
}

// haproxyConfig balances round-robin over backends with no affinity, and
// takes a backend out when its /readyz fails; a request that cannot
// connect to one is sent to another (only then: a call sent is never sent
// twice).
func haproxyConfig(port int, backends []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
	maxconn 2000
defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 30s
	retries 3
	option redispatch 1
	retry-on conn-failure
	# A new server connection for each request: a request is never sent on
	# an idle connection to a replica that has died since.
	option http-server-close
frontend gw
	bind 127.0.0.1:%d
	default_backend replicas
backend replicas
	balance roundrobin
	option httpchk GET /readyz
	default-server inter 100ms fall 1 rise 1
`, port)
	for i, a := range backends {
		fmt.Fprintf(&b, "\tserver r%d %s check\n", i+1, a)
	}
	return b.String()
}

// startHAProxy runs HAProxy in the foreground on a config the test writes.
func startHAProxy(t *testing.T, port int, backends []string) {
	t.Helper()
	startHAProxyConfig(t, port, haproxyConfig(port, backends))
}

// startHAProxyConfig runs HAProxy on config, listening on port.
func startHAProxyConfig(t *testing.T, port int, config string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	writeFile(t, cfg, config)
	bin := needCommand(t, "haproxy", "the Debian package haproxy")
	if out, err := exec.Command(bin, "-c", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("HAProxy refuses the config: %v\n%s", err, out)
	}
	// -db: in the foreground; -V prints when it is up, and each backend state.
	process(t, "Using epoll()", bin, "-db", "-V", "-f", cfg)
	waitFor(t, "HAProxy to answer", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
}

// waitFor polls cond for at most 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}

// metric is the sum of a metric's series on one replica's /metrics whose
// labels include match.
func metric(t *testing.T, base, name string, match ...string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, m := range match {
			if !strings.Contains(line, m) {
				continue next
			}
		}
		var v float64
		fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
		sum += v
	}
	return sum
}

const scalePolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read}
validation: "enforce"
agent: "allowed-tools": [%s]
principals: {
	"go-client": {subject: "scale-go", surface: ["agent"]}
	"ts-client": {subject: "scale-ts", surface: ["agent"]}
}
`

// scaleCall is one call of the scale-out test, as both clients send it.
type scaleCall struct {
	Name string         `json:"name"`
	Args map[string]any `json:"arguments"`
}

// verdict is a call's answer: refused or not, and its text.
type verdict struct {
	IsError bool   `json:"isError"`
	Text    string `json:"text"`
	Failed  string `json:"failed,omitempty"`
	start   time.Time
}

// scaleCalls are n calls of six kinds: allowed Echo and Read, a Read the
// path pattern refuses (P4), an input the gate refuses (S9, twice) and a
// tool the policy does not have (P9).
func scaleCalls(n int, wd string) []scaleCall {
	out := make([]scaleCall, n)
	for i := range out {
		switch i % 6 {
		case 0:
			out[i] = scaleCall{"Echo", map[string]any{"message": fmt.Sprint("m", i)}}
		case 1:
			out[i] = scaleCall{"Read", map[string]any{"file_path": filepath.Join(wd, "notes.txt")}}
		case 2:
			out[i] = scaleCall{"Read", map[string]any{"file_path": "/etc/hostname"}}
		case 3:
			out[i] = scaleCall{"Echo", map[string]any{"message": "x", "tiems": 2}}
		case 4:
			out[i] = scaleCall{"Grep", map[string]any{"pattern": "x"}}
		case 5:
			out[i] = scaleCall{"Echo", map[string]any{}}
		}
	}
	return out
}

// checkAll is aimon-gw check's verdict on each call, as principal, in one
// run of check (one call a line).
func checkAll(t *testing.T, dir, wd, principal string, calls []scaleCall) []verdict {
	t.Helper()
	var in bytes.Buffer
	for i, c := range calls {
		line, _ := json.Marshal(map[string]any{"type": "tool_use", "id": fmt.Sprint("c", i), "name": c.Name, "input": c.Args})
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command(gatewayBinary(t), "check", "--policy", dir, "--workdir", wd, "--principal", principal, "-")
	cmd.Stdin = &in
	out, _ := cmd.Output()
	var vs []verdict
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v struct {
			Allowed bool
			Reason  string
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("check: %v: %s", err, sc.Bytes())
		}
		vs = append(vs, verdict{IsError: !v.Allowed, Text: v.Reason})
	}
	if len(vs) != len(calls) {
		t.Fatalf("check answered %d of %d calls:\n%s", len(vs), len(calls), out)
	}
	return vs
}

// sameVerdict compares a call's MCP result with check's verdict: refused
// alike with the same sentence, or allowed alike.
func sameVerdict(got, want verdict) bool {
	if got.Failed != "" || got.IsError != want.IsError {
		return false
	}
	return !want.IsError || got.Text == want.Text
}

// goSession connects the Go SDK's streamable-HTTP client through the
// balancer with token.
func goSession(ctx context.Context, endpoint, token string) (*mcp.ClientSession, error) {
	hc := &http.Client{Transport: bearer{token: token}}
	return mcp.NewClient(&mcp.Implementation{Name: "scale-test", Version: "v0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
}

// goCalls makes calls from workers concurrent sessions; a worker whose
// session breaks (its replica was killed) connects again, as a client
// would, and goes on. It returns each call's verdict.
func goCalls(t *testing.T, endpoint, token string, workers int, calls []scaleCall, after func(done int64)) []verdict {
	t.Helper()
	out := make([]verdict, len(calls))
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			ctx := context.Background()
			s, err := goSession(ctx, endpoint, token)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(calls) {
					break
				}
				if err != nil {
					if s, err = goSession(ctx, endpoint, token); err != nil {
						out[i] = verdict{Failed: "connect: " + err.Error()}
						continue
					}
				}
				start := time.Now()
				r, cerr := s.CallTool(ctx, &mcp.CallToolParams{Name: calls[i].Name, Arguments: calls[i].Args})
				switch {
				case cerr != nil:
					out[i] = verdict{Failed: cerr.Error(), start: start}
					s.Close()
					err = cerr // connect again for the next call
				default:
					out[i] = verdict{IsError: r.IsError, start: start}
					if len(r.Content) > 0 {
						if tc, ok := r.Content[0].(*mcp.TextContent); ok {
							out[i].Text = tc.Text
						}
					}
				}
				if after != nil {
					after(done.Add(1))
				}
			}
			if err == nil {
				s.Close()
			}
		})
	}
	wg.Wait()
	return out
}

// tsCalls makes calls through the TypeScript SDK's streamable-HTTP client.
func tsCalls(t *testing.T, npm, endpoint, token string, calls []scaleCall) []verdict {
	t.Helper()
	var in bytes.Buffer
	for _, c := range calls {
		line, _ := json.Marshal(c)
		in.Write(append(line, '\n'))
	}
	script, _ := filepath.Abs("testdata/scale/client.mjs")
	cmd := exec.Command(needCommand(t, "node", "nodejs"), script, npm, endpoint)
	cmd.Env = append(os.Environ(), "AIMON_TOKEN="+token)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the TypeScript client: %v\n%s", err, stderr.String())
	}
	var vs []verdict
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v verdict
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("the TypeScript client printed %q: %v", sc.Bytes(), err)
		}
		vs = append(vs, v)
	}
	if len(vs) != len(calls) {
		t.Fatalf("the TypeScript client answered %d of %d calls:\n%s", len(vs), len(calls), stderr.String())
	}
	return vs
}

// TestR3ScaleOut: three replicas of mcp --listen behind HAProxy
// (round-robin, no affinity), callers known by JWTs a real identity
// provider (oidc-provider) issues, clients of the Go and the TypeScript
// SDK. 1,000 calls spread over the replicas get check's verdicts (rule
// R7); a new policy version reaches every replica (rule R3); a replica
// killed mid-run loses only its calls in flight, and the clients carry on.
func TestR3ScaleOut(t *testing.T) {
	t.Parallel()
	npm := npmDir(t, "oidc-provider", "@modelcontextprotocol/sdk")
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	needCommand(t, "haproxy", "the Debian package haproxy")
	clients := map[string]string{"scale-go": "go-secret-0123456789abcdef", "scale-ts": "ts-secret-0123456789abcdef"}
	ip := startIdP(t, npm, clients) // node starts while the binary builds
	gatewayBinary(t)
	phase("the binary built")
	wd := t.TempDir()
	writeFile(t, filepath.Join(wd, "notes.txt"), "scale-out\n")
	// The replicas follow one checkout as git-sync keeps it (deploy/kubernetes):
	// a symbolic link swapped to each new commit's tree.
	dir := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(moduleDir(t, fmt.Sprintf(scalePolicy, `"Echo", "Read(`+wd+`/**)"`)), dir); err != nil {
		t.Fatal(err)
	}

	ip.wait()
	phase("identity provider up")
	lbPort := freePort(t)
	resource := fmt.Sprintf("http://127.0.0.1:%d/mcp", lbPort)
	var replicas []*httpGW
	var backends []string
	for range 3 {
		g := startHTTP(t, &http.Client{}, "--policy", dir, "--workdir", wd, "--issuer", ip.issuer, "--resource", resource)
		replicas = append(replicas, g)
		backends = append(backends, strings.TrimPrefix(g.base, "http://"))
	}
	startHAProxy(t, lbPort, backends)
	phase("replicas and HAProxy up")
	goToken := ip.token(t, "scale-go", clients["scale-go"], resource)
	tsToken := ip.token(t, "scale-ts", clients["scale-ts"], resource)

	// 1,000 calls, 700 from the Go SDK and 300 from the TypeScript SDK.
	calls := scaleCalls(1000, wd)
	goPart, tsPart := calls[:700], calls[700:]
	want := append(checkAll(t, dir, wd, "scale-go", goPart), checkAll(t, dir, wd, "scale-ts", tsPart)...)
	phase("check")
	got := goCalls(t, resource, goToken, 8, goPart, nil)
	phase("700 calls of the Go SDK")
	got = append(got, tsCalls(t, npm, resource, tsToken, tsPart)...)
	phase("300 calls of the TypeScript SDK")
	bad := 0
	for i := range calls {
		if !sameVerdict(got[i], want[i]) {
			if bad++; bad <= 5 {
				t.Errorf("call %d %s %v: got %+v, check says %+v", i, calls[i].Name, calls[i].Args, got[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d calls differ from check", bad, len(calls))
	}
	var total float64
	for i, g := range replicas {
		n := metric(t, g.base, "aimon_gw_calls_total")
		if n == 0 {
			t.Errorf("replica %d answered no call: HAProxy did not spread them", i+1)
		}
		total += n
	}
	if total != float64(len(calls)) {
		t.Errorf("the replicas' aimon_gw_calls_total add up to %v, want %d", total, len(calls))
	}

	// A new commit of the policy (Echo no longer allowed) reaches every replica.
	next := dir + ".next"
	if err := os.Symlink(moduleDir(t, fmt.Sprintf(scalePolicy, `"Read(`+wd+`/**)"`)), next); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, dir); err != nil {
		t.Fatal(err)
	}
	for i, g := range replicas {
		waitFor(t, fmt.Sprintf("replica %d to put generation 2 in force", i+1), func() bool {
			return metric(t, g.base, "aimon_gw_policy_generation") == 2
		})
	}
	echo := scaleCalls(1, wd)
	phase("reload on every replica")
	wantEcho := checkAll(t, dir, wd, "scale-go", echo)[0]
	if !wantEcho.IsError {
		t.Fatalf("check still allows Echo under the new policy: %+v", wantEcho)
	}
	for i, v := range goCalls(t, resource, goToken, 3, append(append(echo, echo...), echo...), nil) {
		if !sameVerdict(v, wantEcho) {
			t.Errorf("Echo call %d after the reload: %+v, want %+v", i, v, wantEcho)
		}
	}

	// A replica killed mid-run loses only its calls in flight: no call
	// that started once it was gone fails; the clients carry on against
	// the others.
	const workers = 8
	run := scaleCalls(600, wd)
	for i := range run {
		run[i] = scaleCall{"Read", map[string]any{"file_path": filepath.Join(wd, "notes.txt")}}
	}
	var once sync.Once
	var killed time.Time
	vs := goCalls(t, resource, goToken, workers, run, func(done int64) {
		if done == 150 {
			once.Do(func() {
				// Killed once the process is gone: a request its socket
				// took before then was in flight on it.
				replicas[2].cmd.Process.Signal(syscall.SIGKILL)
				<-replicas[2].exited
				killed = time.Now()
			})
		}
	})
	failed := 0
	for i, v := range vs {
		switch {
		case v.Failed != "" && !v.start.Before(killed):
			t.Errorf("call %d started after the replica was killed, and failed: %s", i, v.Failed)
		case v.Failed != "":
			failed++
		case v.IsError:
			t.Errorf("call %d after the kill: refused %q", i, v.Text)
		}
	}
	if failed == len(vs) || failed > 0 && vs[len(vs)-1].Failed != "" {
		t.Errorf("the clients did not carry on after the kill: %d of %d failed, the last %q", failed, len(vs), vs[len(vs)-1].Failed)
	}
	phase(fmt.Sprintf("killed replica 3 after 150 of %d calls: %d lost in flight", len(run), failed))
}
