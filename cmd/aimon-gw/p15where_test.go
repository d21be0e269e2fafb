package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestP15ApprovalIsBoundToItsWorkdirAndStore: a serve approval token is
// bound to the working directory its call was decided in and to the
// state store it is spent in (probe P5). Asked in one --workdir, the same
// words sent with it to a gateway of the same key in another --workdir
// run nothing there; sent to a gateway of the same key and workdir that
// spends approvals in another --state, nothing runs either; the gateway
// it was sealed for runs it, once.
func TestP15ApprovalIsBoundToItsWorkdirAndStore(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	wd1, _ := filepath.EvalSymlinks(t.TempDir())
	wd2, _ := filepath.EvalSymlinks(t.TempDir())
	dir := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Bash: schema.#Bash, Write: schema.#Write}
agent: {
	"allowed-tools": ["Read", "Bash", "Write(%s/**)", "Write(%s/**)"]
	"ask-tools": ["Bash(git init:*)"]
}
`, wd1, wd2))
	key := filepath.Join(t.TempDir(), "approval.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k3y-", 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	st1, st2 := t.TempDir(), t.TempDir()
	serve := func(wd, st string, approvals ...string) map[string]any {
		t.Helper()
		line := map[string]any{"type": "tool_use", "id": "g", "name": "Bash", "input": map[string]any{"command": "git init -q rr"}}
		if len(approvals) > 0 {
			line["approvals"] = approvals
		}
		b, _ := json.Marshal(line)
		return runServe(t, []string{"--policy", dir, "--workdir", wd, "--approval-key", key, "--state", st, "--cache", "off"}, nil, string(b))[0]
	}
	m := tokenRE.FindStringSubmatch(text(serve(wd1, st1)))
	if m == nil {
		t.Fatal("git init must be asked with a token")
	}
	tok := m[1]
	made := func(wd string) bool {
		_, err := os.Stat(filepath.Join(wd, "rr", ".git"))
		return err == nil
	}
	if r := serve(wd2, st1, tok); r["is_error"] != true || !strings.Contains(text(r), "another working directory") || made(wd2) {
		t.Errorf("a token of %s sent in %s must run nothing there (made: %v): %v", wd1, wd2, made(wd2), r)
	}
	if r := serve(wd1, st2, tok); r["is_error"] != true || !strings.Contains(text(r), "another state store") || made(wd1) {
		t.Errorf("a token spent in one --state must run nothing under another (made: %v): %v", made(wd1), r)
	}
	if r := serve(wd1, st1, tok); r["is_error"] != false || !made(wd1) {
		t.Errorf("the gateway the token was sealed for must run it: %v", r)
	}
	if r := serve(wd1, st1, tok); r["is_error"] != true || !strings.Contains(text(r), "already used") {
		t.Errorf("a replayed token: %v", r)
	}
}
