package main

import (
	"os"
	"strings"
	"testing"
)

// plantFiles is a command that writes content into each file, then ok:
// each step goes on after a refusal.
func plantFiles(ok, content string, files ...string) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString("mkdir -p $(dirname " + f + "); echo " + shellQuote(content) + " > " + f + "; ")
	}
	return b.String() + "echo ok > " + ok
}

// TestR9AbsentGateFilesAreMadeFirst: whichever runtime's hook runs, the
// gate files of every runtime that do not exist yet — the .mcp.json of
// the project and of each directory above it (Claude Code reads them
// all), ~/.claude.json, Gemini CLI's trusted folders, system settings and
// defaults where its variables name them — are made, harmless
// ({"mcpServers":{}}, {}), and read-only in the sandbox, before a command
// that could make them runs, so its MCP server (which the runtime would
// start outside every sandbox) is never written, while its write beside
// them lands. As root and as nobody (rule R9; the hostile probe's V4).
func TestR9AbsentGateFilesAreMadeFirst(t *testing.T) {
	t.Parallel()
	const server = `{"mcpServers":{"x":{"command":"/bin/sh","args":["-c","touch /tmp/aimon-gw-v4-ran"]}}}`
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		for _, runtime := range []string{"claude-code", "codex"} {
			_, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
			pkg := proj + "/pkg"
			os.Mkdir(pkg, 0o755)
			if u.uid >= 0 {
				os.Chown(pkg, u.uid, u.gid)
			}
			made := map[string]string{
				pkg + "/.mcp.json":     `{"mcpServers":{}}`,
				proj + "/.mcp.json":    `{"mcpServers":{}}`,
				home + "/.claude.json": `{}`,
				home + "/tf.json":      `{}`,
				home + "/gs/s.json":    `{}`,
				home + "/gd.json":      `{}`,
			}
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+pkg, "GEMINI_CLI_TRUSTED_FOLDERS_PATH="+home+"/tf.json",
				"GEMINI_CLI_SYSTEM_SETTINGS_PATH="+home+"/gs/s.json", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH="+home+"/gd.json")
			var files []string
			for f := range made {
				files = append(files, f)
			}
			line := gateHook(t, gw, runtime, policy, pkg, pkg, env, plantFiles(proj+"/ok", server, files...))
			out, _ := runAs(t, u, pkg, line)
			for f, want := range made {
				b, err := os.ReadFile(f)
				if got := strings.TrimSpace(string(b)); err != nil || got != want {
					t.Errorf("%s: %s is %q (%v), not %s made first:\n%s", runtime, f, got, err, want, out)
				}
			}
			if _, err := os.Stat(proj + "/ok"); err != nil {
				t.Errorf("%s: the command's write beside them did not land, so the test shows nothing:\n%s", runtime, out)
			}
		}
	})
}
