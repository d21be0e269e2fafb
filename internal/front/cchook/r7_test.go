package cchook

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"aimon.dev/gw/internal/runtime/gateway"
)

// TestR7HookDecidesThePathClaudeCodeOpens holds the hook to the path Claude
// Code acts on: "~" is the user's home, surrounding white space is trimmed
// as JavaScript trims it, relative paths resolve against the input's cwd,
// an input without cwd is blocked, and an allowed call whose canonical
// input differs is answered with it (updatedInput).
func TestR7HookDecidesThePathClaudeCodeOpens(t *testing.T) {
	gen := load(t, "/work/proj")
	t.Setenv("HOME", "/home/u")
	for _, tc := range []struct {
		note, cwd, tool, input string
		want, says             string
		updated                map[string]any // nil: no updatedInput
	}{
		{note: "~ is the user's home, not a directory under cwd", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":"~/.bashrc","content":"x"}`, want: "deny", says: `"~/.bashrc" (resolved to "/home/u/.bashrc")`},
		{note: "a bare ~ is the home too", cwd: "/work/proj/src", tool: "Edit",
			input: `{"file_path":"~","old_string":"a","new_string":"b"}`, want: "deny", says: `/home/u`},
		{note: "another user's home is not expanded", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":"~root/.bashrc","content":"x"}`, want: "deny", says: "another user's home"},
		{note: "a leading space is trimmed, so the path is absolute", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":" /etc/passwd","content":"x"}`, want: "deny", says: `(resolved to "/etc/passwd")`},
		{note: "a newline and a tab are trimmed", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":"\n\t/etc/cron.d/x","content":"x"}`, want: "deny", says: `/etc/cron.d/x`},
		{note: "a no-break space is trimmed", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":"\u00a0/etc/passwd","content":"x"}`, want: "deny", says: `/etc/passwd`},
		{note: "a byte order mark is trimmed", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":"\ufeff/etc/passwd","content":"x"}`, want: "deny", says: `/etc/passwd`},
		{note: "an allowed relative path runs as the absolute path decided", cwd: "/work/proj/src", tool: "Write",
			input: `{"file_path":" a.go","content":"x"}`, want: "allow",
			updated: map[string]any{"file_path": "/work/proj/src/a.go", "content": "x"}},
		{note: "an absolute, clean path needs no update", cwd: "/work/proj", tool: "Read",
			input: `{"file_path":"/work/proj/a.go","offset":10}`, want: "allow"},
		{note: "a command is not a path and needs no update", cwd: "/work/proj", tool: "Bash",
			input: `{"command":"git status","timeout":120000}`, want: "allow"},
		{note: "no cwd blocks the call", cwd: "", tool: "Read",
			input: `{"file_path":"/work/proj/a.go"}`, want: "deny", says: "has no cwd"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			out := Answer(Runtime, gen, Input{Cwd: tc.cwd, ToolName: tc.tool, ToolInput: json.RawMessage(tc.input)}, gateway.Options{}, nil)
			d := out.HookSpecificOutput
			if d.PermissionDecision != tc.want || !strings.Contains(d.PermissionDecisionReason, tc.says) {
				t.Fatalf("got %s %q; want %s saying %q", d.PermissionDecision, d.PermissionDecisionReason, tc.want, tc.says)
			}
			if !reflect.DeepEqual(d.UpdatedInput, tc.updated) {
				t.Errorf("updatedInput %v, want %v", d.UpdatedInput, tc.updated)
			}
		})
	}
}
