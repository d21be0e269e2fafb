package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestR10ApprovalRunsOnceAcrossHTTPReplicasBehindHAProxy: two mcp --listen
// replicas behind a real HAProxy share the approval key and a real Redis.
// An ask answered through HAProxy (its request state is the token) runs
// once: the same retry sent again, through HAProxy to either replica,
// runs nothing; and in 100 rounds where both replicas are sent the same
// retry at once, exactly one runs it.
func TestR10ApprovalRunsOnceAcrossHTTPReplicasBehindHAProxy(t *testing.T) {
	addr, _ := startRedis(t)
	dir, wd := askSetup(t)
	writeFile(t, filepath.Join(dir, "principals.cue"), "package policy\n\nprincipals: alice: {subject: \"alice\", surface: [\"agent\"]}\n")
	args := []string{"--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--approval-key", approvalKey(t), "--state", "redis://" + addr}
	r1, r2 := startHTTP(t, http.DefaultClient, args...), startHTTP(t, http.DefaultClient, args...)
	port := freePort(t)
	startHAProxy(t, port, []string{strings.TrimPrefix(r1.base, "http://"), strings.TrimPrefix(r2.base, "http://")})
	lb := &httpGW{t: t, client: http.DefaultClient, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	// The client declares elicitation (so it can be asked) and handles
	// the retry itself, so that the test holds the request state.
	opts := &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("the test answers by retrying itself")
		},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	via, s1, s2 := lb.session("tok-alice", "", opts), r1.session("tok-alice", "", opts), r2.session("tok-alice", "", opts)
	read := map[string]any{"file_path": filepath.Join(wd, "secret/a")}
	ask := func() string {
		t.Helper()
		res, err := via.CallTool(context.Background(), &mcp.CallToolParams{Name: "Read", Arguments: read})
		if err != nil || !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("an ask must be an input request with a state: %v %v", res, err)
		}
		return res.RequestState
	}
	retry := func(s *mcp.ClientSession, state string) (ran bool, says string) {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "Read", Arguments: read, RequestState: state,
			InputResponses: mcp.InputResponseMap{"approve": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}})
		if err != nil {
			t.Errorf("the retry: %v", err)
			return false, ""
		}
		return !res.IsError && strings.Contains(resultText(res), "the secret"), resultText(res)
	}

	state := ask()
	if ran, says := retry(via, state); !ran {
		t.Fatalf("the approved retry must run: %q", says)
	}
	for i := range 2 { // round-robin: one to each replica
		if ran, says := retry(via, state); ran || !strings.Contains(says, "already used") {
			t.Errorf("replay %d through HAProxy must run nothing: %q", i, says)
		}
	}
	for round := range 100 {
		state := ask()
		var wg sync.WaitGroup
		var ran [2]bool
		var says [2]string
		for i, s := range []*mcp.ClientSession{s1, s2} {
			wg.Go(func() { ran[i], says[i] = retry(s, state) })
		}
		wg.Wait()
		if ran[0] == ran[1] {
			t.Fatalf("round %d: the token must run on exactly one replica: %q / %q", round, says[0], says[1])
		}
	}
}
