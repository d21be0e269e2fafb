package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR6HookJudgesWhereAllowedPathsLead: through the hook binary, with
// Write(./**) and a cwd reached through an operator's link (/srv -> the
// real directory), a write in the project is allowed; one through a link
// in the project to outside, or a dangling one pointing outside, is
// refused naming the link and where it leads (rule R6).
func TestR6HookJudgesWhereAllowedPathsLead(t *testing.T) {
	t.Parallel()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(root+"/real/proj", 0o755)
	os.Mkdir(root+"/outside", 0o755)
	os.Symlink(root+"/real", root+"/srv")
	proj := root + "/srv/proj"
	os.Symlink(root+"/outside", proj+"/lnk")
	os.Symlink(root+"/outside/new", proj+"/dangling")
	policy := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\nagent: \"allowed-tools\": [\"Write(./**)\"]\n")
	for _, tc := range []struct{ path, decision, reason string }{
		{proj + "/ok.txt", "allow", ""},
		{proj + "/lnk/x", "deny", `leads through a symbolic link to "` + root + `/outside/x"`},
		{proj + "/dangling", "deny", `leads through a symbolic link to "` + root + `/outside/new"`},
	} {
		in, _ := json.Marshal(map[string]any{"cwd": proj, "tool_name": "Write", "tool_input": map[string]any{"file_path": tc.path, "content": "x"}})
		h := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", policy, "--cache", "off")
		h.Stdin = strings.NewReader(string(in))
		out, err := h.Output()
		var ans struct {
			Out struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
		}
		json.Unmarshal(out, &ans)
		if err != nil || ans.Out.PermissionDecision != tc.decision || !strings.Contains(ans.Out.PermissionDecisionReason, tc.reason) {
			t.Errorf("Write %s: %v %s, want %s %q", tc.path, err, out, tc.decision, tc.reason)
		}
	}
}
