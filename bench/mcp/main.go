// Command mcp measures what aimon-gw adds to an Echo call on the MCP path
// Codex and Gemini CLI drive (issue 43): one go-sdk client calls Echo
// through aimon-gw mcp (a process on standard input and output) and
// through aimon-gw mcp --listen (streamable HTTP), and, beside each, a
// bare go-sdk server process with the same Echo tool on the same
// transport (stateless over HTTP, as the gateway's front is), in
// interleaved rounds, one call on each at a time; it prints each setup's
// p50 and the gateway's added milliseconds, with the goals (0.3 ms over
// stdio, 1.0 ms over HTTP). The client is the same for both sides, so the
// difference is the server's: the gate, the policy's decision and the
// gateway's own framing.
//
// Usage: go run ./bench/mcp -gw path/to/aimon-gw [-calls N] [-rounds N] (bench/mcp.sh)
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const token = "bench-token"

const policy = `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
validation: "enforce"
agent: "allowed-tools": ["Echo"]
principals: bench: {subject: "bench", surface: ["agent"]}
`

func main() {
	stdio := flag.Bool("baseline-stdio", false, "serve the bare go-sdk Echo server on standard input and output (used by the bench itself)")
	listen := flag.String("baseline-http", "", "serve the bare go-sdk Echo server over stateless streamable HTTP on this address (used by the bench itself)")
	gw := flag.String("gw", "", "the aimon-gw binary")
	calls := flag.Int("calls", 100, "Echo calls on each setup in a round")
	rounds := flag.Int("rounds", 20, "interleaved rounds")
	flag.Parse()
	switch {
	case *stdio:
		if err := baseline().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	case *listen != "":
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return baseline() }, &mcp.StreamableHTTPOptions{Stateless: true})
		log.Fatal(http.ListenAndServe(*listen, h))
	case *gw == "":
		log.Fatal("give the gateway: -gw path/to/aimon-gw")
	}
	log.SetFlags(0)
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "aimon-gw-bench-mcp-")
	check(err)
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "policy")
	check(os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755))
	check(os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/bench@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644))
	check(os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))
	sum := sha256.Sum256([]byte(token))
	tokens := filepath.Join(tmp, "tokens")
	check(os.WriteFile(tokens, []byte("sha256:"+hex.EncodeToString(sum[:])+" bench\n"), 0o600))
	self, err := os.Executable()
	check(err)

	defer stop()
	overHTTP := func(args ...string) *mcp.ClientSession {
		addr := freeAddr()
		cmd := exec.Command(args[0], append(args[1:], addr)...)
		cmd.Stderr = os.Stderr
		check(cmd.Start())
		servers = append(servers, cmd)
		endpoint := "http://" + addr + "/mcp"
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			// The gateway's /readyz answers 503 until its policy is in
			// force; the bare server answers anything else.
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					break
				}
			}
			if time.Now().After(deadline) {
				fatalf("%v did not listen within 30 s", args)
			}
		}
		s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{}}, DisableStandaloneSSE: true}, nil)
		check(err)
		return s
	}
	overStdio := func(args ...string) *mcp.ClientSession {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		check(err)
		return s
	}
	// No setup may hang the bench.
	time.AfterFunc(10*time.Minute, func() { fatalf("the bench did not end within 10 minutes") })
	setups := []struct {
		name string
		s    *mcp.ClientSession
		lat  []time.Duration
	}{
		{name: "stdio go-sdk", s: overStdio(self, "-baseline-stdio")},
		{name: "stdio aimon-gw", s: overStdio(*gw, "mcp", "--policy", dir, "--workdir", tmp, "--cache", "off", "--log-level", "error")},
		{name: "http go-sdk", s: overHTTP(self, "-baseline-http")},
		{name: "http aimon-gw", s: overHTTP(*gw, "mcp", "--policy", dir, "--workdir", tmp, "--cache", "off", "--log-level", "error", "--tokens", tokens, "--listen")},
	}
	defer func() {
		for _, st := range setups {
			st.s.Close()
		}
	}()
	for r := -1; r < *rounds; r++ { // one warm-up round
		for i := range setups {
			for c := range *calls {
				t0 := time.Now()
				res, err := setups[i].s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": fmt.Sprintf("m%d", c)}})
				d := time.Since(t0)
				if err != nil || res.IsError || len(res.Content) == 0 {
					fatalf("%s: Echo failed: %v %+v", setups[i].name, err, res)
				}
				if r >= 0 {
					setups[i].lat = append(setups[i].lat, d)
				}
			}
		}
	}
	fmt.Printf("Echo through one go-sdk client, %d calls on each setup in %d interleaved rounds\n", *calls**rounds, *rounds)
	p50 := map[string]time.Duration{}
	for _, st := range setups {
		slices.Sort(st.lat)
		p50[st.name] = st.lat[len(st.lat)/2]
		fmt.Printf("%-16s p50 %7.3f ms   p99 %7.3f ms\n", st.name, ms(p50[st.name]), ms(st.lat[len(st.lat)*99/100]))
	}
	for _, g := range []struct {
		transport string
		goal      float64
	}{{"stdio", 0.3}, {"http", 1.0}} {
		added := ms(p50[g.transport+" aimon-gw"] - p50[g.transport+" go-sdk"])
		verdict := "holds"
		if added > g.goal {
			verdict = "missed"
		}
		fmt.Printf("goal: aimon-gw adds at most %.1f ms to an Echo call over %s: %+.3f ms at the p50 (%s)\n", g.goal, g.transport, added, verdict)
	}
}

// baseline is the bare go-sdk server: Echo with the input of schema.#Echo.
func baseline() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "baseline", Version: "v0"}, nil)
	type in struct {
		Message string `json:"message"`
		Times   int    `json:"times,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "Echo", Description: "Repeats a message back."}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat(a.Message, max(1, a.Times))}}}, nil, nil
	})
	return s
}

type bearer struct{}

func (bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return http.DefaultTransport.RoundTrip(r)
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().String()
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// servers are the servers started, stopped at the end and on a failure.
var servers []*exec.Cmd

func stop() {
	for _, s := range servers {
		s.Process.Signal(syscall.SIGTERM)
		s.Wait()
	}
}

func fatalf(format string, args ...any) {
	for _, s := range servers {
		s.Process.Kill()
	}
	log.Fatalf(format, args...)
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}
