package cchook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/jsonwords"
	"aimon.dev/gw/internal/front/importkit"
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
type Imported = importkit.Imported

// kind is which of Claude Code's lists a rule is in: the list its entry
// goes to.
type kind = importkit.Kind

const (
	allowRule = importkit.Allow
	askRule   = importkit.Ask
	denyRule  = importkit.Deny
)

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

// The tools claudecode.#Tools declares: a rule of another tool, which
// the policy cannot name, is left to claudeCode: unknownTools.
var declared = []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Grep", "Glob", "WebFetch", "WebSearch", "Agent", "Task", "TodoWrite"}

// The directories whose writes Claude Code always asks for, in every
// mode but bypassPermissions (its protected paths; .claude is the
// gateway's to protect, rule R9).
var protected = []string{".git", ".vscode", ".idea"}

// Import turns a Claude Code settings file's permissions into a policy
// that keeps each of its rules and what its mode lets run without asking
// (deny, then ask, then allow, then the mode): allow, ask and deny become
// the surface's allowed-tools, ask-tools and denied-tools; the working
// directories (the project and additionalDirectories) are read, and under
// acceptEdits edited, as Claude Code lets them be; plan mode reads
// anywhere and edits nothing; dontAsk refuses a tool the policy
// does not mention. A call Claude Code would ask for because no rule
// allows it is refused: the hook asks only for what an ask rule names.
// A rule it cannot keep exactly is made stricter (an allow dropped or
// narrowed, an ask or deny widened to the whole tool) and listed in Lossy.
// project is the settings' project, against which Claude Code reads a
// "/path" rule and a relative additional directory; home tells the user's
// own settings (~/.claude/settings.json) from a project's. A "~/" rule
// stays "~/": the home of the user the hook runs for.
func Import(data []byte, file, project, home string) (*Imported, error) {
	var s Settings
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: not a Claude Code settings file (JSON): %s", jsonwords.Where(file, data, err), jsonwords.Problem(err))
	}
	b := &importkit.Builder{Runtime: "claude-code", Schema: "claudecode", Files: []string{file}, Tools: "claudecode.#Tools", Kind: kindOf}
	var kept []string // the rules not kept exactly
	note := b.Note
	put := func(k kind, e, c string) { b.Put(k, e, c) }
	mode := modeOf(s.Permissions.DefaultMode, file, home)
	unknown := mode.unknown
	add := func(k kind, raw string) {
		entries, why, lossy := translate(k, raw, project)
		if name, _, _ := strings.Cut(strings.TrimSpace(raw), "("); !slices.Contains(declared, name) && !strings.HasPrefix(name, "mcp__") {
			// A tool the policy cannot name is decided by unknownTools.
			switch {
			case k == askRule && unknown == "ask", k == denyRule && unknown == "deny":
				why, lossy = fmt.Sprintf("%s is not a tool claudecode.#Tools declares; claudeCode: unknownTools %q answers it as the rule does", name, unknown), false
			case k == denyRule:
				unknown, why, lossy = "deny", fmt.Sprintf("%s is not a tool claudecode.#Tools declares; it is left to claudeCode: unknownTools, set to \"deny\", which refuses every tool the policy does not mention", name), true
			default:
				why, lossy = fmt.Sprintf("%s is not a tool claudecode.#Tools declares; claudeCode: unknownTools %q answers it, never allowing it", name, unknown), k == allowRule
			}
			entries = nil
		}
		if name, _, _ := strings.Cut(strings.TrimSpace(raw), "("); k == allowRule && mode.noEdits && slices.Contains(family["Edit"], name) {
			entries, why, lossy = nil, fmt.Sprintf("defaultMode %q edits nothing, whatever allows it", mode.name), false
		}
		if lossy {
			kept = append(kept, fmt.Sprintf("%s rule %s: %s", k, strconv.Quote(raw), why))
		}
		for i, e := range entries {
			c := ""
			if i == 0 && why != "" {
				c = note("%s rule %s: %s", k, strconv.Quote(raw), why)
			}
			put(k, e, c)
		}
		if len(entries) == 0 {
			put(k, "", note("%s rule %s is left out: %s", k, strconv.Quote(raw), why))
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
	// The working directories: the project, and the additional ones, an
	// absolute one as it is, "~/" the hook user's home, a relative one
	// against the project.
	raw := []string{project} // as paths; dirs as patterns
	for _, d := range s.Permissions.AdditionalDirectories {
		p := strings.TrimSuffix(strings.TrimSpace(d), "/")
		switch {
		case p == "~":
			p = "~/"
		case strings.HasPrefix(p, "~/"):
		case filepath.IsAbs(p):
			p = filepath.Clean(p)
		default:
			p = filepath.Join(project, p)
		}
		raw = append(raw, p)
	}
	var dirs []string
	for _, d := range raw {
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			dirs = append(dirs, "~/"+globEscaper.Replace(rest))
			continue
		}
		dirs = append(dirs, globEscaper.Replace(d))
	}
	tree := func(dir string) string { return strings.TrimSuffix(dir, "/") + "/**" }
	if !mode.unlimited {
		reads := family["Read"]
		if mode.readAnywhere {
			put(allowRule, "Read", note("defaultMode %q: Claude Code reads anywhere without asking; here Read, Grep and Glob may.", mode.name))
			put(allowRule, "Grep", "")
			put(allowRule, "Glob", "")
			reads = nil
		}
		for i, d := range dirs {
			for j, t := range reads {
				c := ""
				switch {
				case j > 0:
				case i == 0:
					c = note("Claude Code reads in its working directory, the project %s, without asking; here Read, Grep and Glob may.", strconv.Quote(project))
				default:
					c = note("additional directory %s: Claude Code reads there without asking; here Read, Grep and Glob may.", strconv.Quote(s.Permissions.AdditionalDirectories[i-1]))
				}
				put(allowRule, t+"("+tree(d)+")", c)
			}
		}
		if mode.edits {
			for i, d := range dirs {
				for j, t := range family["Edit"] {
					c := ""
					if i == 0 && j == 0 {
						c = note("defaultMode %q: Claude Code edits in its working directories without asking; here Edit, Write, MultiEdit and NotebookEdit may.", mode.name)
					}
					put(allowRule, t+"("+tree(d)+")", c)
				}
			}
		}
		for i, b := range mode.commands {
			c := ""
			if i == 0 {
				c = note("%s: Claude Code runs %s without asking (a command's writes stay where the edit entries allow, in the sandbox); other read-only commands (ls, cat, …) it runs too are left to allow rules, since the sandbox would let them read outside the working directories.", mode.said(), strings.Join(mode.commands, ", "))
			}
			put(allowRule, "Bash("+b+")", c)
		}
	}
	// Claude Code asks before a write into a protected directory of a
	// working directory whatever allows it.
	if mode.edits || mode.unlimited || slices.ContainsFunc(s.Permissions.Allow, func(r string) bool {
		name, _, _ := strings.Cut(strings.TrimSpace(r), "(")
		return slices.Contains(family["Edit"], name)
	}) {
		var absent []string
		for i, d := range dirs {
			for _, p := range protected {
				dir := strings.TrimSuffix(d, "/") + "/" + p
				path := filepath.Join(raw[i], p)
				if strings.HasPrefix(path, "~") {
					path = "" // the hook user's home is not the importer's to look at
				}
				// An ask entry's directory is bound read-only in the
				// sandbox, or, absent, the nearest one that exists: the
				// whole working directory. So only those that exist.
				if st, err := os.Stat(path); err != nil || !st.IsDir() {
					absent = append(absent, dir)
					continue
				}
				for j, t := range family["Edit"] {
					c := ""
					if j == 0 {
						c = note("Claude Code asks before it writes into %s, whatever allows it.", strconv.Quote(dir))
					}
					put(askRule, t+"("+dir+"/**)", c)
				}
			}
		}
		if len(absent) > 0 {
			note("Claude Code asks before it writes into %s too, which do not exist here: import again once one does (an ask entry of a directory that does not exist would make the sandbox bind its working directory read-only).", strings.Join(absent, ", "))
		}
	}
	var pre strings.Builder
	if !mode.unlimited && slices.ContainsFunc(b.Entries(importkit.Allow), func(e string) bool { return strings.HasPrefix(e, "Bash") }) {
		// Claude Code runs an allowed command as the user; here it runs in
		// the sandbox, which lets it write in the working directories.
		quoted := make([]string, len(raw))
		for i, d := range raw {
			quoted[i] = strconv.Quote(d)
		}
		fmt.Fprintf(&pre, "\n// %s\ntools: Bash: sandbox: write: [%s]\n", note("Claude Code runs an allowed command as the user; here it runs in the sandbox, where it writes only in the working directories (%s) and where the edit entries allow.", strings.Join(raw, ", ")), strings.Join(quoted, ", "))
	}
	if mode.note != "" {
		fmt.Fprintf(&pre, "\n// %s\n", note("defaultMode %q: %s", mode.name, mode.note))
	}
	// An allow entry that a deny entry covers whole is left out, as vet
	// would report it; with bypassPermissions there is no allowed-tools.
	b.Preamble, b.OmitAllow = pre.String(), mode.unlimited
	b.Unknown = unknown
	b.UnknownNote = "A tool this policy does not mention is " + map[string]string{"ask": "left to Claude Code's own prompt", "deny": "refused"}[unknown] + "."
	im := b.Result()
	im.Lossy = kept
	return im, nil
}

// globEscaper escapes the characters a path pattern reads as glob, in a
// directory's name.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`, "{", `\{`, "}", `\}`)

// mode is what a Claude Code permission mode lets run without asking,
// beside the rules, as Claude Code 2.1 applies it (each checked with the
// real CLI, cmd/aimon-gw's import tests).
type mode struct {
	name, note   string
	readAnywhere bool     // plan: Read, Grep and Glob anywhere
	edits        bool     // acceptEdits: edits in the working directories
	noEdits      bool     // plan: no edit, whatever allows it
	commands     []string // Bash patterns it runs without asking
	unlimited    bool     // bypassPermissions: every call but the rules' deny and ask
	unknown      string   // claudeCode: unknownTools
}

// said names the mode in a note.
func (m mode) said() string {
	if m.name == "" {
		return "the default mode"
	}
	return "defaultMode " + strconv.Quote(m.name)
}

// modeOf reads defaultMode. Every mode reads the working directories and
// runs echo and pwd without asking; bypassPermissions holds only in the
// user's own settings (Claude Code ignores it in a project's).
func modeOf(name, file, home string) mode {
	m := mode{name: name, unknown: "ask", commands: []string{"echo:*", "pwd"}}
	switch name {
	case "", "default", "manual":
		m.note = "Claude Code asks before what no rule allows; here such a call is refused (claude -p refuses it too), and a tool the policy does not mention is asked."
		if name == "" {
			m.note = ""
		}
	case "acceptEdits":
		m.edits = true
		m.commands = append(m.commands, "touch:*", "mkdir:*", "rm:*", "rmdir:*", "mv:*")
		m.note = "Claude Code accepts edits in its working directories and the file commands touch, mkdir, rm, rmdir and mv without asking; so does this policy."
	case "plan":
		m.readAnywhere, m.noEdits = true, true
		m.note = "Claude Code reads anywhere and edits nothing, whatever allows an edit; commands run as the rules say."
	case "dontAsk":
		m.unknown = "deny"
		m.note = "Claude Code refuses what its rules do not allow instead of asking; here a tool the policy does not mention is refused."
	case "bypassPermissions":
		abs, _ := filepath.Abs(file)
		if home != "" && abs == filepath.Join(home, ".claude", "settings.json") {
			m.unlimited, m.commands = true, nil
			m.note = "Claude Code runs every call no deny or ask rule names; so does this policy (no allowed-tools list), and a tool it does not mention is asked."
			break
		}
		m.note = "Claude Code does not apply bypassPermissions from a project's settings, only from the user's own (~/.claude/settings.json); here, as there, the default mode holds."
	default:
		m.note = "this mode is not one aimon-gw knows; the lists decide every call."
	}
	return m
}

// translate turns one Claude Code rule into aimon-gw entries, saying why
// when the meaning differs; lossy when it could not be kept exactly, in
// which case the entries are stricter than the rule (an allow narrower or
// none, an ask or a deny wider).
func translate(k kind, rule, project string) (entries []string, why string, lossy bool) {
	rule = strings.TrimSpace(rule)
	name, rest, paren := strings.Cut(rule, "(")
	if server, ok := strings.CutSuffix(name, "__*"); ok && !paren && IsServer(server) {
		// Claude Code's mcp__server__* is every tool of the server, as
		// mcp__server is.
		return []string{server}, fmt.Sprintf("Claude Code's %s is every tool of the server, which aimon-gw writes %s", name, server), false
	}
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
		p, why = importPath(pattern, project)
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

// kindOf is the kind of a Claude Code tool's permission subject.
func kindOf(tool string) allow.Kind {
	switch {
	case tool == "Bash":
		return allow.Command
	case slices.Contains(pathTools, tool):
		return allow.Path
	case tool == "WebFetch":
		return allow.Domain
	}
	return allow.None
}

// IsServer reports whether name is Claude Code's name of an MCP server,
// mcp__SERVER, with no tool after it.
func IsServer(name string) bool {
	rest, ok := strings.CutPrefix(name, "mcp__")
	return ok && rest != "" && !strings.Contains(rest, "__") && !strings.ContainsAny(rest, "*?[]{}()")
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

// importPath turns a Claude Code path pattern into aimon-gw's: "//path"
// is absolute; "~/" stays "~/", the home of the user the hook runs for;
// "/path" is relative to the settings' project, written out under it; and
// "path" and "./path", relative to Claude Code's current directory, become
// "./path", which resolves against the hook input's cwd.
func importPath(p, project string) (string, string) {
	switch {
	case strings.HasPrefix(p, "//"):
		return p[1:], ""
	case strings.HasPrefix(p, "~/"):
		return p, ""
	case strings.HasPrefix(p, "/"):
		return globEscaper.Replace(project) + p, fmt.Sprintf("Claude Code's /path is relative to the settings' project, %s", project)
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
