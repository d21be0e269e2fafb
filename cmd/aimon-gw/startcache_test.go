package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// token is an approval token in a reply: sealed with a time, so it
// differs between any two processes.
var token = regexp.MustCompile(`(approvals\\": \[\\")[^\\"]+`)

// TestR3ServeStartsFromItsRecord is the differential test of a start from
// the load cache (issue 32): over the shipped example policies, the
// embedded one and the deny-and-ask policy, on each surface chain, serve
// and mcp restored from its record answer the tool list and every call of
// the corpus byte for byte as they do on a fresh load (--cache off), and
// the decision log says the same. The first start records the policy; the
// later ones say in the log that they were restored.
func TestR3ServeStartsFromItsRecord(t *testing.T) {
	t.Parallel()
	bin := gatewayBinary(t)
	for _, tc := range []struct {
		note, policy string
		chains       []string
		asks         bool // some call of the corpus is asked
	}{
		{note: "team", policy: "team", chains: []string{"agent", "agent,subagent:docs-writer", "agent,subagent:reviewer", "agent,skill:lint", "agent,command:test"}},
		{note: "team in YAML", policy: "yaml", chains: []string{"agent", "agent,subagent:reviewer"}},
		{note: "Claude Code", policy: "claude-code", chains: []string{"agent", "agent,subagent:reviewer"}},
		{note: "deny and ask", policy: "../../cmd/aimon-gw/testdata/policies/denyask", chains: []string{"agent", "agent,subagent:reviewer"}, asks: true},
		{note: "the embedded policy", chains: []string{"agent"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			t.Parallel()
			root, _ := filepath.EvalSymlinks(t.TempDir())
			repo := filepath.Join(root, "repo")
			args := []string{"--workdir", repo, "--approval-key", approvalKey(t)}
			if tc.policy != "" {
				args = append(args, "--policy", copyPolicy(t, filepath.Join("../../examples/policies", tc.policy), "/srv/repo", repo))
			}
			cache := filepath.Join(root, "cache")
			calls := corpus(repo)
			input := map[string][]string{"serve": append([]string{`{"type":"list_tools"}`}, calls...), "mcp": mcpFrames(calls)}
			// run serves the corpus on a fresh copy of the repository, as
			// the calls write into it; it returns the replies and the
			// decision log (for mcp sorted, as it answers concurrently),
			// and the gateway's log.
			run := func(command, chain, cacheFlag string) (string, string, string) {
				lines := input[command]
				os.RemoveAll(repo)
				os.MkdirAll(filepath.Join(repo, "docs"), 0o755)
				writeFile(t, filepath.Join(repo, "main.go"), "package main\n")
				writeFile(t, filepath.Join(repo, "docs", "a.md"), "a\n")
				dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
				cmd := exec.Command(bin, append([]string{command, "--log-level", "debug", "--cache", cacheFlag, "--surface", chain, "--decision-log", dlog}, args...)...)
				cmd.Dir = repo
				cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s on %s: %v\n%s", command, chain, err, stderr.String())
				}
				replies := strings.Split(token.ReplaceAllString(string(out), "${1}TOKEN"), "\n")
				var decisions []string
				for _, r := range readRecords(t, dlog) {
					decisions = append(decisions, outcomeOf(r)+" "+r["tool"].(string)+": "+r["reason"].(string))
				}
				if command == "mcp" {
					slices.Sort(replies)
					slices.Sort(decisions)
				}
				return strings.Join(replies, "\n"), strings.Join(decisions, "\n"), stderr.String()
			}
			_, _, log := run("serve", tc.chains[0], cache)
			if !strings.Contains(log, "the policy is recorded") {
				t.Fatalf("the first start kept no record:\n%s", log)
			}
			for _, command := range []string{"serve", "mcp"} {
				for _, chain := range tc.chains {
					fresh, freshDecisions, _ := run(command, chain, "off")
					if tc.asks && command == "serve" && !strings.Contains(fresh, "TOKEN") {
						t.Errorf("%s: no call was asked, so no approval was compared:\n%s", chain, fresh)
					}
					for i := range 2 {
						restored, decisions, log := run(command, chain, cache)
						if !strings.Contains(log, "the policy is restored from its record") || strings.Contains(log, "afresh") {
							t.Fatalf("%s on %s, start %d: not restored from the record:\n%s", command, chain, i+2, log)
						}
						if restored != fresh {
							t.Errorf("%s on %s, start %d: the restored policy answers\n%s\nwhere a fresh load answers\n%s", command, chain, i+2, restored, fresh)
						}
						if decisions != freshDecisions {
							t.Errorf("%s on %s, start %d: the restored policy decides\n%s\nwhere a fresh load decides\n%s", command, chain, i+2, decisions, freshDecisions)
						}
					}
				}
			}
		})
	}
}

// mcpFrames are the MCP frames of a client that lists the tools and
// makes each call of lines but those that write: mcp runs calls
// concurrently, and a Read beside a Write would answer by which ran first.
func mcpFrames(lines []string) []string {
	frames := []string{`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`}
	for j, line := range lines {
		if _, name, input, ok := lineCall(line); ok && name != "Write" && name != "Edit" {
			frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": j, "method": "tools/call", "params": map[string]any{"name": name, "arguments": input}})
			frames = append(frames, string(frame))
		}
	}
	return frames
}

// approvalKey writes a key that seals approval tokens, the same for every
// process of a test.
func approvalKey(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "approval.key")
	if err := os.WriteFile(p, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestR3HTTPStartsFromItsRecord: mcp --listen restored from its record
// maps callers to surfaces by the policy's principals, lists and decides
// as it does on a fresh load (--cache off).
func TestR3HTTPStartsFromItsRecord(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, httpPolicy), t.TempDir()
	tokens, cache := tokensFile(t, staticTokens), filepath.Join(t.TempDir(), "cache")
	// serve starts the gateway with --cache flag and returns what each
	// caller sees and its log.
	serve := func(flag string, recorded bool) (string, string) {
		g := startHTTP(t, http.DefaultClient, "--log-level", "debug", "--cache", flag, "--policy", dir, "--workdir", wd, "--tokens", tokens)
		if recorded {
			waitFor(t, "the record", func() bool { return strings.Contains(g.logs(), "the policy is recorded") })
		}
		var seen strings.Builder
		for _, tok := range []string{"tok-alice", "tok-rita"} {
			s := g.session(tok, "", nil)
			list, err := s.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range list.Tools {
				fmt.Fprintf(&seen, "%s lists %s\n", tok, tool.Name)
			}
			for _, c := range []struct {
				name string
				args map[string]any
			}{{"Echo", map[string]any{"message": "x"}}, {"Read", map[string]any{"file_path": "/etc/passwd"}}, {"Glob", map[string]any{"pattern": "*"}}} {
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: c.args})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&seen, "%s calls %s: %v %s\n", tok, c.name, res.IsError, resultText(res))
			}
		}
		status, _, body := g.post("/mcp", "tok-eve", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		fmt.Fprintf(&seen, "tok-eve: %d %s\n", status, body)
		logs := g.logs()
		g.stop()
		return seen.String(), logs
	}
	fresh, _ := serve("off", false)
	if _, log := serve(cache, true); !strings.Contains(log, "loaded afresh") {
		t.Fatalf("the first start was not a fresh load:\n%s", log)
	}
	restored, log := serve(cache, false)
	if !strings.Contains(log, "the policy is restored from its record") {
		t.Fatalf("the second start was not restored from the record:\n%s", log)
	}
	if restored != fresh {
		t.Errorf("restored, the callers see\n%s\nand on a fresh load\n%s", restored, fresh)
	}
	if !strings.Contains(fresh, "tok-rita calls Echo: true") || !strings.Contains(fresh, "tok-alice calls Echo: false") {
		t.Errorf("the principals do not map the callers to their surfaces:\n%s", fresh)
	}
}
