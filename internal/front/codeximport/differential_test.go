package codeximport

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/codexhook"
	"aimon.dev/gw/internal/front/importkit"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
)

// codex is Codex's execpolicy as it reads the rules, the reference of the
// import differential: the command's words (shlex) matched against every
// prefix rule of its program (or of the name a host_executable path has,
// and, for prompt and forbidden, of the path's basename), the strictest
// decision of those that match winning; a command no rule matches is
// left to Codex's own judgment, which may run it (allow).
func codex(p policy, command string) string {
	words, ok := allow.Words(command)
	if !ok || len(words) == 0 || strings.ContainsAny(command, ";|&`$><()\n") {
		return "allow" // Codex's judgment of a script; the hook refuses it
	}
	best := -1
	rank := map[string]int{"allow": 0, "prompt": 1, "forbidden": 2}
	try := func(cmd []string, only func(string) bool) {
		for _, r := range p.rules {
			if r.matches(cmd) && only(r.decision) && rank[r.decision] > best {
				best = rank[r.decision]
			}
		}
	}
	try(words, func(string) bool { return true })
	if best < 0 && filepath.IsAbs(words[0]) {
		base := append([]string{filepath.Base(words[0])}, words[1:]...)
		listed := slices.Contains(p.hosts[base[0]], words[0])
		try(base, func(d string) bool { return listed || d != "allow" })
	}
	if best < 0 {
		return "allow"
	}
	return [...]string{"allow", "prompt", "forbidden"}[best]
}

// TestP14CodexImportIsNeverLooser is the import differential: for the
// cases of testdata and a corpus of commands and MCP calls, the hook
// under the imported policy (with --lossy) never allows what Codex's own
// rules prompt for or forbid, nor an MCP tool Codex does not offer.
func TestP14CodexImportIsNeverLooser(t *testing.T) {
	project := "/srv/project"
	commands := []string{"touch a", "touch", "/usr/bin/touch a", "/bin/touch a", "/opt/touch a", "git status", "git status --porcelain",
		"git status --porcelain=v2", "git diff HEAD", "git push origin", "git fetch", "git pushx", "mkdir d", "rm -rf x", "/bin/rm x",
		"rmdir x", "echo a b", "echo 'a b'", "ls", "ls -la", "bash -c 'rm -rf /'", "curl x", "env rm x", "touch a; rm b", "cp a b"}
	mcps := map[string]bool{ // whether Codex offers and calls it
		"mcp__aimon__Echo": true, "mcp__aimon__Bash": false, "mcp__github__get_issue": true,
		"mcp__github__create_issue": false, "mcp__github__list": false, "mcp__old__x": false,
	}
	cases.Each(t, func(t *testing.T, name string, files []string, im *importkit.Imported, gen *provision.Generation) {
		p := policy{hosts: map[string][]string{}}
		for _, f := range files {
			if data, _ := os.ReadFile(f); strings.HasSuffix(f, ".rules") {
				p.parse(f, data)
			}
		}
		decide := func(tool string, in any) string {
			b, _ := json.Marshal(in)
			out := codexhook.Answer(gen, cchook.Input{Cwd: project, HookEventName: "PreToolUse", ToolName: tool, ToolInput: b},
				gateway.Options{Logger: slog.New(slog.DiscardHandler)}, nil)
			if out.HookSpecificOutput == nil || out.HookSpecificOutput.PermissionDecision == "allow" {
				return "allow"
			}
			return "deny: " + out.HookSpecificOutput.PermissionDecisionReason
		}
		for _, c := range commands {
			if got, want := decide(Shell, map[string]any{"command": c}), codex(p, c); got == "allow" && want != "allow" {
				t.Errorf("%q: the hook allows it, Codex's rules say %s\n%s", c, want, im.Source)
			}
		}
		for tool, offered := range mcps {
			// Only the basic case's config.toml has MCP servers.
			if got := decide(tool, map[string]any{}); got == "allow" && !(offered && name == "basic") {
				t.Errorf("%s: the hook allows it, Codex does not offer it\n%s", tool, im.Source)
			}
		}
	})
}
