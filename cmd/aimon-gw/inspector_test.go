package main

import (
	"os/exec"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/need"
)

// inspector finds the MCP Inspector CLI that .ci/run installs (npm ci in
// .ci/npm, pinned to 0.15.0, which runs on Node 20). Without it the test
// skips, except under CI, where it must be there.
func inspector(t *testing.T) string {
	t.Helper()
	return need.File(t, "the MCP Inspector CLI", "../../.ci/npm/node_modules/.bin/mcp-inspector", "run npm ci in .ci/npm (.ci/run does)")
}

// TestMCPInspectorCLI drives aimon-gw mcp with the MCP Inspector's CLI, a
// client the gateway's code had no part in (issue 16).
func TestMCPInspectorCLI(t *testing.T) {
	t.Parallel()
	bin := inspector(t)
	dir := moduleDir(t, mcpPolicy)
	gw := gatewayBinary(t)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--cli", gw, "mcp", "--policy", dir, "--workdir", dir, "--surface", "agent,subagent:reviewer"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("--method", "tools/list")
	if err != nil || !strings.Contains(out, `"name": "Read"`) || strings.Contains(out, `"name": "Bash"`) || !strings.Contains(out, `"readOnlyHint": true`) {
		t.Errorf("tools/list: %v\n%s", err, out)
	}
	out, err = run("--method", "tools/call", "--tool-name", "Echo", "--tool-arg", "message=hello")
	if err != nil || !strings.Contains(out, "hello") {
		t.Errorf("tools/call Echo: %v\n%s", err, out)
	}
	out, _ = run("--method", "tools/call", "--tool-name", "Bash", "--tool-arg", "command=true")
	if !strings.Contains(out, "is not allowed on this surface") || !strings.Contains(out, `"isError": true`) {
		t.Errorf("tools/call Bash on the reviewer: %s", out)
	}
}
