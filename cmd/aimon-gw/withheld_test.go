package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP14LinksLeadNotIntoWhatTheListsWithhold: a symbolic link inside the
// directory an allow entry opens (one an agent made with Bash, whose
// sandbox keeps a denied or asked directory read-only) takes no file tool
// into what a deny, ask or narrower allow entry withholds (rules P14, R6):
// the place a link leads to is decided as itself. Links that stay where
// the lists allow keep working.
func TestP14LinksLeadNotIntoWhatTheListsWithhold(t *testing.T) {
	t.Parallel()
	root := withheldLayout(t, "proj", map[string]string{"private/p.txt": "private\n", "docs/d.txt": "docs\n",
		"open/o.txt": "open\n", "notes.md": "notes\n", "secret.txt": "secret\n", "locked/.keep": ""}, `
tools: {Read: schema.#Read, Write: schema.#Write, Edit: schema.#Edit}
agent: "allowed-tools": ["Read(%[1]s/**)", "Write(%[1]s/**)", "Edit(%[1]s/**)"]
agent: "denied-tools": ["Read(%[1]s/private/**)", "Write(%[1]s/locked/**)"]
agent: "ask-tools": ["Write(%[1]s/docs/**)", "Edit(%[1]s/docs/**)"]
subagents: md: "allowed-tools": ["Read(%[1]s/*.md)"]
`)
	proj := root + "/proj"
	// The links, as `git -c alias.x='!ln -s private pl' x` makes them.
	for link, to := range map[string]string{"pl": "private", "pa": proj + "/private", "lk": "locked", "d2": "docs",
		"ol": "open", "leak.md": "secret.txt", "alias.md": "notes.md", "c1": "c2/sub", "c2": "locked"} {
		if err := os.Symlink(to, filepath.Join(proj, link)); err != nil {
			t.Fatal(err)
		}
	}
	read := func(id, p string) string {
		return toolUse(id, "Read", map[string]any{"file_path": p})
	}
	write := func(id, p string) string {
		return toolUse(id, "Write", map[string]any{"file_path": p, "content": "x"})
	}
	for _, c := range []struct {
		note    string
		surface string
		lines   []string
		errs    []bool   // is_error of each reply
		says    string   // in the last reply
		absent  []string // files that must not exist after
	}{
		{note: "a relative link into a denied directory is not read", lines: []string{read("1", proj+"/pl/p.txt")},
			errs: []bool{true}, says: "private/p.txt"},
		{note: "an absolute link into a denied directory is not read", lines: []string{read("1", proj+"/pa/p.txt")},
			errs: []bool{true}, says: "private/p.txt"},
		{note: "a link into a denied directory is not written", lines: []string{write("1", proj+"/lk/x.txt")},
			errs: []bool{true}, says: "locked/x.txt", absent: []string{"locked/x.txt"}},
		{note: "no directory is made through a link into a denied one", lines: []string{write("1", proj+"/lk/sub/x.txt")},
			errs: []bool{true}, says: "locked/sub/x.txt", absent: []string{"locked/sub"}},
		{note: "a chain of links to a directory still to make in a denied one makes nothing there", lines: []string{write("1", proj+"/c1/x.txt")},
			errs: []bool{true}, says: "locked/sub/x.txt", absent: []string{"locked/sub"}},
		{note: "a link into an asked directory is not written without approval", lines: []string{write("1", proj+"/d2/y.txt")},
			errs: []bool{true}, says: "docs/y.txt", absent: []string{"docs/y.txt"}},
		{note: "a file of an asked directory read through a link is not edited through it",
			lines: []string{read("1", proj+"/d2/d.txt"), toolUse("2", "Edit", map[string]any{"file_path": proj + "/d2/d.txt", "old_string": "docs", "new_string": "edited"})},
			errs:  []bool{false, true}, says: "docs/d.txt"},
		{note: "a link to a file a narrower allow list leaves out is not read", surface: "agent,subagent:md",
			lines: []string{read("1", proj+"/leak.md")}, errs: []bool{true}, says: "secret.txt"},
		{note: "a link to a file the narrower list allows is read", surface: "agent,subagent:md",
			lines: []string{read("1", proj+"/alias.md")}, errs: []bool{false}, says: "notes"},
		{note: "a link that stays where the lists allow is read and written",
			lines: []string{read("1", proj+"/ol/o.txt"), write("2", proj+"/ol/o.txt"), write("3", proj+"/ol/new.txt")},
			errs:  []bool{false, false, false}, says: "Created"},
	} {
		t.Run(c.note, func(t *testing.T) {
			surface := c.surface
			if surface == "" {
				surface = "agent"
			}
			replies := runServe(t, []string{"--policy", proj + "/gw/policy", "--workdir", proj, "--surface", surface}, nil, c.lines...)
			for i, r := range replies {
				if r["is_error"] != c.errs[i] {
					t.Errorf("reply %d: is_error %v, want %v: %v", i, r["is_error"], c.errs[i], r["content"])
				}
			}
			if last, _ := replies[len(replies)-1]["content"].(string); !strings.Contains(last, c.says) {
				t.Errorf("the last reply does not say %q: %s", c.says, last)
			}
			for _, a := range c.absent {
				if _, err := os.Lstat(filepath.Join(proj, a)); err == nil {
					t.Errorf("%s was made through a link", a)
					os.RemoveAll(filepath.Join(proj, a))
				}
			}
		})
	}
}

// TestP14ProcLinksLeadNotIntoWhatTheListsWithhold: under a name-only
// entry (the anchor is /), the kernel's own links (/proc/self/root,
// /proc/thread-self/root) take no file tool into what a
// deny or ask entry withholds; no Bash is needed to have them (rules P14,
// R6): the decision judges where the path lands by the deny and ask
// entries, and the built-ins' anchors check it again on what they open.
func TestP14ProcLinksLeadNotIntoWhatTheListsWithhold(t *testing.T) {
	t.Parallel()
	root := withheldLayout(t, ".", map[string]string{"secret/k": "s3cr3t-content\n", "asked/a": "s3cr3t-content\n", "open/o": "open\n"}, `
tools: {Read: schema.#Read, Grep: schema.#Grep, Glob: schema.#Glob}
agent: "allowed-tools": ["Read", "Grep", "Glob"]
agent: "denied-tools": ["Read(%[1]s/secret/**)", "Grep(%[1]s/secret/**)", "Glob(%[1]s/secret/**)"]
agent: "ask-tools": ["Read(%[1]s/asked/**)"]
`)
	for _, c := range []struct {
		note, line string
		isError    bool
		says       string
	}{
		{"a denied file through /proc/self/root", toolUse("1", "Read", map[string]any{"file_path": "/proc/self/root" + root + "/secret/k"}), true, root + "/secret/k\" is denied"},
		{"an asked file through /proc/thread-self/root", toolUse("1", "Read", map[string]any{"file_path": "/proc/thread-self/root" + root + "/asked/a"}), true, root + "/asked/a\" needs approval"},
		{"an allowed file through /proc/self/root", toolUse("1", "Read", map[string]any{"file_path": "/proc/self/root" + root + "/open/o"}), false, "open"},
		{"a grep of a denied file", toolUse("1", "Grep", map[string]any{"pattern": "s3cr3t", "path": "/proc/self/root" + root + "/secret/k"}), true, root + "/secret/k\" is denied"},
		{"a grep of a denied directory", toolUse("1", "Grep", map[string]any{"pattern": "s3cr3t", "path": "/proc/self/root" + root + "/secret", "output_mode": "content"}), true, root + "/secret\" is denied"},
		{"a glob of a denied directory", toolUse("1", "Glob", map[string]any{"pattern": "**", "path": "/proc/self/root" + root + "/secret"}), true, root + "/secret\" is denied"},
	} {
		t.Run(c.note, func(t *testing.T) {
			replies := runServe(t, []string{"--policy", root + "/proj/gw/policy", "--workdir", root}, nil, c.line)
			text, _ := replies[0]["content"].(string)
			if replies[0]["is_error"] != c.isError || !strings.Contains(text, c.says) || strings.Contains(text, "s3cr3t-content") || strings.Contains(text, "secret/k\n") {
				t.Errorf("is_error %v, want %v, saying %q: %s", replies[0]["is_error"], c.isError, c.says, text)
			}
		})
	}
}

// withheldLayout is a directory outside /tmp (a sandbox's /tmp is its
// own) holding files under dir, and a policy in dir/gw/policy whose body
// names dir's absolute path as %[1]s.
func withheldLayout(t *testing.T, dir string, files map[string]string, body string) string {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-withheld")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	base := filepath.Join(root, dir)
	for name, content := range files {
		writeFile(t, filepath.Join(base, name), content)
	}
	writeFile(t, root+"/proj/gw/cue.mod/module.cue", policydir.Module)
	writeFile(t, root+"/proj/gw/policy/policy.cue", "package policy\n\nimport \"aimon.dev/gw/schema\"\n"+fmt.Sprintf(body, base))
	return root
}

// toolUse is one call's line.
func toolUse(id, name string, input map[string]any) string {
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": name, "input": input})
	return string(b)
}

// TestP14WhereAPathLeadsIsJudgedByDenyAndAsk: Claude Code opens the files
// the hook allows itself, with no anchor, so the decision itself judges a
// path by the deny and ask entries where it lands too (rules P14, R7): the
// kernel's /proc/self/root and a link in the project reach no denied or
// asked file, in the hook as in check. A link to an allowed file stays
// allowed.
func TestP14WhereAPathLeadsIsJudgedByDenyAndAsk(t *testing.T) {
	t.Parallel()
	root := withheldLayout(t, ".", map[string]string{"secret/k": "s\n", "asked/a": "a\n", "open/o": "o\n"}, `
tools: {Read: schema.#Read}
agent: "allowed-tools": ["Read"]
agent: "denied-tools": ["Read(%[1]s/secret/**)"]
agent: "ask-tools": ["Read(%[1]s/asked/**)"]
`)
	for link, to := range map[string]string{"sl": "secret", "al": "asked", "ol": "open"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	policy := root + "/proj/gw/policy"
	for _, c := range []struct{ note, path, verdict string }{
		{"a denied file through /proc/self/root", "/proc/self/root" + root + "/secret/k", "deny"},
		{"a denied file through a link", root + "/sl/k", "deny"},
		{"an asked file through a link", root + "/al/a", "ask"},
		{"an allowed file through a link", root + "/ol/o", "allow"},
		{"the denied file itself", root + "/secret/k", "deny"},
		{"a denied file through a link, relative to the working directory", "sl/k", "deny"},
		{"an allowed file through a link, relative to the working directory", "ol/o", "allow"},
	} {
		t.Run(c.note, func(t *testing.T) {
			verdict, reason := hookDecision(t, policy, map[string]any{"cwd": root, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": map[string]any{"file_path": c.path}})
			if verdict != c.verdict {
				t.Errorf("hook: %s, want %s: %s", verdict, c.verdict, reason)
			}
			out, _ := exec.Command(gatewayBinary(t), "check", "--policy", policy, "--workdir", root, toolUse("1", "Read", map[string]any{"file_path": c.path})).Output()
			var d struct{ Allowed, Ask bool }
			if err := json.Unmarshal(out, &d); err != nil {
				t.Fatalf("check: %v: %s", err, out)
			}
			if got := map[[2]bool]string{{true, false}: "allow", {false, true}: "ask", {false, false}: "deny"}[[2]bool{d.Allowed, d.Ask}]; got != c.verdict {
				t.Errorf("check: %s, want %s: %s", got, c.verdict, out)
			}
		})
	}
}

// TestP15ApprovalKeyIsNoToolsToRead: the key that seals approval tokens
// is the gateway's secret: a command that read it could seal a token for
// any asked call, so no sandbox shows it and no file tool reads or writes
// it, however the policy's lists read (rules P15, R8).
func TestP15ApprovalKeyIsNoToolsToRead(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	const key = "k3y-5f1c0d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f"
	root := withheldLayout(t, ".", map[string]string{"keys/approval.key": key + "\n", "w/f": "f\n"}, `
tools: {Read: schema.#Read, Grep: schema.#Grep, Write: schema.#Write, Bash: schema.#Bash}
agent: "allowed-tools": ["Read", "Grep", "Write", "Bash(cat:*)"]
agent: "ask-tools": ["Write(%[1]s/w/**)"]
`)
	file := root + "/keys/approval.key"
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	replies := runServe(t, []string{"--policy", root + "/proj/gw/policy", "--workdir", root + "/w", "--approval-key", file}, nil,
		bashLine("cat", "cat "+file),
		toolUse("read", "Read", map[string]any{"file_path": file}),
		toolUse("proc", "Read", map[string]any{"file_path": "/proc/self/root" + file}),
		toolUse("grep", "Grep", map[string]any{"pattern": "k3y", "path": root + "/keys", "output_mode": "content"}),
		toolUse("write", "Write", map[string]any{"file_path": file, "content": key}),
	)
	for _, r := range replies {
		if text, _ := r["content"].(string); strings.Contains(text, key) {
			t.Errorf("%v showed the approval key: %s", r["tool_use_id"], text)
		}
	}
	for _, i := range []int{1, 2, 4} {
		if replies[i]["is_error"] != true {
			t.Errorf("%v was not refused: %v", replies[i]["tool_use_id"], replies[i]["content"])
		}
	}
	if data, _ := os.ReadFile(file); string(data) != key+"\n" {
		t.Errorf("the approval key was changed: %q", data)
	}
}

// TestP14ClaudeCodeSearchesReachNothingWithheld: Claude Code runs its own
// Grep and Glob over the whole tree below their path, where the built-ins
// visit only what the lists admit, so the hook refuses a search whose
// directory holds what a deny, ask or narrower allow entry withholds
// (asking when only an ask entry does), and a Glob pattern that leaves
// its directory (rules P4, P14, R7). A search of a directory that holds
// none of it, or of a file, stays allowed.
func TestP14ClaudeCodeSearchesReachNothingWithheld(t *testing.T) {
	t.Parallel()
	root := withheldLayout(t, ".", map[string]string{"top/private/k": "s\n", "top/src/a.go": "package a\n", "top/notes.md": "n\n",
		"area/asked/a": "a\n", "area/open/o": "o\n"}, `
import "aimon.dev/gw/schema/claudecode"

_schema: schema.#Tool
tools: claudecode.#Tools
agent: "allowed-tools": ["Grep", "Glob"]
agent: "denied-tools": ["Grep(%[1]s/top/private/**)", "Glob(%[1]s/top/private/**)"]
agent: "ask-tools": ["Grep(%[1]s/area/asked/**)"]
subagents: shallow: "allowed-tools": ["Grep(%[1]s/top/*)", "Glob(%[1]s/top/*)"]
`)
	if err := os.Symlink("top", filepath.Join(root, "tl")); err != nil {
		t.Fatal(err)
	}
	policy := root + "/proj/gw/policy"
	for _, c := range []struct {
		note, agent, tool string
		input             map[string]any
		verdict, says     string
	}{
		{"a grep of a directory that holds a denied one", "", "Grep", map[string]any{"pattern": "s", "path": root + "/top"}, "deny", "top/private/**"},
		{"a grep of the working directory above it", "", "Grep", map[string]any{"pattern": "s"}, "deny", "top/private/**"},
		{"a grep through a link to it", "", "Grep", map[string]any{"pattern": "s", "path": root + "/tl"}, "deny", "top/private/**"},
		{"a glob of a directory that holds a denied one", "", "Glob", map[string]any{"pattern": "**", "path": root + "/top"}, "deny", "top/private/**"},
		{"a grep of a directory that holds an asked one", "", "Grep", map[string]any{"pattern": "s", "path": root + "/area"}, "ask", "area/asked/**"},
		{"a glob pattern that climbs out", "", "Glob", map[string]any{"pattern": "../private/*", "path": root + "/top/src"}, "deny", "leave its directory"},
		{"an absolute glob pattern", "", "Glob", map[string]any{"pattern": root + "/top/private/*", "path": root + "/top/src"}, "deny", "leave its directory"},
		{"a glob pattern that climbs out in braces", "", "Glob", map[string]any{"pattern": "{..,x}/private/*", "path": root + "/top/src"}, "deny", "leave its directory"},
		{"a narrower list one level deep", "shallow", "Grep", map[string]any{"pattern": "s", "path": root + "/top/src"}, "deny", "top/*"},
		{"a grep of a directory that holds none of it", "", "Grep", map[string]any{"pattern": "s", "path": root + "/top/src"}, "allow", ""},
		{"a grep of a file beside a denied directory", "", "Grep", map[string]any{"pattern": "s", "path": root + "/top/notes.md"}, "allow", ""},
		{"a glob below", "", "Glob", map[string]any{"pattern": "**/*.go", "path": root + "/top/src"}, "allow", ""},
		{"a grep of a file under a narrower list", "shallow", "Grep", map[string]any{"pattern": "s", "path": root + "/top/notes.md"}, "allow", ""},
	} {
		t.Run(c.note, func(t *testing.T) {
			verdict, reason := hookDecision(t, policy, map[string]any{"cwd": root, "hook_event_name": "PreToolUse", "tool_name": c.tool, "tool_input": c.input, "agent_type": c.agent})
			if verdict != c.verdict || !strings.Contains(reason, c.says) {
				t.Errorf("hook: %s, want %s saying %q: %s", verdict, c.verdict, c.says, reason)
			}
		})
	}
}

// hookDecision runs the binary's Claude Code hook under policy on the hook
// input in and returns its decision and reason.
func hookDecision(t *testing.T, policy string, in map[string]any) (string, string) {
	t.Helper()
	b, _ := json.Marshal(in)
	hook := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", policy, "--cache", "off")
	hook.Stdin = strings.NewReader(string(b))
	out, err := hook.Output()
	var h struct {
		Out struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
	}
	if err != nil || json.Unmarshal(out, &h) != nil {
		t.Fatalf("hook: %v: %s", err, out)
	}
	return h.Out.PermissionDecision, h.Out.PermissionDecisionReason
}
