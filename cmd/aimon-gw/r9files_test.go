package main

import (
	"os"
	"os/exec"
	"strconv"
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

// TestR9ShellStartUpFilesAreGateFiles: under a policy whose commands and
// Write may write the home, a command cannot define a shell function of
// the gateway's own path (which Claude Code's snapshot of the user's
// shell, Codex's bash -lc and a login bash would run in the gateway's
// place for every command the hook rewrites): ~/.bashrc and ~/.profile,
// which exist, are read-only in the sandbox; ~/.bash_profile,
// ~/.bash_login, ~/.bash_aliases, ~/.zshrc and ~/.zshenv, absent, are made
// first, reading as before (a login bash still reads ~/.profile); serve's
// Write of each is refused, naming R9. The command's write beside them
// lands. As root and as nobody (rule R9; the hostile probe's V5).
func TestR9ShellStartUpFilesAreGateFiles(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		fn := bin + "() { touch " + os.TempDir() + "/aimon-gw-v5-ran; }"
		for _, runtime := range []string{"claude-code", "codex"} {
			_, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
			for f, content := range map[string]string{"/.bashrc": "# the user's\n", "/.profile": "export FROM_PROFILE=yes\n"} {
				os.WriteFile(home+f, []byte(content), 0o644)
				if u.uid >= 0 {
					os.Chown(home+f, u.uid, u.gid)
				}
			}
			files := []string{home + "/.bashrc", home + "/.profile", home + "/.bash_profile", home + "/.bash_login", home + "/.bash_aliases", home + "/.zshrc", home + "/.zshenv"}
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj)
			var plant strings.Builder
			for _, f := range files {
				plant.WriteString("echo " + shellQuote(fn) + " >> " + f + "; ")
			}
			line := gateHook(t, gw, runtime, policy, proj, proj, env, plant.String()+"echo ok > "+proj+"/ok")
			out, _ := runAs(t, u, proj, line)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil || strings.Contains(string(b), "aimon-gw-v5-ran") {
					t.Errorf("%s: a command defined a function of the gateway's path in %s (%v):\n%s\n%s", runtime, f, err, b, out)
				}
			}
			if _, err := os.Stat(proj + "/ok"); err != nil {
				t.Errorf("%s: the command's write beside them did not land, so the test shows nothing:\n%s", runtime, out)
			}
			c := exec.Command("bash", "-lc", `echo "$FROM_PROFILE"`)
			c.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
			if b, err := c.Output(); err != nil || !strings.HasSuffix(string(b), "yes\n") {
				t.Errorf("%s: a login bash no longer reads ~/.profile once the absent files are made: %v %q", runtime, err, b)
			}
		}

		_, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
		os.WriteFile(policy+"/policy.cue", []byte(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash}
agent: "allowed-tools": ["Bash", "Write(`+home+`/**)", "Write(`+proj+`/**)"]
`), 0o644)
		files := []string{home + "/.bashrc", home + "/.bash_profile", home + "/.profile", home + "/.zshrc"}
		var lines []string
		for i, f := range files {
			lines = append(lines, toolLine(strconv.Itoa(i), "Write", map[string]any{"file_path": f, "content": fn}))
		}
		replies := runServeAs(t, gw, []string{"--policy", policy, "--workdir", proj}, []string{"HOME=" + home}, lines...)
		for i, f := range files {
			b, _ := os.ReadFile(f)
			if r := replies[i]; r["is_error"] != true || !strings.Contains(text(r), "rule R9") || strings.Contains(string(b), "aimon-gw-v5-ran") {
				t.Errorf("serve's Write of %s: %v", f, r)
			}
		}
	})
}
