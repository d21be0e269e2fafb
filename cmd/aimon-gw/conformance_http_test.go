package main

import (
	"bufio"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestR2HTTPReadsFramesAsStdio: over streamable HTTP (mcp --listen,
// stateless, one POST a frame) the conformance cases of what a frame can
// get wrong are answered as their golden says stdio answers them: params
// of the wrong kind in JSON's words and never the Go type the SDK decodes
// them into, a name or an id given twice, an id JSON-RPC does not allow,
// and the calls after them (issue 47 item 3: one reader for MCP frames on
// every transport, exact).
func TestR2HTTPReadsFramesAsStdio(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"params_wrong_kind", "duplicate_names", "odd_ids", "malformed", "batch_refused", "ping", "unknown_method", "tools_call_bad_input", "tools_call_allowed", "tools_call_denied", "tools_call_paths", "tools_call_deny_chains", "tools_call_many_violations"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("testdata", "conformance", name+".txtar")
			arch, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			var client []string
			var want []byte
			files := map[string]string{"principals.cue": "package policy\n\nprincipals: alice: {subject: \"alice\", surface: [\"agent\"]}\n"}
			for _, f := range arch.Files {
				switch {
				case f.Name == "client":
					client, _ = clientFrames(f.Data)
				case f.Name == "server":
					want = f.Data
				case strings.HasPrefix(f.Name, "policy/"):
					files[strings.TrimPrefix(f.Name, "policy/")] = string(f.Data)
				case f.Name == "args":
					t.Fatalf("%s: a case with args is not one HTTP can take as it is", path)
				}
			}
			policy := policydir.WriteIn(t, filepath.Join(work, "policy"), files)
			g := startHTTP(t, http.DefaultClient, "--policy", policy, "--workdir", work, "--cache", "off", "--tokens", tokensFile(t, staticTokens))

			// Stateless HTTP has no initialize: the frames after
			// notifications/initialized, and the answers after
			// initialize's, in order; a notification or a response gets
			// none.
			expected := serverFrames(t, path, want)
			if len(client) < 2 || !strings.Contains(client[1], "notifications/initialized") || len(expected) == 0 {
				t.Fatalf("%s does not start with initialize and notifications/initialized", path)
			}
			expected = expected[1:]
			n := 0
			for _, frame := range client[2:] {
				status, _, body := g.post("/mcp", "tok-alice", frame)
				if status == 202 && body == "" {
					continue // a notification, or a response: no answer
				}
				got := eventData(t, body)
				if n >= len(expected) {
					t.Errorf("%s: %s got an answer stdio does not give: %s", path, frame, got)
					continue
				}
				if norm := normaliseFrame(t, []byte(got), work); norm != expected[n] {
					t.Errorf("%s: %s over HTTP (%d):\n%s\nover stdio:\n%s", path, frame, status, norm, expected[n])
				}
				n++
			}
			if n != len(expected) {
				t.Errorf("%s: %d answers over HTTP, %d over stdio", path, n, len(expected))
			}
		})
	}
}

// eventData is the one message of an answer: a server-sent event's data,
// or the body when it is plain JSON.
func eventData(t *testing.T, body string) string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	switch {
	case len(data) == 1:
		return data[0]
	case len(data) == 0 && strings.HasPrefix(strings.TrimSpace(body), "{"):
		return body
	}
	t.Fatalf("not one message: %q", body)
	return ""
}
