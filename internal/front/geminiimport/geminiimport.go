// Package geminiimport turns Gemini CLI's own permission rules into an
// aimon-gw policy for aimon-gw hook gemini-cli (aimon-gw import
// gemini-cli): its policy engine's TOML files ([[rule]] with toolName,
// mcpName, commandPrefix, commandRegex, argsPattern, decision, priority,
// as Gemini loads them from ~/.gemini/policies/*.toml and
// /etc/gemini-cli/policies) and the settings.json keys Gemini turns into
// rules (tools.core, tools.exclude, tools.allowed,
// tools.confirmationRequired, mcp.allowed, mcp.excluded, an MCP server's
// trust, includeTools and excludeTools). Gemini lets the rule of highest
// priority decide; aimon-gw lets deny beat ask and ask beat allow. The
// policy is never looser than Gemini's own reading: where the two orders
// differ and the difference cannot be written away, the rule is kept
// stricter and listed in Lossy.
package geminiimport

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"aimon.dev/gw/internal/core/jsonwords"
	"aimon.dev/gw/internal/front/importkit"
)

// Shell is Gemini CLI's shell tool.
const Shell = "run_shell_command"

// declared are the tools geminicli.#Tools declares.
var declared = []string{"run_shell_command", "read_file", "write_file", "replace", "list_directory", "glob", "grep_search", "web_fetch", "google_web_search"}

// readOnly are the tools of Gemini's default policy read-only.toml that
// the policy can name: allowed at priority 50 of the default tier.
var readOnly = []string{"glob", "grep_search", "list_directory", "read_file", "google_web_search"}

// legacy are the tools' old names Gemini's rules still match them by.
var legacy = map[string]string{"search_file_content": "grep_search"}

// The tiers Gemini CLI 0.61 adds to a rule's priority/1000.
const (
	defaultTier = 1
	userTier    = 4
	adminTier   = 5
	// never is above every tier: a tool a server's excludeTools names is
	// never offered.
	never = 99
)

// rawRule is a [[rule]] as Gemini's schema reads it.
type rawRule struct {
	ToolName      any      `toml:"toolName"`
	McpName       string   `toml:"mcpName"`
	ArgsPattern   *string  `toml:"argsPattern"`
	CommandPrefix any      `toml:"commandPrefix"`
	CommandRegex  *string  `toml:"commandRegex"`
	Decision      string   `toml:"decision"`
	Priority      *int64   `toml:"priority"`
	Modes         []string `toml:"modes"`
	Interactive   *bool    `toml:"interactive"`
	Subagent      string   `toml:"subagent"`
	Annotations   any      `toml:"toolAnnotations"`
}

// A rule is one rule as Gemini's engine holds it: one tool name (or
// wildcard), at most one command prefix or regular expression.
type rule struct {
	pos      string
	tool     string // Gemini's name: run_shell_command, mcp_S_T, mcp_S_*, mcp_*, *
	prefix   *string
	regex    string
	decision string // allow, deny, ask_user
	priority float64
	// everywhere is false for a rule that applies only in some approval
	// modes or only interactively or only headless.
	everywhere bool
	limits     string
}

func (r rule) String() string {
	s := fmt.Sprintf("%s: %s %s", r.pos, r.decision, r.tool)
	if r.prefix != nil {
		s += " commandPrefix " + strconv.Quote(*r.prefix)
	}
	if r.regex != "" {
		s += " pattern " + strconv.Quote(r.regex)
	}
	if r.priority >= never {
		return s + " (never offered)"
	}
	return s + fmt.Sprintf(" (priority %.3f)", r.priority)
}

// settings is the part of settings.json the importer reads.
type settings struct {
	Tools struct {
		Core                 []string `json:"core"`
		Exclude              []string `json:"exclude"`
		Allowed              []string `json:"allowed"`
		ConfirmationRequired []string `json:"confirmationRequired"`
	} `json:"tools"`
	MCP struct {
		Allowed             []string `json:"allowed"`
		Excluded            []string `json:"excluded"`
		AutoAllowInHeadless bool     `json:"autoAllowInHeadless"`
	} `json:"mcp"`
	MCPServers map[string]struct {
		Trust        bool     `json:"trust"`
		IncludeTools []string `json:"includeTools"`
		ExcludeTools []string `json:"excludeTools"`
	} `json:"mcpServers"`
}

// Files are the files an argument names: a file as it is, and a
// directory (~/.gemini) as Gemini reads it, its settings.json and its
// policies/*.toml.
func Files(arg string) ([]string, error) {
	return importkit.Files(arg, "settings.json", "policies/*.toml")
}

// Import turns policy files (*.toml) and at most one settings.json into a
// policy. A policy file under /etc/gemini-cli is of the admin tier, any
// other of the user's.
func Import(files []string, project string) (*importkit.Imported, error) {
	var rules []rule
	var set settings
	setFile := ""
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(f, ".toml"):
			tier := userTier
			if abs, _ := filepath.Abs(f); strings.HasPrefix(abs, "/etc/gemini-cli/") {
				tier = adminTier
			}
			rs, err := parse(f, data, tier)
			if err != nil {
				return nil, err
			}
			rules = append(rules, rs...)
		case strings.HasSuffix(f, ".json"):
			if setFile != "" {
				return nil, fmt.Errorf("%s and %s are both settings files; give one settings.json (Gemini merges them: import the one that holds the tools and mcp keys)", setFile, f)
			}
			setFile = f
			if err := json.Unmarshal(data, &set); err != nil {
				return nil, fmt.Errorf("%s: not Gemini CLI's settings.json (JSON): %s", jsonwords.Where(f, data, err), jsonwords.Problem(err))
			}
		default:
			return nil, fmt.Errorf("%s is neither a Gemini CLI policy file (.toml) nor its settings.json", f)
		}
	}
	b := &importkit.Builder{Runtime: "gemini-cli", Schema: "geminicli", Files: files, Shell: Shell, AskAdmitted: true, Tools: "geminicli.#Tools", Unknown: "deny"}
	rules = append(rules, settingsRules(b, set, filepath.Base(setFile))...)
	for _, t := range readOnly {
		rules = append(rules, rule{pos: "Gemini CLI's default policy read-only.toml", tool: t, decision: "allow", priority: defaultTier + 0.05, everywhere: true})
	}
	// Gemini sorts its rules by priority, highest first, keeping their
	// order among equals.
	slices.SortStableFunc(rules, func(a, b rule) int { return cmp.Compare(b.priority, a.priority) })
	im := &importer{b: b, rules: rules, servers: servers(rules, set)}
	for i := range rules {
		im.translate(i)
	}
	im.narrowMCP(set)
	// An ask from the hook leaves gemini -p waiting for an answer that
	// never comes, so a tool no rule names is refused, as any call no
	// rule allows is.
	b.UnknownNote = "A tool this policy does not mention is refused (Gemini CLI asks for one no rule names; gemini -p refuses it)."
	b.Put(importkit.Allow, "", b.Note("Gemini CLI asks before a call no rule allows (gemini -p refuses it); here such a call is refused."))
	return b.Result(), nil
}

// ruleLines are the lines of a file's [[rule]] headers, in order.
var ruleHeader = regexp.MustCompile(`(?m)^[ \t]*\[\[[ \t]*rule[ \t]*\]\]`)

// parse reads a policy file as Gemini's schema does; Gemini leaves out a
// file it cannot read, which is an error here.
func parse(file string, data []byte, tier int) ([]rule, error) {
	var doc struct {
		Rule []rawRule `toml:"rule"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s:%d:%d is not TOML Gemini CLI can read (%s), so Gemini ignores the whole file; fix it", file, row, col, de.Error())
		}
		return nil, fmt.Errorf("%s is not a Gemini CLI policy file: %v; Gemini ignores the whole file, fix it", file, err)
	}
	lines := ruleHeader.FindAllStringIndex(string(data), -1)
	var out []rule
	for i, raw := range doc.Rule {
		pos := fmt.Sprintf("%s rule #%d", file, i+1)
		if i < len(lines) {
			pos = fmt.Sprintf("%s:%d", file, strings.Count(string(data[:lines[i][0]]), "\n")+1)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s; Gemini CLI ignores the whole file, fix it", pos, fmt.Sprintf(format, args...))
		}
		names, err := stringOrList(raw.ToolName)
		if err != nil || len(names) == 0 {
			return nil, bad("toolName must be a tool's name or a list of names")
		}
		switch raw.Decision {
		case "allow", "deny", "ask_user":
		default:
			return nil, bad("decision %q is not one Gemini CLI knows: write allow, deny or ask_user", raw.Decision)
		}
		if raw.Priority == nil || *raw.Priority < 0 || *raw.Priority > 999 {
			return nil, bad("priority must be an integer from 0 to 999")
		}
		prefixes, err := stringOrList(raw.CommandPrefix)
		if err != nil {
			return nil, bad("commandPrefix must be a string or a list of strings")
		}
		if (raw.CommandPrefix != nil || raw.CommandRegex != nil) && (len(names) != 1 || names[0] != Shell || raw.ArgsPattern != nil) {
			return nil, bad("commandPrefix and commandRegex go only with toolName = %q and without argsPattern", Shell)
		}
		if raw.CommandPrefix != nil && raw.CommandRegex != nil {
			return nil, bad("commandPrefix and commandRegex cannot both be given")
		}
		// The regular expression Gemini tries on the arguments as JSON.
		regex := ""
		for _, p := range []*string{raw.ArgsPattern, raw.CommandRegex} {
			if p != nil {
				if _, err := regexp.Compile(*p); err != nil {
					return nil, bad("the pattern %q is not a regular expression: %v", *p, err)
				}
				regex = *p
			}
		}
		if raw.CommandRegex != nil {
			regex = `"command":"` + regex
		}
		r := rule{pos: pos, decision: raw.Decision, priority: float64(tier) + float64(*raw.Priority)/1000, everywhere: true}
		var limits []string
		if len(raw.Modes) > 0 && !slices.Contains(raw.Modes, "default") {
			limits = append(limits, "only in approval modes "+strings.Join(raw.Modes, ", "))
		}
		if raw.Interactive != nil {
			limits = append(limits, map[bool]string{true: "only interactively", false: "only headless"}[*raw.Interactive])
		}
		if raw.Subagent != "" {
			limits = append(limits, "only to the subagent "+strconv.Quote(raw.Subagent))
		}
		if raw.Annotations != nil {
			limits = append(limits, "only to tools with its toolAnnotations")
		}
		if len(limits) > 0 {
			r.everywhere, r.limits = false, strings.Join(limits, ", ")
		}
		for _, n := range names {
			if n == "" {
				return nil, bad("toolName cannot be empty; write \"*\" for every tool")
			}
			if strings.Contains(n, "__") {
				return nil, bad("toolName %q uses the __ syntax, which Gemini CLI no longer reads for MCP tools; write mcpName = \"server\" and the tool's own name", n)
			}
			t := r
			t.tool = n
			if canonical, ok := legacy[n]; ok {
				t.tool = canonical // Gemini matches a rule of a tool's old name on the tool
			}
			if raw.McpName != "" {
				t.tool = mcpName(raw.McpName, n)
			}
			t.regex = regex
			if raw.CommandPrefix == nil {
				out = append(out, t)
				continue
			}
			for _, p := range prefixes {
				tp := t
				tp.prefix = &p
				out = append(out, tp)
			}
		}
	}
	return out, nil
}

// mcpName is Gemini's formatMcpToolName.
func mcpName(server, tool string) string {
	switch {
	case server == "*" && tool == "*":
		return "mcp_*"
	case server == "*":
		return "mcp_*_" + tool
	case tool == "*":
		return "mcp_" + server + "_*"
	}
	return "mcp_" + server + "_" + tool
}

func stringOrList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{x}, nil
	case []any:
		var out []string
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("not a string")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("not a string or a list")
}

// settingsRules are the rules Gemini CLI 0.61 makes of settings.json, at
// the priorities it gives them in the user's tier.
func settingsRules(b *importkit.Builder, s settings, file string) []rule {
	var out []rule
	add := func(key, tool string, prefix *string, decision string, priority float64) {
		out = append(out, rule{pos: file + " " + key, tool: tool, prefix: prefix, decision: decision, priority: userTier + priority, everywhere: true})
	}
	server := func(name string) string {
		if name == "*" {
			return "mcp_*"
		}
		return "mcp_" + name + "_*"
	}
	for _, n := range s.MCP.Excluded {
		add("mcp.excluded", server(n), nil, "deny", 0.9)
	}
	for _, t := range s.Tools.Exclude {
		if strings.Contains(t, "(") {
			b.Put(importkit.Deny, "", b.Note("%s tools.exclude %q is left out: Gemini CLI 0.61 reads it as a tool's name, which no tool has, so it excludes nothing; write a policy rule with commandPrefix instead.", file, t))
			continue
		}
		add("tools.exclude", shellName(t), nil, "deny", 0.4)
	}
	for _, t := range s.Tools.ConfirmationRequired {
		add("tools.confirmationRequired", shellName(t), nil, "ask_user", 0.35)
	}
	allowed := func(key string, list []string, priority float64, enforce bool) {
		narrowed := false
		for _, t := range list {
			name, args, paren := strings.Cut(t, "(")
			if paren && strings.HasSuffix(args, ")") && shellName(name) == Shell {
				p := strings.TrimSuffix(args, ")")
				add(key, Shell, &p, "allow", priority)
				narrowed = true
				continue
			}
			if paren {
				t = name // Gemini allows the whole tool, whatever the parentheses say
			}
			add(key, shellName(t), nil, "allow", priority)
		}
		if narrowed && enforce {
			add(key+" (narrowing)", Shell, nil, "deny", priority-0.01)
		}
	}
	allowed("tools.allowed", s.Tools.Allowed, 0.3, true)
	if len(s.Tools.Core) > 0 {
		allowed("tools.core", s.Tools.Core, 0.25, false)
		add("tools.core (allowlist)", "*", nil, "deny", 0.24)
	}
	names := make([]string, 0, len(s.MCPServers))
	for n := range s.MCPServers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if s.MCPServers[n].Trust {
			add("mcpServers."+n+".trust", server(n), nil, "allow", 0.2)
		}
	}
	for _, n := range s.MCP.Allowed {
		add("mcp.allowed", server(n), nil, "allow", 0.1)
	}
	for _, n := range names {
		for _, t := range s.MCPServers[n].ExcludeTools {
			// A tool the server's excludeTools names is never offered,
			// whatever a rule says.
			out = append(out, rule{pos: file + " mcpServers." + n + ".excludeTools", tool: "mcp_" + n + "_" + t, decision: "deny", priority: never, everywhere: true})
		}
	}
	if s.MCP.AutoAllowInHeadless {
		for _, n := range names {
			if !s.MCPServers[n].Trust && !slices.Contains(s.MCP.Allowed, n) && !slices.Contains(s.MCP.Allowed, "*") {
				out = append(out, rule{pos: file + " mcp.autoAllowInHeadless", tool: server(n), decision: "allow", priority: userTier + 0.1, limits: "only headless"})
			}
		}
	}
	return out
}

func shellName(t string) string {
	if t == "ShellTool" {
		return Shell
	}
	return t
}

// servers are the MCP servers the rules and settings name.
func servers(rules []rule, s settings) []string {
	var out []string
	for n := range s.MCPServers {
		out = append(out, n)
	}
	for _, r := range rules {
		if srv, _, ok := splitMCP(r.tool); ok && srv != "*" {
			out = append(out, srv)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// splitMCP splits Gemini's mcp_SERVER_TOOL at the first underscore after
// mcp_, as Gemini does; tool is "*" for every tool of the server.
func splitMCP(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp_")
	if !ok {
		return "", "", false
	}
	if rest == "*" {
		return "*", "*", true
	}
	server, tool, ok = strings.Cut(rest, "_")
	return server, tool, ok && server != "" && tool != ""
}

// region is what a rule matches, in the terms of containment: the tool
// (or a wildcard), and the command prefix of a shell rule.
type region struct {
	level  int    // 0 every tool, 1 every MCP tool, 2 a server's tools, 3 one tool
	server string // of level 2 and an MCP tool of level 3
	tool   string // of level 3: aimon-gw's name (mcp__S__T for MCP), or Gemini's for a tool it cannot name
	prefix *string
	regex  bool
	any    bool // a wildcard aimon-gw cannot name (mcp_*_T)
}

func regionOf(r rule) region {
	g := region{prefix: r.prefix, regex: r.regex != ""}
	switch srv, tool, ok := splitMCP(r.tool); {
	case r.tool == "*":
		g.level = 0
	case ok && srv == "*" && tool == "*":
		g.level = 1
	case ok && srv == "*":
		g.level, g.any = 1, true
	case ok && tool == "*":
		g.level, g.server = 2, srv
	case ok:
		g.level, g.server, g.tool = 3, srv, "mcp__"+srv+"__"+tool
	default:
		g.level, g.tool = 3, r.tool
	}
	return g
}

// toolContains reports whether every tool of b is one of a.
func toolContains(a, b region) bool {
	switch {
	case a.any:
		return false
	case a.level == 0:
		return true
	case a.level == 1:
		return b.level == 1 || b.server != ""
	case a.level == 2:
		return b.level >= 2 && b.server == a.server
	}
	return b.level == 3 && b.tool == a.tool
}

// contains reports whether a matches every call b matches.
func contains(a, b region) bool {
	if !toolContains(a, b) || a.regex {
		return false
	}
	switch {
	case a.prefix == nil:
		return true
	case b.prefix == nil || b.regex:
		return false
	}
	return *b.prefix == *a.prefix || strings.HasPrefix(*b.prefix, *a.prefix+" ")
}

// overlaps reports whether a call may match both.
func overlaps(a, b region) bool {
	isMCP := func(g region) bool { return g.level == 1 || g.server != "" }
	related := toolContains(a, b) || toolContains(b, a) ||
		a.any && (b.level == 0 || isMCP(b)) || b.any && (a.level == 0 || isMCP(a))
	if !related {
		return false
	}
	if a.regex || b.regex || a.prefix == nil || b.prefix == nil {
		return true
	}
	return contains(a, b) || contains(b, a)
}

type importer struct {
	b       *importkit.Builder
	rules   []rule
	servers []string
}

var kinds = map[string]importkit.Kind{"allow": importkit.Allow, "ask_user": importkit.Ask, "deny": importkit.Deny}

// translate writes the i-th rule (in Gemini's order) as entries of the
// list of its decision, where Gemini's first match and aimon-gw's deny,
// then ask, then allow agree; where they do not, the rule is left out
// if that is exact, and kept stricter (Lossy) if not.
func (im *importer) translate(i int) {
	r, b := im.rules[i], im.b
	k := kinds[r.decision]
	g := regionOf(r)
	if !r.everywhere {
		if k == importkit.Allow {
			b.Put(k, "", b.Note("%s applies %s; it is left out, so it allows nothing here.", r, r.limits))
			return
		}
		b.Put(k, "", b.Note("%s applies %s; it is kept everywhere.", r, r.limits))
	}
	for _, h := range im.rules[:i] {
		if h.everywhere && contains(regionOf(h), g) {
			b.Put(k, "", b.Note("%s never decides: %s comes first and matches every call it does.", r, h))
			return
		}
	}
	// A call of a higher rule that is looser than this one and lies
	// within it: Gemini lets the higher rule decide, aimon-gw this one.
	var shadowed []rule
	for _, h := range im.rules[:i] {
		hg := regionOf(h)
		if im.kept(h) && kinds[h.decision] < k && overlaps(hg, g) {
			shadowed = append(shadowed, h)
		}
	}
	if k == importkit.Deny && len(shadowed) == 0 && (g.regex || g.prefix != nil && !plainPrefix(*g.prefix)) && im.unopposed(i) {
		// A deny this policy cannot write exactly, of calls no rule here
		// allows or asks for: they are refused without it.
		b.Put(k, "", b.Note("%s is left out: no rule allows or asks for any call it denies, so they are refused here without it.", r))
		return
	}
	var note string
	if len(shadowed) == 0 {
		note = b.Note("%s.", r)
	} else {
		if k == importkit.Deny && im.droppable(i) {
			// What this deny leaves to the higher rules is theirs;
			// the rest of it is refused here without an entry, since
			// nothing below it allows any of it.
			b.Put(k, "", b.Note("%s is left out: the rules before it decide what it would shadow, and the rest of it is refused here as no entry allows it.", r))
			// A server's other tools are refused by the entries that
			// mention it; a tool or server no entry names would be left
			// to unknownTools.
			if g.level < 2 || g.level == 3 && !slices.Contains(declared, g.tool) && !strings.HasPrefix(g.tool, "mcp__") {
				b.Unknown = "deny"
			}
			return
		}
		names := make([]string, len(shadowed))
		for j, h := range shadowed {
			names[j] = h.String()
		}
		note = b.Lose("%s cannot be kept as Gemini orders it: %s comes first and decides some of its calls, where aimon-gw's %s would beat it; it is kept, so those calls are %s here", r, strings.Join(names, "; "), r.decision, map[importkit.Kind]string{importkit.Ask: "asked", importkit.Deny: "refused"}[k])
	}
	im.put(r, g, k, note)
}

// kept reports whether a rule decides in this policy as in Gemini's
// default mode: an allow this policy cannot write is left out, so the
// calls it would allow are refused here anyway.
func (im *importer) kept(r rule) bool {
	g := regionOf(r)
	return r.everywhere && !(kinds[r.decision] == importkit.Allow && (g.regex || g.any || g.prefix != nil && !plainPrefix(*g.prefix)))
}

// unopposed reports whether no other rule kept here allows or asks for a
// call the i-th rule may match, nor a tool it matches is left to
// unknownTools.
func (im *importer) unopposed(i int) bool {
	g := regionOf(im.rules[i])
	if g.level < 3 || !slices.Contains(declared, g.tool) && !strings.HasPrefix(g.tool, "mcp__") {
		return false
	}
	for j, o := range im.rules {
		if j != i && im.kept(o) && kinds[o.decision] != importkit.Deny && overlaps(regionOf(o), g) {
			return false
		}
	}
	return true
}

// widened is the longest prefix of whole words of p that reads the same
// to aimon-gw, "" for none: every command p matches starts with it.
func widened(p string) string {
	end := len(p)
	for i := range len(p) {
		if strings.ContainsRune("\t'\"\\*?[]{}~#;|&`$><()\n\r\x00", rune(p[i])) || strings.HasPrefix(p[i:], "  ") || strings.HasPrefix(p[i:], ":*") {
			end = i
			break
		}
	}
	words := strings.Fields(p[:end])
	if end < len(p) && p[end] != ' ' && end > 0 && p[end-1] != ' ' && len(words) > 0 {
		words = words[:len(words)-1]
	}
	return strings.Join(words, " ")
}

// droppable reports whether the deny rule i may be left out: everything
// it matches that no rule before it decides is refused without it, so no
// rule after it may allow or ask for any of that (each one it overlaps it
// contains, and so shadows), and a tool the policy does not name is then
// refused (unknownTools "deny").
func (im *importer) droppable(i int) bool {
	g := regionOf(im.rules[i])
	if g.regex || g.any || !im.rules[i].everywhere {
		return false
	}
	for _, l := range im.rules[i+1:] {
		lg := regionOf(l)
		if kinds[l.decision] != importkit.Deny && overlaps(g, lg) && !contains(g, lg) {
			return false
		}
	}
	// A higher ask or allow of a tool the policy cannot name would be
	// refused by unknownTools "deny".
	for _, h := range im.rules[:i] {
		hg := regionOf(h)
		if kinds[h.decision] != importkit.Deny && overlaps(hg, g) && hg.level == 3 && !slices.Contains(declared, hg.tool) && !strings.HasPrefix(hg.tool, "mcp__") {
			return false
		}
	}
	return true
}

// put writes a rule's entries.
func (im *importer) put(r rule, g region, k importkit.Kind, note string) {
	b := im.b
	cannot := func(why string) {
		if k == importkit.Allow {
			b.Put(k, "", b.Lose("%s cannot be kept: %s; it is left out, so it allows nothing", r, why))
			return
		}
		note = b.Lose("%s cannot be kept: %s; it is widened to every call of %s", r, why, r.tool)
	}
	var entries []string
	switch {
	case g.any:
		if k == importkit.Allow {
			cannot("aimon-gw names an MCP tool with its server")
			return
		}
		cannot("aimon-gw names an MCP tool with its server")
		g = region{level: 1}
	case g.regex:
		if k == importkit.Allow {
			cannot("aimon-gw cannot match a regular expression on the arguments exactly")
			return
		}
		if g.tool == Shell {
			cannot("aimon-gw's command patterns are exact or a prefix, not a regular expression")
		} else {
			cannot("aimon-gw cannot match a regular expression on the arguments exactly")
		}
		g.regex, g.prefix = false, nil
	case g.prefix != nil && !plainPrefix(*g.prefix):
		if k == importkit.Allow {
			cannot(fmt.Sprintf("aimon-gw's command prefix %q would not match what Gemini's does (a quote, a backslash, a shell metacharacter, or spaces other than single ones between words)", *g.prefix))
			return
		}
		if w := widened(*g.prefix); w != "" {
			note = b.Lose("%s cannot be kept: aimon-gw's command prefix %q would not match what Gemini's does; it is widened to %s", r, *g.prefix, Shell+"("+w+":*)")
			g.prefix = &w
			break
		}
		cannot(fmt.Sprintf("aimon-gw's command prefix %q would not match what Gemini's does", *g.prefix))
		g.prefix = nil
	}
	switch g.level {
	case 0:
		entries = append(entries, declared...)
		fallthrough
	case 1:
		for _, s := range im.servers {
			entries = append(entries, "mcp__"+s)
		}
		im.unknown(r, k, &note)
	case 2:
		entries = []string{"mcp__" + g.server}
	case 3:
		switch {
		case g.prefix != nil:
			entries = []string{Shell + "(" + *g.prefix + ":*)"}
		case slices.Contains(declared, g.tool), strings.HasPrefix(g.tool, "mcp__"):
			entries = []string{g.tool}
		default:
			im.unknown(r, k, &note)
		}
	}
	for j, e := range entries {
		c := ""
		if j == 0 {
			c = note
		}
		b.Put(k, e, c)
	}
	if len(entries) == 0 {
		b.Put(k, "", note)
	}
}

// unknown answers the part of a rule that names tools the policy cannot
// (a tool geminicli.#Tools does not declare, an MCP server it does not
// know) through unknownTools.
func (im *importer) unknown(r rule, k importkit.Kind, note *string) {
	b := im.b
	switch {
	case k == importkit.Deny && r.tool == "*", k == importkit.Deny && r.tool == "mcp_*":
		b.Unknown = "deny"
		*note += " " + b.Note("A tool the policy does not name is refused too (unknownTools \"deny\").")
	case k == importkit.Deny:
		if b.Unknown != "deny" {
			b.Unknown = "deny"
			*note = b.Lose("%s names tools geminicli.#Tools does not declare; they are left to unknownTools, set to \"deny\", which refuses every tool the policy does not mention", r)
		}
	case k == importkit.Ask:
		*note = b.Lose("%s asks for tools the policy cannot name (a tool geminicli.#Tools does not declare, or an MCP server no rule or setting names); unknownTools refuses them", r)
	default:
		*note = b.Lose("%s allows tools the policy cannot name (a tool geminicli.#Tools does not declare, or an MCP server no rule or setting names); unknownTools answers them, never allowing them", r)
	}
}

// plainPrefix reports whether a command prefix reads the same to aimon-gw
// as to Gemini: words of no quote, backslash, glob or metacharacter, one
// space between them.
func plainPrefix(p string) bool {
	return p != "" && strings.Join(strings.Fields(p), " ") == p && !strings.ContainsAny(p, "\t'\"\\*?[]{}~#;|&`$><()\n\r\x00") && !strings.Contains(p, ":*")
}

// narrowMCP keeps each server's allow and ask entries to the tools it
// offers: includeTools names them (a name, or name(…)).
func (im *importer) narrowMCP(s settings) {
	b := im.b
	for name, srv := range s.MCPServers {
		if len(srv.IncludeTools) == 0 {
			continue
		}
		var offered []string
		for _, t := range srv.IncludeTools {
			n, _, _ := strings.Cut(t, "(")
			offered = append(offered, "mcp__"+name+"__"+n)
		}
		for _, k := range []importkit.Kind{importkit.Allow, importkit.Ask} {
			whole := b.Has(k, "mcp__"+name)
			b.Drop(k, func(e string) (string, bool) {
				switch {
				case e == "mcp__"+name:
					return b.Note("%q is narrowed to the tools mcpServers.%s.includeTools offers.", e, name), true
				case strings.HasPrefix(e, "mcp__"+name+"__") && !slices.Contains(offered, e):
					return b.Note("%q is left out: mcpServers.%s.includeTools does not offer it.", e, name), true
				}
				return "", false
			})
			if whole {
				for _, o := range offered {
					b.Put(k, o, "")
				}
			}
		}
	}
}
