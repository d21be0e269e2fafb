package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/runtime/gateway"
)

// TestP18SealedSessionAcrossHTTPReplicas: two mcp --listen replicas share
// the approval key and a real Redis. Alice's read of a page outside the
// working tree on one replica gives her a sealed session handle in the
// result's _meta; her Write sent to the other replica with that handle is
// refused with the sentence naming the read, and nothing is written. The
// same Write with no handle (a session of its own, which read nothing)
// lands. Rita sending Alice's handle, a handle with its seal altered, and
// Alice's handle sent to a replica of another key are refused with a
// sentence each, and write nothing. Through the HTTP hook, Alice's
// PostToolUse on one replica makes her Write in that session denied on the
// other, and Rita's session of the same id is her own.
func TestP18SealedSessionAcrossHTTPReplicas(t *testing.T) {
	addr, _ := startRedis(t)
	dir, wd, page := p18Setup(t)
	writeFile(t, filepath.Join(dir, "principals.cue"), "package policy\n\nprincipals: {alice: {subject: \"alice\", surface: [\"agent\"]}, rita: {subject: \"rita\", surface: [\"agent\"]}}\n")
	args := []string{"--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--state", "redis://" + addr}
	key := append([]string{"--approval-key", approvalKey(t)}, args...)
	other := filepath.Join(t.TempDir(), "other.key")
	os.WriteFile(other, []byte(strings.Repeat("m", 32)), 0o600)
	r1, r2 := startHTTP(t, http.DefaultClient, key...), startHTTP(t, http.DefaultClient, key...)
	r3 := startHTTP(t, http.DefaultClient, append([]string{"--approval-key", other}, args...)...)
	ctx := context.Background()
	call := func(s *mcp.ClientSession, handle, tool string, in map[string]any) (*mcp.CallToolResult, string) {
		t.Helper()
		p := &mcp.CallToolParams{Name: tool, Arguments: in}
		if handle != "" {
			p.Meta = mcp.Meta{gateway.SessionMeta: handle}
		}
		res, err := s.CallTool(ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		h, _ := res.Meta[gateway.SessionMeta].(string)
		return res, h
	}
	write := func(name string) map[string]any {
		return map[string]any{"file_path": filepath.Join(wd, name), "content": "x"}
	}

	alice1, alice2, rita2 := r1.session("tok-alice", "", nil), r2.session("tok-alice", "", nil), r2.session("tok-rita", "", nil)
	res, handle := call(alice1, "", "Read", map[string]any{"file_path": page})
	if res.IsError || handle == "" {
		t.Fatalf("the read gave no handle: %q %v", resultText(res), res.Meta)
	}
	res, again := call(alice2, handle, "Write", write("tainted"))
	if !res.IsError || !strings.Contains(resultText(res), "The result of Read of "+page+" (call mcp_1) labelled the session untrusted") || exists(filepath.Join(wd, "tainted")) {
		t.Errorf("the write in the tainted session, on the other replica: %q", resultText(res))
	}
	if again != handle {
		t.Errorf("the session's handle changed: %q, was %q", again, handle)
	}
	if res, fresh := call(alice2, "", "Write", write("fresh")); res.IsError || !exists(filepath.Join(wd, "fresh")) || fresh == "" || fresh == handle {
		t.Errorf("the write in a new session: %q (handle %q)", resultText(res), fresh)
	}
	forged := handle[:len(handle)-2] + "AA"
	if forged == handle {
		forged = handle[:len(handle)-2] + "BB"
	}
	for _, c := range []struct {
		name   string
		s      *mcp.ClientSession
		handle string
		says   string
	}{
		{"another caller", rita2, handle, "was sealed for another caller than rita"},
		{"an altered seal", alice2, forged, "was not sealed by this gateway"},
		{"another key", r3.session("tok-alice", "", nil), handle, "was not sealed by this gateway"},
	} {
		res, _ := call(c.s, c.handle, "Write", write("forged"))
		if !res.IsError || !strings.Contains(resultText(res), c.says) || exists(filepath.Join(wd, "forged")) {
			t.Errorf("%s: %q, want %q", c.name, resultText(res), c.says)
		}
	}

	// The HTTP hook: Alice's PostToolUse on one replica labels her session
	// of that id, which the other replica decides by; Rita's session of the
	// same id is hers, and has read nothing.
	sid := sessionID(t)
	if status, _, body := r1.post("/hooks/claude-code", "tok-alice", hookInput("PostToolUse", sid, wd, "Read", map[string]any{"file_path": page})); status != 200 || strings.TrimSpace(body) != "{}" {
		t.Fatalf("the HTTP hook's PostToolUse: %d %s", status, body)
	}
	pre := hookInput("PreToolUse", sid, wd, "Write", write("hooked"))
	if _, _, body := r2.post("/hooks/claude-code", "tok-alice", pre); !strings.Contains(body, `"permissionDecision":"deny"`) || !strings.Contains(body, "labelled the session untrusted") {
		t.Errorf("alice's write in her tainted hook session, on the other replica: %s", body)
	}
	if _, _, body := r2.post("/hooks/claude-code", "tok-rita", pre); !strings.Contains(body, `"permissionDecision":"allow"`) {
		t.Errorf("rita's write in her session of the same id: %s", body)
	}
}

// TestP18RefusedSessionHandleIsRecordedOnce: through mcp --listen, a
// Write sent with a session handle whose seal was altered is refused with
// the sentence saying so, writes nothing, and is in the decision log once:
// one record of that call, refused by P18 with the same sentence, for
// Alice; the read that gave the handle is recorded as before.
func TestP18RefusedSessionHandleIsRecordedOnce(t *testing.T) {
	t.Parallel()
	dir, wd, page := p18Setup(t)
	writeFile(t, filepath.Join(dir, "principals.cue"), "package policy\n\nprincipals: alice: {subject: \"alice\", surface: [\"agent\"]}\n")
	dlog := filepath.Join(t.TempDir(), "decisions.jsonl")
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--approval-key", approvalKey(t), "--decision-log", dlog)
	s := g.session("tok-alice", "", nil)
	ctx := context.Background()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Read", Arguments: map[string]any{"file_path": page}})
	handle, _ := res.Meta[gateway.SessionMeta].(string)
	if err != nil || res.IsError || handle == "" {
		t.Fatalf("the read: %v %v %v", err, res, handle)
	}
	forged := handle[:len(handle)-2] + "AA"
	if forged == handle {
		forged = handle[:len(handle)-2] + "BB"
	}
	target := filepath.Join(wd, "forged")
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "Write", Arguments: map[string]any{"file_path": target, "content": "x"}, Meta: mcp.Meta{gateway.SessionMeta: forged}})
	if err != nil || !res.IsError || !strings.Contains(resultText(res), "was not sealed by this gateway") || exists(target) {
		t.Fatalf("the write with an altered handle: %v %q (written %v)", err, resultText(res), exists(target))
	}
	if code := g.stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, g.logs())
	}
	data, err := os.ReadFile(dlog)
	if err != nil {
		t.Fatal(err)
	}
	var writes, reads int
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Phase, Tool, Rule, Reason, Principal string
			CallID                               string `json:"call_id"`
			Allowed                              bool
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		switch r.Tool {
		case "Write":
			writes++
			if r.Phase != "decided" || r.Allowed || r.Rule != "P18" || r.Reason != resultText(res) || r.Principal != "alice" || r.CallID == "" {
				t.Errorf("the refused write's record: %s", l)
			}
		case "Read":
			reads++
		}
	}
	if writes != 1 || reads == 0 {
		t.Errorf("%d records of the refused write (want 1), %d of the read:\n%s", writes, reads, data)
	}
}
