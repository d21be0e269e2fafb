package cchook

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
)

// TestP14ImportIsNeverLooser is the import differential: for a corpus of
// settings files and calls, the hook under the imported policy never
// answers more permissively than Claude Code's documented evaluation of
// the same settings (deny, then ask, then allow, then the mode), with
// Read rules governing Grep and Glob and Edit rules every editing tool.
func TestP14ImportIsNeverLooser(t *testing.T) {
	project, _ := filepath.EvalSymlinks(t.TempDir())
	home := "/home/dev"
	t.Setenv("HOME", home)
	settings := []string{
		`{"permissions":{"allow":["Bash(git push:*)","Read","Grep","Glob"],"ask":["Bash(git push:*)"],"deny":["Read(./.env)"]}}`,
		`{"permissions":{"allow":["Bash(git:*)","Bash(npm *)","Edit(/src/**)","Read(src/**)","WebFetch(domain:example.com)","mcp__github"],"deny":["Bash(git push*)","Edit(/src/secret/**)"],"ask":["mcp__github"]}}`,
		`{"permissions":{"allow":["Read","Task(Explore)","Bash(make test)"],"deny":["Agent(general-purpose)","Bash(rm *)"],"additionalDirectories":["../docs/"],"defaultMode":"acceptEdits"}}`,
		`{"permissions":{"allow":["Bash","Write","Edit"],"defaultMode":"plan"}}`,
		`{"permissions":{"allow":["Bash(git * main)","Read(~/notes/**)"],"ask":["Bash(git*)"],"deny":["WebSearch(x)","Read(//etc/**)"],"defaultMode":"dontAsk"}}`,
		`{"permissions":{"allow":["Read(//**)","Grep","Glob"],"deny":["Edit","Read(~/.ssh/**)"],"defaultMode":"bypassPermissions"}}`,
	}
	calls := []struct{ tool, input string }{
		{"Bash", `{"command":"git push origin main"}`},
		{"Bash", `{"command":"git status"}`},
		{"Bash", `{"command":"git pushx"}`},
		{"Bash", `{"command":"git checkout main"}`},
		{"Bash", `{"command":"npm test"}`},
		{"Bash", `{"command":"make test"}`},
		{"Bash", `{"command":"rm -rf /"}`},
		{"Bash", `{"command":"git status && curl x | sh"}`},
		{"Read", `{"file_path":"` + project + `/.env"}`},
		{"Read", `{"file_path":".env"}`},
		{"Grep", `{"pattern":"KEY","path":".env"}`},
		{"Glob", `{"pattern":"*","path":".env"}`},
		{"Read", `{"file_path":"` + project + `/src/a.go"}`},
		{"Read", `{"file_path":"/etc/passwd"}`},
		{"Read", `{"file_path":"` + home + `/.ssh/id_rsa"}`},
		{"Read", `{"file_path":"` + home + `/notes/a.md"}`},
		{"Read", `{"file_path":"` + filepath.Dir(project) + `/docs/a.md"}`},
		{"Edit", `{"file_path":"` + project + `/src/a.go","old_string":"a","new_string":"b"}`},
		{"Write", `{"file_path":"` + project + `/src/secret/k","content":"x"}`},
		{"Write", `{"file_path":"` + project + `/src/b.go","content":"x"}`},
		{"MultiEdit", `{"file_path":"` + project + `/src/secret/k","edits":[{"old_string":"a","new_string":"b"}]}`},
		{"WebFetch", `{"url":"https://example.com/x","prompt":"p"}`},
		{"WebSearch", `{"query":"x"}`},
		{"mcp__github__create_issue", `{}`},
		{"Task", `{"description":"d","prompt":"p","subagent_type":"Explore"}`},
		{"Agent", `{"description":"d","prompt":"p","subagent_type":"general-purpose"}`},
	}
	rank := map[string]int{"deny": 0, "ask": 1, "allow": 2}
	for i, raw := range settings {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			im, err := Import([]byte(raw), "settings.json", project, home)
			if err != nil {
				t.Fatal(err)
			}
			gen := loadSource(t, im.Source, project)
			var s Settings
			json.Unmarshal([]byte(raw), &s)
			for _, c := range calls {
				want := claudeCode(s, c.tool, c.input, project, home)
				out := Decide(gen, Input{Cwd: project, ToolName: c.tool, ToolInput: json.RawMessage(c.input)}, gateway.Options{})
				got := out.HookSpecificOutput.PermissionDecision
				if rank[got] > rank[want] {
					t.Errorf("%s %s: the hook says %s (%s), Claude Code %s\n%s", c.tool, c.input, got, out.HookSpecificOutput.PermissionDecisionReason, want, im.Source)
				}
			}
		})
	}
}

// loadSource loads a policy of one file, src, in a module of its own.
func loadSource(t *testing.T, src, wd string) *provision.Generation {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755)
	os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644)
	h := pluginhost.New(slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	gen, err := reload.Load(context.Background(), reload.Registry(h, &provision.Upstreams{}), dir, wd, 0)
	if err != nil {
		t.Fatalf("the policy does not load: %v\n%s", err, src)
	}
	return gen
}

// claudeCode is Claude Code's documented evaluation of its permission
// rules, the reference of the import differential: deny, then ask, then
// allow, the first list with a matching rule deciding; otherwise the mode.
func claudeCode(s Settings, tool, input, cwd, home string) string {
	var in map[string]any
	json.Unmarshal([]byte(input), &in)
	p := s.Permissions
	for _, list := range []struct {
		rules  []string
		answer string
	}{{p.Deny, "deny"}, {p.Ask, "ask"}, {p.Allow, "allow"}} {
		for _, r := range list.rules {
			if ccMatches(r, list.answer == "allow", tool, in, cwd, home) {
				return list.answer
			}
		}
	}
	if tool == "Read" || tool == "Grep" || tool == "Glob" {
		for _, d := range p.AdditionalDirectories {
			if ccMatches("Read("+filepath.Join(cwd, d)+"/**)", true, tool, in, cwd, home) {
				return "allow"
			}
		}
	}
	switch p.DefaultMode {
	case "bypassPermissions":
		return "allow"
	case "dontAsk":
		return "deny"
	}
	return "ask"
}

var shellOps = regexp.MustCompile(`&&|\|\||[;|&\n]`)

// ccMatches reports whether a Claude Code rule matches a call. A Bash rule
// is checked on each command of a compound one: an allow needs all of
// them to match, a deny or an ask any.
func ccMatches(rule string, isAllow bool, tool string, in map[string]any, cwd, home string) bool {
	name, rest, paren := strings.Cut(rule, "(")
	names := family[name]
	if names == nil {
		names = []string{name}
	}
	if strings.HasPrefix(name, "mcp__") {
		return tool == name || strings.HasPrefix(tool, name+"__")
	}
	if !contains(names, tool) {
		return false
	}
	if !paren {
		return true
	}
	pattern := strings.TrimSuffix(rest, ")")
	str := func(k string) string { s, _ := in[k].(string); return s }
	switch {
	case tool == "Bash":
		parts := shellOps.Split(str("command"), -1)
		n := 0
		for _, c := range parts {
			if bashMatches(pattern, strings.TrimSpace(c)) {
				n++
			}
		}
		if isAllow {
			return n == len(parts)
		}
		return n > 0
	case tool == "WebFetch":
		u, err := url.Parse(str("url"))
		return err == nil && "domain:"+u.Hostname() == pattern
	case tool == "Task" || tool == "Agent":
		return str("subagent_type") == pattern
	case contains(pathTools, tool):
		f := str("file_path") + str("path") + str("notebook_path")
		if f == "" {
			f = "."
		}
		if !strings.HasPrefix(f, "/") {
			f = filepath.Join(cwd, f)
		}
		switch {
		case strings.HasPrefix(pattern, "//"):
			pattern = pattern[1:]
		case strings.HasPrefix(pattern, "~/"):
			pattern = filepath.Join(home, pattern[2:])
		case strings.HasPrefix(pattern, "/"):
			pattern = filepath.Join(cwd, pattern)
		default:
			pattern = filepath.Join(cwd, pattern)
		}
		ok, _ := doublestar.Match(pattern, filepath.Clean(f))
		return ok
	}
	return false // a pattern on a tool without a subject matches nothing
}

func bashMatches(pattern, cmd string) bool {
	switch {
	case strings.HasSuffix(pattern, ":*"), strings.HasSuffix(pattern, " *") && strings.Count(pattern, "*") == 1:
		x := strings.TrimSuffix(strings.TrimSuffix(pattern, ":*"), " *")
		return cmd == x || strings.HasPrefix(cmd, x+" ")
	case strings.Contains(pattern, "*"):
		re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
		ok, _ := regexp.MatchString(re, cmd)
		return ok
	}
	return cmd == pattern
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
