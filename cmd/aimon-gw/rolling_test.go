package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestR10RollingRestartLosesNoCall: three replicas of mcp --listen behind
// HAProxy, which retries nothing (no redispatch, no retry on a refused
// connection), each restarted in turn while four clients call
// throughout: on SIGTERM a replica's /readyz answers 503 while it still
// serves for --drain-delay, HAProxy's check takes it out, and only then
// does its listener close, so no call fails.
func TestR10RollingRestartLosesNoCall(t *testing.T) {
	t.Parallel()
	needCommand(t, "haproxy", "the Debian package haproxy")
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	tokens := tokensFile(t, staticTokens)
	replica := func(addr string) *httpGW {
		return startHTTP(t, &http.Client{}, "--listen", addr, "--policy", dir, "--workdir", wd, "--tokens", tokens, "--drain-delay", "1s", "--cache", "off")
	}
	var replicas []*httpGW
	var backends []string
	for range 3 {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		replicas = append(replicas, replica(addr))
		backends = append(backends, addr)
	}
	lbPort := freePort(t)
	startHAProxyConfig(t, lbPort, strings.Replace(haproxyConfig(lbPort, backends), "\tretries 3\n\toption redispatch 1\n\tretry-on conn-failure\n", "\tretries 0\n", 1))
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/mcp", lbPort)

	var calls, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctx := context.Background()
			s, err := goSession(ctx, endpoint, "tok-alice")
			if err != nil {
				t.Errorf("client %d cannot connect: %v", w, err)
				return
			}
			defer s.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf("c%d-%d", w, i)
				r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": msg}})
				calls.Add(1)
				if err != nil || r.IsError || len(r.Content) == 0 || r.Content[0].(*mcp.TextContent).Text != msg {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%s: %v %+v", msg, err, r))
					mu.Unlock()
				}
			}
		})
	}
	waitFor(t, "calls to flow", func() bool { return calls.Load() > 50 })
	for i, g := range replicas {
		addr := backends[i]
		g.cmd.Process.Signal(syscall.SIGTERM)
		<-g.exited
		before := calls.Load()
		replicas[i] = replica(addr)
		// HAProxy's check puts the new replica back, and calls reach it,
		// before the next one stops.
		waitFor(t, fmt.Sprintf("replica %d to answer calls", i+1), func() bool {
			return metric(t, replicas[i].base, "aimon_gw_calls_total") > 0 && calls.Load() > before+20
		})
	}
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed across three rolling restarts; the first: %s", n, calls.Load(), failures[0])
	}
}

// TestR10ReadyzTurnsAtOnceWhileCallsAreServed: from SIGTERM on, /readyz
// answers 503 and calls are still answered until --drain-delay ends.
func TestR10ReadyzTurnsAtOnceWhileCallsAreServed(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--drain-delay", "30s", "--drain", "1s")
	s := g.session("tok-alice", "", nil)
	g.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the gateway to begin its drain delay", func() bool { return strings.Contains(g.logs(), "503 while calls are still served") })
	resp, err := http.Get(g.base + "/readyz")
	if err != nil {
		t.Fatalf("/readyz after SIGTERM: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz after SIGTERM: %d, want 503", resp.StatusCode)
	}
	r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil || r.IsError {
		t.Errorf("a call during the drain delay: %v %+v", err, r)
	}
	g.cmd.Process.Kill()
}
