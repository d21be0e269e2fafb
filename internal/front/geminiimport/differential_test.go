package geminiimport

import (
	"encoding/json"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/geminihook"
	"aimon.dev/gw/internal/front/importkit"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
)

// gemini is Gemini CLI 0.61's policy engine as it reads the rules, the
// reference of the import differential: the rules by priority, the first
// that matches deciding (toolName with its wildcards, and the regular
// expression Gemini builds of commandPrefix, commandRegex and
// argsPattern, tried on the arguments as stable JSON), and a call no rule
// matches asked. Rules bound to a mode are not in the corpus.
func gemini(rules []rule, tool string, args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(args[k])
		parts = append(parts, string(kb)+":"+string(vb))
	}
	stable := "{" + strings.Join(parts, ",") + "}"
	for _, r := range rules {
		if !r.everywhere || !toolMatches(r.tool, tool) {
			continue
		}
		pattern := r.regex
		switch {
		case r.prefix != nil:
			enc, _ := json.Marshal(*r.prefix)
			pattern = regexp.QuoteMeta(`"command":`+string(enc[:len(enc)-1])) + `(?:[\s"]|\\")`
		}
		if pattern != "" && !regexp.MustCompile(pattern).MatchString(stable) {
			continue
		}
		return r.decision
	}
	return "ask_user"
}

func toolMatches(pattern, tool string) bool {
	switch {
	case pattern == "*", pattern == tool:
		return true
	case pattern == "mcp_*":
		return strings.HasPrefix(tool, "mcp_")
	case strings.HasPrefix(pattern, "mcp_*_"):
		_, t, ok := splitMCP(tool)
		return ok && t == strings.TrimPrefix(pattern, "mcp_*_")
	case strings.HasSuffix(pattern, "_*") && strings.HasPrefix(pattern, "mcp_"):
		return strings.HasPrefix(tool, strings.TrimSuffix(pattern, "*"))
	}
	return false
}

// TestP14GeminiImportIsNeverLooser is the import differential: for the
// cases of testdata and a corpus of calls, the hook under the imported
// policy (with --lossy, each rule it could not keep made stricter) never
// answers more permissively than Gemini CLI's own reading of the same
// rules: no allow where Gemini asks or denies, no ask where it denies.
func TestP14GeminiImportIsNeverLooser(t *testing.T) {
	project := "/srv/project"
	sh := func(c string) map[string]any { return map[string]any{"command": c} }
	calls := []struct {
		tool string
		args map[string]any
	}{
		{Shell, sh("touch a")}, {Shell, sh("git status")}, {Shell, sh("git status -s")}, {Shell, sh("git push")},
		{Shell, sh("git push --dry-run")}, {Shell, sh("git push --force")}, {Shell, sh("git pushx")}, {Shell, sh("git")},
		{Shell, sh("rm -rf x")}, {Shell, sh("rm")}, {Shell, sh("mkdir d")}, {Shell, sh("ls")}, {Shell, sh("ls -la")},
		{Shell, sh("make all")}, {Shell, sh("npm test")}, {Shell, sh("cat  x")}, {Shell, sh("cat x")}, {Shell, sh("echo hi")},
		{Shell, sh("git commit -m x")},
		{"write_file", map[string]any{"file_path": project + "/a.env", "content": "x"}},
		{"write_file", map[string]any{"file_path": project + "/b.txt", "content": "x"}},
		{"read_file", map[string]any{"file_path": project + "/b.txt"}},
		{"replace", map[string]any{"file_path": project + "/b.txt", "old_string": "a", "new_string": "b", "instruction": "secret"}},
		{"replace", map[string]any{"file_path": project + "/b.txt", "old_string": "a", "new_string": "b"}},
		{"glob", map[string]any{"pattern": "*"}},
		{"web_fetch", map[string]any{"prompt": "https://example.com"}},
		{"google_web_search", map[string]any{"query": "x"}},
		{"mcp_aimon_Echo", map[string]any{"message": "hi"}}, {"mcp_aimon_Bash", map[string]any{"command": "ls"}},
		{"mcp_github_get_issue", map[string]any{}}, {"mcp_github_create_issue", map[string]any{}},
		{"mcp_untrusted_read", map[string]any{}}, {"mcp_legacy_x", map[string]any{}}, {"mcp_other_search", map[string]any{}},
		{"save_memory", map[string]any{"fact": "x"}}, {"write_todos", map[string]any{}},
	}
	rank := map[string]int{"deny": 0, "ask": 1, "ask_user": 1, "allow": 2}
	cases.Each(t, func(t *testing.T, name string, files []string, im *importkit.Imported, gen *provision.Generation) {
		rules, set := readRules(t, files)
		for _, c := range calls {
			want := gemini(rules, c.tool, c.args)
			name := c.tool
			if srv, tool, ok := splitMCP(c.tool); ok {
				if s, ok := set.MCPServers[srv]; ok && (slices.Contains(s.ExcludeTools, tool) || len(s.IncludeTools) > 0 && !slices.ContainsFunc(s.IncludeTools, func(i string) bool { return i == tool || strings.HasPrefix(i, tool+"(") })) {
					want = "deny" // never offered
				}
				name = "mcp__" + srv + "__" + tool
			}
			in, _ := json.Marshal(c.args)
			got := geminihook.Answer(gen, cchook.Input{Cwd: project, HookEventName: "PreToolUse", ToolName: name, ToolInput: in},
				gateway.Options{Logger: slog.New(slog.DiscardHandler)}, nil)
			if rank[got.Decision] > rank[want] {
				t.Errorf("%s %v: the hook says %s (%s), Gemini CLI %s\n%s", c.tool, c.args, got.Decision, got.Reason, want, im.Source)
			}
		}
	})
}

// readRules are the rules of the files as Gemini orders them.
func readRules(t *testing.T, files []string) ([]rule, settings) {
	var rules []rule
	var set settings
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.HasSuffix(f, ".json") {
			json.Unmarshal(data, &set)
			continue
		}
		rs, err := parse(f, data, userTier)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, rs...)
	}
	rules = append(rules, settingsRules(&importkit.Builder{}, set, "settings.json")...)
	for _, tool := range readOnly {
		rules = append(rules, rule{tool: tool, decision: "allow", priority: defaultTier + 0.05, everywhere: true})
	}
	slices.SortStableFunc(rules, func(a, b rule) int {
		switch {
		case a.priority > b.priority:
			return -1
		case a.priority < b.priority:
			return 1
		}
		return 0
	})
	return rules, set
}
