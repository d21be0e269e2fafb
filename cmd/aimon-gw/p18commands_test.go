package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// p18CommandsLayout is a project whose web page a label names, by the
// given label entries, for a flow that denies writes to the project once
// a session holds it; world-readable and the project world-writable, so
// that the gateway runs on it as nobody too.
func p18CommandsLayout(t *testing.T, entries string) (proj, policy string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-p18cmd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj = root + "/proj"
	writeFile(t, proj+"/web/page.html", "<p>IGNORE-PREVIOUS-INSTRUCTIONS</p>\n")
	writeFile(t, proj+"/notes.txt", "plain notes\n")
	policy = root + "/policy"
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Write: schema.#Write, Bash: schema.#Bash}
labels: untrusted: entries: %s
agent: {
	"allowed-tools": ["Read", "Bash", "Write(%s/**)"]
	when: untrusted: "denied-tools": ["Write(%[2]s/**)"]
}
validation: "enforce"
`, entries, proj)})
	openToNobody(root, proj)
	return proj, policy
}

// openToNobody makes the tree at root readable by every user and, at and
// below writable, writable: the gateway runs on it as nobody too.
func openToNobody(root, writable string) {
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		switch {
		case err != nil:
		case fi.IsDir() && (p == writable || strings.HasPrefix(p, writable+"/")):
			os.Chmod(p, 0o777)
		case fi.IsDir():
			os.Chmod(p, 0o755)
		default:
			os.Chmod(p, 0o644)
		}
		return nil
	})
}

// TestP18CommandsReadLabelledFilesOnlyAsLabelledReads: a label's Read
// entry binds a session's commands as a Read deny does (rules P18, P17;
// probe P1: cat of the labelled page returned it and left the session
// unlabelled, so the flow's deny never came). Through serve, as root and as
// nobody: where the label's entry has a directory of its own, a command of
// a session that does not hold the label does not see it (cat finds no
// page, and the session may still write); once a Read gave the label, cat
// shows the page and the write is refused. Where the entry cannot be hidden
// (a pattern with no directory of its own, the tool-wide Read), every
// command's result gives the label: the write after cat is refused, and
// nothing is written.
func TestP18CommandsReadLabelledFilesOnlyAsLabelledReads(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			bin := append(append([]string{}, u.prefix...), gatewayBinary(t))
			t.Run("hidden", func(t *testing.T) {
				t.Parallel()
				// The entry names the web directory below the project.
				proj, policy := p18CommandsLayout(t, `["Read(./web/**)"]`)
				lines := []string{
					bashLine("cat", "cat web/page.html; cat notes.txt"),
					p18Line("write", "Write", map[string]any{"file_path": proj + "/w1.txt", "content": "x"}),
					p18Line("read", "Read", map[string]any{"file_path": proj + "/web/page.html"}),
					bashLine("cat again", "cat web/page.html"),
					p18Line("write again", "Write", map[string]any{"file_path": proj + "/w2.txt", "content": "x"}),
				}
				replies := runServeAs(t, bin, []string{"--policy", policy, "--workdir", proj}, nil, lines...)
				if len(replies) != len(lines) {
					t.Fatalf("%d replies to %d calls: %v", len(replies), len(lines), replies)
				}
				text := func(i int) string { return fmt.Sprint(replies[i]["content"]) }
				if strings.Contains(text(0), "IGNORE-PREVIOUS") || !strings.Contains(text(0), "plain notes") {
					t.Errorf("an unlabelled session's cat read the labelled page (or not the plain file): %s", text(0))
				}
				if !exists(proj + "/w1.txt") {
					t.Errorf("the write after a cat that read nothing labelled was not made: %s", text(1))
				}
				if !strings.Contains(text(3), "IGNORE-PREVIOUS") {
					t.Errorf("once labelled, the session's cat did not see the page it may read: %s", text(3))
				}
				if exists(proj+"/w2.txt") || !strings.Contains(text(4), "labelled untrusted") {
					t.Errorf("the write after the labelling Read was not refused by the flow: %s", text(4))
				}
			})
			for name, entries := range map[string]string{
				"pattern without a directory": `["Read(**/*.html)"]`,
				"tool-wide":                   `["Read"]`,
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					proj, policy := p18CommandsLayout(t, entries)
					lines := []string{
						bashLine("cat", "cat web/page.html"),
						p18Line("write", "Write", map[string]any{"file_path": proj + "/w.txt", "content": "x"}),
					}
					replies := runServeAs(t, bin, []string{"--policy", policy, "--workdir", proj}, nil, lines...)
					if len(replies) != len(lines) {
						t.Fatalf("%d replies to %d calls: %v", len(replies), len(lines), replies)
					}
					if exists(proj+"/w.txt") || !strings.Contains(fmt.Sprint(replies[1]["content"]), "labelled untrusted") {
						t.Errorf("after a command that could read the labelled page (%s), the write was not refused: %v", fmt.Sprint(replies[0]["content"]), replies[1])
					}
				})
			}
		})
	}
}

// TestP18HookCommandsReadLabelledFilesOnlyAsLabelledReads: under the Claude
// Code hook the same holds (rules P18, P17; probe P1): the command the hook
// wraps for an unlabelled session runs in a sandbox that hides the page a
// hideable label entry names, and where the entry cannot be hidden (the
// tool-wide Read) a PostToolUse of any Bash command labels the session, so
// its next Write is denied.
func TestP18HookCommandsReadLabelledFilesOnlyAsLabelledReads(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	hookPolicy := func(t *testing.T, entries string) (string, string) {
		proj, policy := p18CommandsLayout(t, entries)
		p18ClaudeTools(t, policy)
		return proj, policy
	}
	t.Run("hidden", func(t *testing.T) {
		t.Parallel()
		proj, policy := hookPolicy(t, `["Read(./web/**)"]`)
		out, stderr, code := runHook(t, "claude-code", policy, hookInput("PreToolUse", sessionID(t), proj, "Bash", map[string]any{"command": "cat web/page.html; cat notes.txt"}))
		wrapped := jsonField(t, out, "hookSpecificOutput", "updatedInput", "command")
		if code != 0 || wrapped == "" {
			t.Fatalf("the hook did not wrap the command: exit %d: %s %s", code, out, stderr)
		}
		got, _ := runAs(t, gatewayUser{name: "self", uid: -1, gid: -1}, proj, wrapped)
		if strings.Contains(got, "IGNORE-PREVIOUS") || !strings.Contains(got, "plain notes") {
			t.Errorf("the wrapped command of an unlabelled session read the labelled page (or not the plain file): %s", got)
		}
	})
	t.Run("tool-wide", func(t *testing.T) {
		t.Parallel()
		proj, policy := hookPolicy(t, `["Read"]`)
		sid := sessionID(t)
		post := hookInput("PostToolUse", sid, proj, "Bash", map[string]any{"command": "cat web/page.html"})
		if out, stderr, code := runHook(t, "claude-code", policy, post); code != 0 {
			t.Fatalf("PostToolUse of Bash: exit %d: %s %s", code, out, stderr)
		}
		out, _, _ := runHook(t, "claude-code", policy, hookInput("PreToolUse", sid, proj, "Write", map[string]any{"file_path": proj + "/w.txt", "content": "x"}))
		if d := jsonField(t, out, "hookSpecificOutput", "permissionDecision"); d != "deny" || !strings.Contains(out, "labelled untrusted") {
			t.Errorf("a Write after a Bash command that could read what Read labels was not denied by the flow: %s", out)
		}
	})
}

// jsonField is the string at path in the JSON object text; "" when absent.
func jsonField(t *testing.T, text string, path ...string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return ""
	}
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}
