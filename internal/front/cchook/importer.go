package cchook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Settings is the part of a Claude Code settings file the importer reads.
type Settings struct {
	Permissions struct {
		Allow                 []string `json:"allow"`
		Deny                  []string `json:"deny"`
		Ask                   []string `json:"ask"`
		AdditionalDirectories []string `json:"additionalDirectories"`
		DefaultMode           string   `json:"defaultMode"`
	} `json:"permissions"`
}

// An Imported policy is the CUE source of a policy, the notes on what was
// translated, one sentence each, and the rules it could not express
// exactly (Lossy), each then made stricter, never looser.
type Imported struct {
	Source string
	Notes  []string
	Lossy  []string
}

// kind is which of Claude Code's lists a rule is in.
type kind int

const (
	allowRule kind = iota
	askRule
	denyRule
)

func (k kind) String() string { return [...]string{"allow", "ask", "deny"}[k] }

// family is the tools a Claude Code rule of a tool applies to: Read rules
// also govern Grep and Glob, Edit rules every tool that edits files, and
// Task is the Agent tool's older name.
var family = map[string][]string{
	"Read":  {"Read", "Grep", "Glob"},
	"Edit":  {"Edit", "Write", "MultiEdit", "NotebookEdit"},
	"Task":  {"Task", "Agent"},
	"Agent": {"Agent", "Task"},
}

var pathTools = []string{"Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Grep", "Glob"}

// Import turns a Claude Code settings file's permissions into a policy that
// is never looser than Claude Code's own evaluation of them (deny, then
// ask, then allow): allow, ask and deny become the surface's
// allowed-tools, ask-tools and denied-tools, additionalDirectories become
// Read, Grep and Glob entries, and defaultMode a comment (plan mode a
// read-only ceiling, dontAsk a deny for unknown tools). A rule it cannot
// express exactly is made stricter (an allow dropped or narrowed, an ask or
// deny widened to the whole tool) and listed in Lossy. home is the user's
// home directory (for "~/path") and project the settings' project (for
// an additional directory that climbs out of it).
func Import(data []byte, file, project, home string) (*Imported, error) {
	var s Settings
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s is not a Claude Code settings file (JSON): %v", file, err)
	}
	im := &Imported{}
	note := func(format string, args ...any) string {
		n := fmt.Sprintf(format, args...)
		im.Notes = append(im.Notes, n)
		return n
	}
	type line struct{ entry, comment string }
	lists := map[kind][]line{}
	add := func(k kind, raw string) {
		entries, why, lossy := translate(k, raw, home)
		if lossy {
			im.Lossy = append(im.Lossy, fmt.Sprintf("%s rule %s: %s", k, strconv.Quote(raw), why))
		}
		for i, e := range entries {
			c := ""
			if i == 0 && why != "" {
				c = note("%s rule %s: %s", k, strconv.Quote(raw), why)
			}
			if !slices.ContainsFunc(lists[k], func(l line) bool { return l.entry == e }) {
				lists[k] = append(lists[k], line{e, c})
			}
		}
		if len(entries) == 0 {
			lists[k] = append(lists[k], line{"", note("%s rule %s is left out: %s", k, strconv.Quote(raw), why)})
		}
	}
	for _, r := range s.Permissions.Deny {
		add(denyRule, r)
	}
	for _, r := range s.Permissions.Ask {
		add(askRule, r)
	}
	for _, r := range s.Permissions.Allow {
		add(allowRule, r)
	}
	for _, d := range s.Permissions.AdditionalDirectories {
		p, why := importPath(strings.TrimSuffix(d, "/")+"/**", home)
		if strings.Contains(p, "..") {
			// A pattern holds no "..": the directory is fixed here.
			p = filepath.Join(project, strings.TrimPrefix(p, "./"))
			why = fmt.Sprintf("a directory relative to the project (%s), fixed here", project)
		}
		for i, t := range family["Read"] {
			c := ""
			if i == 0 {
				c = note("additional directory %s: Claude Code may read there; here Read, Grep and Glob may%s", strconv.Quote(d), suffix(why))
			}
			lists[allowRule] = append(lists[allowRule], line{t + "(" + p + ")", c})
		}
	}
	// An allow entry that a name-only deny covers whole never allows
	// anything: left out, as vet would report it.
	denied := map[string]bool{}
	for _, l := range lists[denyRule] {
		if l.entry != "" && !strings.Contains(l.entry, "(") {
			denied[l.entry] = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Imported from %s by aimon-gw import claude-code; review it, then vet it.\npackage policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\n", filepath.Base(file))
	mode, modeNote, ceiling, unknown := defaultMode(s.Permissions.DefaultMode)
	if modeNote != "" {
		fmt.Fprintf(&b, "\n// %s\n", note("defaultMode %q: %s", mode, modeNote))
	}
	for _, k := range []kind{allowRule, askRule, denyRule} {
		key := [...]string{"allowed-tools", "ask-tools", "denied-tools"}[k]
		if k != allowRule && len(lists[k]) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nagent: %q: [\n", key)
		for _, l := range lists[k] {
			name, _, _ := strings.Cut(l.entry, "(")
			switch {
			case l.entry == "":
				fmt.Fprintf(&b, "\t// %s\n", l.comment)
			case k == allowRule && denied[name]:
				fmt.Fprintf(&b, "\t// %s is left out: the deny list denies %s.\n", strconv.Quote(l.entry), name)
				note("%s is left out: the deny list denies %s.", strconv.Quote(l.entry), name)
			case l.comment != "":
				fmt.Fprintf(&b, "\t%s, // %s\n", strconv.Quote(l.entry), l.comment)
			default:
				fmt.Fprintf(&b, "\t%s,\n", strconv.Quote(l.entry))
			}
		}
		b.WriteString("]\n")
	}
	if ceiling != "" {
		fmt.Fprintf(&b, "agent: \"max-effect\": %q\n", ceiling)
	}
	fmt.Fprintf(&b, "\n// A tool this policy does not mention is %s.\nclaudeCode: unknownTools: %q\n",
		map[string]string{"ask": "left to Claude Code's own prompt", "deny": "refused"}[unknown], unknown)
	im.Source = b.String()
	return im, nil
}

func suffix(why string) string {
	if why == "" {
		return "."
	}
	return " (" + why + ")."
}

// defaultMode says what Claude Code's defaultMode means beside the lists:
// plan mode is a read-only ceiling, dontAsk refuses what no rule allows.
func defaultMode(mode string) (m, note, ceiling, unknown string) {
	unknown = "ask"
	switch mode {
	case "":
		return "", "", "", unknown
	case "default":
		note = "Claude Code asks before a tool's first use; here a call the lists do not allow is refused, and a tool the policy does not mention is asked."
	case "acceptEdits":
		note = "Claude Code accepts file edits without asking; here only the Edit, Write, MultiEdit and NotebookEdit entries allow edits."
	case "plan":
		note, ceiling = "Claude Code only plans and changes nothing; here the agent's max-effect is \"read\".", "read"
	case "dontAsk":
		note, unknown = "Claude Code refuses what its rules do not allow instead of asking; here a tool the policy does not mention is refused.", "deny"
	case "bypassPermissions":
		note = "Claude Code skips its prompts; here the lists still decide every call, and a tool the policy does not mention is asked."
	default:
		note = "this mode is not one aimon-gw knows; the lists decide every call."
	}
	return mode, note, ceiling, unknown
}

// translate turns one Claude Code rule into aimon-gw entries, saying why
// when the meaning differs; lossy when it could not be kept exactly, in
// which case the entries are stricter than the rule (an allow narrower or
// none, an ask or a deny wider).
func translate(k kind, rule, home string) (entries []string, why string, lossy bool) {
	rule = strings.TrimSpace(rule)
	name, rest, paren := strings.Cut(rule, "(")
	tools := family[name]
	if tools == nil {
		tools = []string{name}
	}
	if !paren {
		return tools, "", false
	}
	if !strings.HasSuffix(rest, ")") {
		return stricter(k, tools, "its parentheses do not close")
	}
	pattern := strings.TrimSuffix(rest, ")")
	var p string
	switch {
	case name == "Bash":
		p, why, lossy = bashPattern(k, pattern)
		if p == "" {
			return stricter(k, tools, why)
		}
	case slices.Contains(pathTools, name):
		p, why = importPath(pattern, home)
	case name == "WebFetch" && strings.HasPrefix(pattern, "domain:"), name == "Task", name == "Agent":
		p = pattern
	case strings.HasPrefix(name, "mcp__"):
		return stricter(k, tools, "an MCP tool takes no pattern")
	default:
		return stricter(k, tools, fmt.Sprintf("aimon-gw's %s takes no pattern", name))
	}
	for _, t := range tools {
		entries = append(entries, t+"("+p+")")
	}
	return entries, why, lossy
}

// stricter is the rule made stricter for what cannot be kept: an allow
// left out, an ask or deny of the whole tool.
func stricter(k kind, tools []string, why string) ([]string, string, bool) {
	if k == allowRule {
		return nil, why + "; it is left out, so it allows nothing", true
	}
	return tools, why + fmt.Sprintf("; it is widened to every call of %s", strings.Join(tools, " and ")), true
}

// bashPattern turns a Claude Code Bash pattern into aimon-gw's: exact, or
// a prefix at a word boundary (Claude Code's "X:*" and "X *" alike).
func bashPattern(k kind, p string) (string, string, bool) {
	switch star := strings.Count(p, "*"); {
	case star == 0:
		return p, "", false
	case star == 1 && strings.HasSuffix(p, ":*"):
		return p, "", false
	case star == 1 && strings.HasSuffix(p, " *"):
		x := strings.TrimSuffix(p, " *")
		return x + ":*", "", false
	case star == 1 && strings.HasSuffix(p, "*") && k == allowRule:
		x := strings.TrimSpace(strings.TrimSuffix(p, "*"))
		return x + ":*", fmt.Sprintf("Claude Code's %q matches any command starting with %q; aimon-gw's Bash(%s:*) needs a word boundary after it (not %sx), so it allows less", p, x, x, x), true
	}
	return "", fmt.Sprintf("aimon-gw's Bash patterns are exact or a prefix ending in :*, and %q is neither", p), true
}

// importPath turns a Claude Code path pattern into aimon-gw's, keeping a
// relative pattern portable: Claude Code's "/path" (relative to the
// settings' project) and "path" become "./path", which resolves against
// the hook input's cwd; "//path" is absolute; "~/" is fixed to home.
func importPath(p, home string) (string, string) {
	switch {
	case strings.HasPrefix(p, "//"):
		return p[1:], ""
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:]), fmt.Sprintf("~ is the home directory of the user who imported it (%s), fixed here", home)
	case strings.HasPrefix(p, "/"):
		return "." + p, "Claude Code's /path is relative to the project; ./ resolves against the hook input's cwd, the project when Claude Code runs in it"
	case strings.HasPrefix(p, "./"), p == ".":
		return p, ""
	}
	return "./" + p, ""
}

// ProjectOf is the project a settings file belongs to: the parent of its
// .claude directory, or its own directory.
func ProjectOf(file string) string {
	abs, err := filepath.Abs(file)
	if err != nil {
		return filepath.Dir(file)
	}
	dir := filepath.Dir(abs)
	if filepath.Base(dir) == ".claude" {
		return filepath.Dir(dir)
	}
	return dir
}

// Home is the importing user's home directory.
func Home() string {
	h, _ := os.UserHomeDir()
	return h
}
