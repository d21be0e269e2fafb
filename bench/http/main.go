// Command http measures the shared gateway over HTTP (issue 30): calls per
// second and p50/p99 latency of an Echo call through HAProxy to one and
// to three replicas of `aimon-gw mcp --listen`, beside the go-sdk's own
// streamable-HTTP server with the same tool behind the same HAProxy, in
// one run, as ratios; the same replicas with a limit on Echo counted in
// Redis (issue 45: what the one round trip of a limited call adds to p50
// and p99); and the HTTP hook's p50 beside the command hook's (a process
// per decision), with and without a limit counted in the user's state
// directory. Every server runs on this machine's loopback; redis-server
// is started by the bench.
//
// Usage: go run ./bench/http [-calls N] [-workers N] (bench/http/run.sh)
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const token = "bench-token"

const policy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read}
validation: "enforce"
agent: "allowed-tools": ["Echo", "Read(%s/**)"]
principals: bench: {subject: "bench", surface: ["agent"]}
`

// limits never refuse a call of the bench (a burst far above its calls):
// what is measured is the count's check.
const limits = `
limits: {
	"bench-echo": {tool: "Echo", rate: "100000/s", burst: 1000000000}
	"bench-read": {tool: "Read", rate: "100000/s", burst: 1000000000}
}
`

func main() {
	baseline := flag.String("baseline", "", "serve the go-sdk's own streamable-HTTP Echo server on this address (used by the bench itself)")
	calls := flag.Int("calls", 4000, "Echo calls measured per setup")
	workers := flag.Int("workers", 8, "concurrent client sessions")
	rounds := flag.Int("rounds", 3, "interleaved rounds the calls are measured in")
	hooks := flag.Int("hooks", 40, "command-hook processes measured (the HTTP hook makes ten times as many calls)")
	flag.Parse()
	if *baseline != "" {
		serveBaseline(*baseline)
		return
	}
	log.SetFlags(0)
	tmp, err := os.MkdirTemp("", "aimon-gw-bench-http-")
	check(err)
	defer os.RemoveAll(tmp)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			p.Process.Signal(syscall.SIGTERM)
			p.Wait()
		}
	}()
	start := func(ready func() bool, name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Stderr = io.Discard
		check(cmd.Start())
		procs = append(procs, cmd)
		for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				log.Fatalf("%s %v was not ready within 30 s", name, args)
			}
		}
	}
	gw := filepath.Join(tmp, "aimon-gw")
	self := filepath.Join(tmp, "bench-http")
	run("go", "build", "-o", gw, "./cmd/aimon-gw")
	run("go", "build", "-o", self, "./bench/http")
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		log.Fatal("haproxy is needed (the Debian package haproxy)")
	}
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		log.Fatal("redis-server is needed (the Debian package redis-server)")
	}
	wd := filepath.Join(tmp, "work")
	check(os.MkdirAll(filepath.Join(tmp, "policy", "cue.mod"), 0o755))
	check(os.MkdirAll(wd, 0o755))
	check(os.WriteFile(filepath.Join(tmp, "policy", "cue.mod", "module.cue"), []byte("module: \"example.com/bench@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644))
	check(os.WriteFile(filepath.Join(tmp, "policy", "policy.cue"), fmt.Appendf(nil, policy, wd), 0o644))
	limited := filepath.Join(tmp, "limited")
	check(os.MkdirAll(filepath.Join(limited, "cue.mod"), 0o755))
	check(os.WriteFile(filepath.Join(limited, "cue.mod", "module.cue"), []byte("module: \"example.com/bench@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644))
	check(os.WriteFile(filepath.Join(limited, "policy.cue"), fmt.Appendf(fmt.Appendf(nil, policy, wd), "%s", limits), 0o644))
	check(os.WriteFile(filepath.Join(wd, "notes.txt"), []byte("bench\n"), 0o644))
	sum := sha256.Sum256([]byte(token))
	tokens := filepath.Join(tmp, "tokens")
	check(os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" bench\n"), 0o600))

	// The servers: the go-sdk's own, and three gateway replicas.
	base := addr()
	start(healthy("http://"+base+"/mcp", 405, 400, 200), self, "-baseline", base)
	var replicas []string
	for range 3 {
		a := addr()
		start(healthy("http://"+a+"/readyz", 200), gw, "mcp", "--listen", a, "--policy", filepath.Join(tmp, "policy"),
			"--workdir", wd, "--tokens", tokens, "--log-level", "error")
		replicas = append(replicas, a)
	}
	// Three more under the limits, their counts in one Redis.
	redisAddr := addr()
	start(answers(redisAddr), redisServer, "--bind", "127.0.0.1", "--port", redisAddr[strings.LastIndex(redisAddr, ":")+1:], "--save", "", "--appendonly", "no", "--dir", tmp)
	var limitedReplicas []string
	for range 3 {
		a := addr()
		start(healthy("http://"+a+"/readyz", 200), gw, "mcp", "--listen", a, "--policy", limited,
			"--workdir", wd, "--tokens", tokens, "--log-level", "error", "--state", "redis://"+redisAddr)
		limitedReplicas = append(limitedReplicas, a)
	}
	// One HAProxy frontend per setup, each round-robin over its servers.
	fronts := map[string]string{"sdk": addr(), "gw1": addr(), "gw3": addr(), "gw1r": addr(), "gw3r": addr()}
	cfg := filepath.Join(tmp, "haproxy.cfg")
	check(os.WriteFile(cfg, []byte(haproxyConfig(fronts, map[string][]string{"sdk": {base}, "gw1": replicas[:1], "gw3": replicas,
		"gw1r": limitedReplicas[:1], "gw3r": limitedReplicas})), 0o644))
	start(healthy("http://"+fronts["gw3"]+"/readyz", 200), haproxy, "-db", "-f", cfg)

	fmt.Printf("Echo over streamable HTTP through HAProxy: %d calls per setup from %d concurrent sessions of the Go SDK's client, in %d interleaved rounds after %d warm-up calls\n", *calls, *workers, *rounds, *calls/10)
	setups := []struct{ name, front, what string }{
		{"sdk", fronts["sdk"], "the go-sdk's own server (no policy)"},
		{"gw1", fronts["gw1"], "aimon-gw, 1 replica"},
		{"gw3", fronts["gw3"], "aimon-gw, 3 replicas"},
		{"gw1r", fronts["gw1r"], "aimon-gw, 1 replica, a limit in Redis"},
		{"gw3r", fronts["gw3r"], "aimon-gw, 3 replicas, a limit in Redis"},
	}
	// Interleaved rounds, so that the other load of the machine falls on
	// every setup alike.
	results := map[string]*stats{}
	for _, s := range setups {
		measure("http://"+s.front+"/mcp", *workers, *calls/10) // warm up: connections, the policy's first calls
		results[s.name] = &stats{}
	}
	for range *rounds {
		for _, s := range setups {
			results[s.name].add(measure("http://"+s.front+"/mcp", *workers, *calls / *rounds))
		}
	}
	for _, r := range results {
		r.summarize()
	}
	sdk := results["sdk"]
	fmt.Printf("%-40s %10s %9s %9s %12s %12s\n", "setup", "calls/s", "p50", "p99", "x calls/s", "x p50")
	for _, s := range setups {
		r := results[s.name]
		fmt.Printf("%-40s %10.0f %9s %9s %12.2f %12.2f\n", s.what, r.rate, ms(r.p50), ms(r.p99), r.rate/sdk.rate, float64(r.p50)/float64(sdk.p50))
	}
	g1, g3 := results["gw1"], results["gw3"]
	fmt.Printf("three replicas against one: x%.2f calls/s (2 cores bound the machine: the replicas, HAProxy and the clients share them)\n", g3.rate/g1.rate)
	for _, n := range []string{"1", "3"} {
		plain, red := results["gw"+n], results["gw"+n+"r"]
		fmt.Printf("a limit in Redis (one script a call), %s replica(s): p50 %+.3fms, p99 %+.3fms, x%.2f calls/s\n", n,
			float64((red.p50-plain.p50).Microseconds())/1000, float64((red.p99-plain.p99).Microseconds())/1000, red.rate/plain.rate)
	}

	// The hook: Claude Code's PreToolUse input, over HTTP to a resident
	// replica and to a process per decision.
	input := fmt.Sprintf(`{"session_id":"s","cwd":%q,"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"t"}`, wd, filepath.Join(wd, "notes.txt"))
	httpHook := hookHTTP("http://"+replicas[0]+"/hooks/claude-code", input, *hooks*10)
	cmdHook := hookCommand(gw, filepath.Join(tmp, "policy"), input, *hooks)
	fmt.Printf("Claude Code's PreToolUse hook, p50: HTTP %s (%d calls to a resident replica), command %s (%d processes, hook claude-code); x%.1f\n",
		ms(httpHook), *hooks*10, ms(cmdHook), *hooks, float64(cmdHook)/float64(httpHook))
	// The command hook under a limit counts it in the user's state
	// directory (a lock and a file a call), or in Redis with --state.
	limitedHook := hookCommand(gw, limited, input, *hooks)
	redisHook := hookCommand(gw, limited, input, *hooks, "--state", "redis://"+redisAddr)
	fmt.Printf("the command hook under a limit, p50: counted in the state directory %s (x%.2f), in Redis %s (x%.2f)\n",
		ms(limitedHook), float64(limitedHook)/float64(cmdHook), ms(redisHook), float64(redisHook)/float64(cmdHook))
}

type stats struct {
	rate     float64
	p50, p99 time.Duration
	lat      []time.Duration
	elapsed  time.Duration
}

func (s *stats) add(r stats) {
	s.lat = append(s.lat, r.lat...)
	s.elapsed += r.elapsed
}

// summarize is the rate and quantiles of the rounds added.
func (s *stats) summarize() {
	slices.Sort(s.lat)
	n := len(s.lat)
	s.rate, s.p50, s.p99 = float64(n)/s.elapsed.Seconds(), s.lat[n/2], s.lat[n*99/100]
}

// measure makes n Echo calls from workers sessions and returns their
// latencies and the time they took.
func measure(endpoint string, workers, n int) stats {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range workers {
		wg.Go(func() {
			hc := &http.Client{Transport: bearer{}}
			s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
				Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			check(err)
			defer s.Close()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				t0 := time.Now()
				r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hello"}})
				lat[i] = time.Since(t0)
				if err != nil || r.IsError {
					log.Fatalf("Echo through %s failed: %v %+v", endpoint, err, r)
				}
			}
		})
	}
	wg.Wait()
	return stats{lat: lat, elapsed: time.Since(begin)}
}

type bearer struct{}

func (bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}

// hookHTTP is the p50 of n sequential POSTs of the hook input.
func hookHTTP(url, input string, n int) time.Duration {
	lat := make([]time.Duration, n)
	for i := range lat {
		req, _ := http.NewRequest("POST", url, strings.NewReader(input))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		check(err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lat[i] = time.Since(t0)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"allow"`)) {
			log.Fatalf("the HTTP hook answered %d %s", resp.StatusCode, body)
		}
	}
	slices.Sort(lat)
	return lat[n/2]
}

// hookCommand is the p50 of n runs of aimon-gw hook claude-code, with args.
func hookCommand(gw, policy, input string, n int, args ...string) time.Duration {
	lat := make([]time.Duration, n)
	for i := range lat {
		cmd := exec.Command(gw, append([]string{"hook", "claude-code", "--policy", policy}, args...)...)
		cmd.Stdin = strings.NewReader(input)
		t0 := time.Now()
		out, err := cmd.Output()
		lat[i] = time.Since(t0)
		if err != nil || !bytes.Contains(out, []byte(`"allow"`)) {
			log.Fatalf("hook claude-code: %v %s", err, out)
		}
	}
	slices.Sort(lat)
	return lat[n/2]
}

// serveBaseline is the go-sdk's own stateless streamable-HTTP server with
// an Echo tool of the same input, no policy in front of it.
func serveBaseline(addr string) {
	s := mcp.NewServer(&mcp.Implementation{Name: "baseline", Version: "v0"}, nil)
	type in struct {
		Message string `json:"message"`
		Times   int    `json:"times,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "Echo", Description: "Repeats a message back."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(a.Message, max(1, a.Times))}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	log.Fatal(http.ListenAndServe(addr, mux))
}

func haproxyConfig(fronts map[string]string, backends map[string][]string) string {
	var b strings.Builder
	b.WriteString("global\n\tmaxconn 4000\ndefaults\n\tmode http\n\ttimeout connect 1s\n\ttimeout client 30s\n\ttimeout server 30s\n")
	for _, name := range []string{"sdk", "gw1", "gw3", "gw1r", "gw3r"} {
		fmt.Fprintf(&b, "frontend %s\n\tbind %s\n\tdefault_backend %s_servers\nbackend %s_servers\n\tbalance roundrobin\n", name, fronts[name], name, name)
		for i, a := range backends[name] {
			fmt.Fprintf(&b, "\tserver s%d %s\n", i+1, a)
		}
	}
	return b.String()
}

// healthy is a readiness check: GET url answers one of codes.
func healthy(url string, codes ...int) func() bool {
	return func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return slices.Contains(codes, resp.StatusCode)
	}
}

// answers is a readiness check: a TCP server answers PING with +PONG.
func answers(addr string) func() bool {
	return func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		fmt.Fprint(c, "PING\r\n")
		buf := make([]byte, 7)
		n, _ := io.ReadFull(c, buf)
		return string(buf[:n]) == "+PONG\r\n"
	}
}

// addr is a loopback address nothing listens on now.
func addr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

func run(name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	check(cmd.Run())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d.Microseconds())/1000) }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
