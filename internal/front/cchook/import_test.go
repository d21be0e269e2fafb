package cchook

import (
	"cmp"
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
	"aimon.dev/gw/internal/testkit/policydir"
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
				out := Answer(Runtime, gen, Input{Cwd: project, ToolName: c.tool, ToolInput: json.RawMessage(c.input)}, gateway.Options{}, nil)
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
	dir := policydir.Write(t, map[string]string{"policy.cue": src})
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
	path := func() string {
		f, _ := in["file_path"].(string)
		if f == "" {
			f, _ = in["path"].(string)
		}
		if f == "" {
			f, _ = in["notebook_path"].(string)
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(cwd, f)
		}
		return filepath.Clean(f)
	}
	// Its working directories: the project, and the additional ones.
	wds := []string{cwd}
	for _, d := range p.AdditionalDirectories {
		switch {
		case strings.HasPrefix(d, "~/"):
			d = filepath.Join(home, d[2:])
		case !filepath.IsAbs(d):
			d = filepath.Join(cwd, d)
		}
		wds = append(wds, filepath.Clean(d))
	}
	within := func(f string, dirs ...string) bool {
		for _, d := range dirs {
			if f == d || strings.HasPrefix(f, d+"/") {
				return true
			}
		}
		return false
	}
	edits := contains(family["Edit"], tool)
	guarded := false // a write into a protected directory, always asked
	for _, d := range wds {
		guarded = guarded || edits && within(path(), filepath.Join(d, ".git"), filepath.Join(d, ".vscode"), filepath.Join(d, ".idea"))
	}
	for _, list := range []struct {
		rules  []string
		answer string
	}{{p.Deny, "deny"}, {p.Ask, "ask"}, {p.Allow, "allow"}} {
		for _, r := range list.rules {
			if ccMatches(r, list.answer == "allow", tool, in, cwd, home) {
				if list.answer == "allow" && guarded {
					return "ask"
				}
				return list.answer
			}
		}
	}
	// What the mode runs without asking (checked with the real CLI).
	cmd, _ := in["command"].(string)
	simple := !shellOps.MatchString(cmd) && !strings.ContainsAny(cmd, "<>$`()")
	word, _, _ := strings.Cut(cmd, " ")
	switch {
	case tool == "Bash" && simple && (word == "echo" || cmd == "pwd"):
		return "allow"
	case (tool == "Read" || tool == "Grep" || tool == "Glob") && (p.DefaultMode == "plan" || within(path(), wds...)):
		return "allow"
	case p.DefaultMode == "acceptEdits" && edits && within(path(), wds...) && !guarded:
		return "allow"
	case p.DefaultMode == "acceptEdits" && tool == "Bash" && simple && contains([]string{"touch", "mkdir", "rm", "rmdir", "mv"}, word):
		return "allow"
	case p.DefaultMode == "dontAsk":
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

// TestP14ImportKeepsEveryRule: the faults the real Claude Code found in
// the import (issue 42) each hold, decided by the hook under the imported
// policy: deny-only and mode-only settings keep what Claude Code runs
// without asking (its project-wide reads, acceptEdits' edits), an allow
// list of an MCP server leaves tools, mcp__db__* beside mcp__db denies the
// server's tools, additional directories absolute, relative and under ~
// are read where Claude Code reads them, a /path rule holds under the
// project with the hook's cwd in a subdirectory, ~ is the home of the user
// the hook runs for, bypassPermissions holds from the user's own settings
// only, and a rule of a tool the policy cannot name is kept by
// unknownTools or makes the import lossy.
func TestP14ImportKeepsEveryRule(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	project, hookHome := filepath.Join(root, "proj"), filepath.Join(root, "hookuser")
	os.MkdirAll(filepath.Join(project, "sub"), 0o755)
	os.MkdirAll(filepath.Join(project, ".git"), 0o755) // a protected directory that exists is asked for
	t.Setenv("HOME", hookHome)                         // the hook's user, not the importer's
	type call struct{ tool, input, want string }
	read := func(p string) string { return `{"file_path":"` + p + `"}` }
	write := func(p string) string { return `{"file_path":"` + p + `","content":"x"}` }
	bash := func(c string) string { return `{"command":"` + c + `"}` }
	for _, c := range []struct {
		note, settings, file string
		cwd                  string
		lossy                string
		calls                []call
	}{
		{note: "deny-only", settings: `{"permissions":{"deny":["Bash(rm:*)","Read(./.env)"]}}`, calls: []call{
			{"Read", read(project + "/a.go"), "allow"}, {"Bash", bash("echo hi"), "allow"}, {"Bash", bash("rm a.go"), "deny"},
			{"Read", read(project + "/.env"), "deny"}, {"Write", write(project + "/a.go"), "deny"}, {"Read", read("/etc/hosts"), "deny"}}},
		{note: "mode-only acceptEdits", settings: `{"permissions":{"defaultMode":"acceptEdits"}}`, calls: []call{
			{"Write", write(project + "/w.txt"), "allow"}, {"Edit", `{"file_path":"` + project + `/a.go","old_string":"a","new_string":"b"}`, "allow"},
			{"Write", write(project + "/.git/config"), "ask"}, {"Write", write(root + "/outside.txt"), "deny"},
			{"Bash", bash("touch t.txt"), "allow"}, {"Bash", bash("mkdir d"), "allow"}, {"Bash", bash("sed -i s/a/b/ a.go"), "deny"}}},
		{note: "mode-only plan", settings: `{"permissions":{"defaultMode":"plan"}}`, calls: []call{
			{"Read", read("/etc/hosts"), "allow"}, {"Write", write(project + "/w.txt"), "deny"}, {"Bash", bash("touch t"), "deny"}, {"Bash", bash("echo hi"), "allow"}}},
		{note: "plan edits nothing, and runs commands as the rules say", settings: `{"permissions":{"defaultMode":"plan","allow":["Edit(/docs/**)","Bash(touch:*)"]}}`, calls: []call{
			{"Write", write(project + "/docs/a.md"), "deny"}, {"Bash", bash("touch t"), "allow"}}},
		{note: "an allow list of an MCP server", settings: `{"permissions":{"allow":["mcp__github"]}}`, calls: []call{
			{"mcp__github__create_issue", `{}`, "allow"}, {"Read", read(project + "/a.go"), "allow"}, {"Bash", bash("ls"), "deny"}}},
		{note: "mcp__db__* denies beside mcp__db", settings: `{"permissions":{"allow":["mcp__db"],"deny":["mcp__db__*"]}}`, calls: []call{
			{"mcp__db__drop_table", `{}`, "deny"}, {"mcp__db__query", `{}`, "deny"}}},
		{note: "mcp__db__* allows", settings: `{"permissions":{"allow":["mcp__db__*"],"ask":["mcp__db__drop_table"]}}`, calls: []call{
			{"mcp__db__query", `{}`, "allow"}, {"mcp__db__drop_table", `{}`, "ask"}}},
		{note: "additional directories", settings: `{"permissions":{"additionalDirectories":["` + root + `/abs/", "../rel", "~/notes"]}}`, calls: []call{
			{"Read", read(root + "/abs/a"), "allow"}, {"Read", read(root + "/rel/a"), "allow"}, {"Read", read(hookHome + "/notes/a"), "allow"},
			{"Read", read(root + "/other/a"), "deny"}}},
		{note: "a /path rule with the cwd in a subdirectory", cwd: project + "/sub",
			settings: `{"permissions":{"allow":["Edit(/docs/**)"],"deny":["Read(/secret/**)"]}}`, calls: []call{
				{"Write", write(project + "/docs/a.md"), "allow"}, {"Write", write(project + "/sub/docs/a.md"), "deny"},
				{"Read", read(project + "/secret/k"), "deny"}, {"Read", read("../secret/k"), "deny"}, {"Read", read(project + "/a.go"), "allow"}}},
		{note: "~ is the hook user's home", settings: `{"permissions":{"allow":["Read(~/notes/**)"],"deny":["Read(~/.ssh/**)"]}}`, calls: []call{
			{"Read", read(hookHome + "/notes/a"), "allow"}, {"Read", read(hookHome + "/.ssh/id_rsa"), "deny"}, {"Read", read("/home/importer/notes/a"), "deny"}}},
		{note: "bypassPermissions in a project's settings is the default mode", settings: `{"permissions":{"defaultMode":"bypassPermissions"}}`, calls: []call{
			{"Write", write(project + "/w.txt"), "deny"}, {"Read", read(project + "/a.go"), "allow"}}},
		{note: "bypassPermissions in the user's settings", file: "/home/importer/.claude/settings.json",
			settings: `{"permissions":{"defaultMode":"bypassPermissions","deny":["Bash(rm:*)"]}}`, calls: []call{
				{"Write", write(root + "/anywhere.txt"), "allow"}, {"Bash", bash("ls"), "allow"}, {"Bash", bash("rm x"), "deny"},
				{"Write", write(project + "/.git/config"), "ask"}}},
		{note: "a name-only allow is not narrowed by the mode's entries", settings: `{"permissions":{"allow":["Read","Bash","Read(src/**)"],"defaultMode":"acceptEdits"}}`, calls: []call{
			{"Read", read("/etc/hosts"), "allow"}, {"Bash", bash("ls /"), "allow"}, {"Write", write(project + "/w"), "allow"}}},
		{note: "an ask of a tool the policy cannot name", settings: `{"permissions":{"ask":["KillShell"]}}`, calls: []call{
			{"KillShell", `{"shell_id":"1"}`, "ask"}}},
		{note: "a deny of a tool the policy cannot name", settings: `{"permissions":{"deny":["KillShell"]}}`,
			lossy: `deny rule "KillShell": KillShell is not a tool claudecode.#Tools declares; it is left to claudeCode: unknownTools, set to "deny"`,
			calls: []call{{"KillShell", `{"shell_id":"1"}`, "deny"}, {"mcp__x__y", `{}`, "deny"}}},
	} {
		t.Run(c.note, func(t *testing.T) {
			file := cmp.Or(c.file, filepath.Join(project, ".claude", "settings.json"))
			im, err := Import([]byte(c.settings), file, project, "/home/importer")
			if err != nil {
				t.Fatal(err)
			}
			if lossy := strings.Join(im.Lossy, "\n"); c.lossy == "" && lossy != "" || !strings.Contains(lossy, c.lossy) {
				t.Errorf("lossy: %q, want %q", lossy, c.lossy)
			}
			if strings.Contains(im.Source, "/home/importer") {
				t.Errorf("the policy names the importer's home:\n%s", im.Source)
			}
			cwd := cmp.Or(c.cwd, project)
			gen := loadSource(t, im.Source, cwd)
			for _, k := range c.calls {
				out := Answer(Runtime, gen, Input{Cwd: cwd, Project: project, ToolName: k.tool, ToolInput: json.RawMessage(k.input)}, gateway.Options{}, nil)
				if got := out.HookSpecificOutput.PermissionDecision; got != k.want {
					t.Errorf("%s %s: %s (%s), want %s\n%s", k.tool, k.input, got, out.HookSpecificOutput.PermissionDecisionReason, k.want, im.Source)
				}
			}
		})
	}
}
