// Package codeximport turns Codex's own permission rules into an aimon-gw
// policy for aimon-gw hook codex (aimon-gw import codex): its execpolicy
// rules files (Starlark prefix_rule, host_executable, network_rule, as
// Codex loads them from ~/.codex/rules/*.rules) and its config.toml's
// approval_policy, sandbox_mode, sandbox_workspace_write and mcp_servers.
// The policy is never looser than Codex's own reading of them; a rule it
// cannot keep exactly is made stricter and listed in Lossy.
package codeximport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/front/importkit"
)

// Shell is the name Codex gives its shell tools in a hook input.
const Shell = "Bash"

// A rule is one prefix_rule: its tokens, each a set of alternatives.
type rule struct {
	pos           string
	tokens        [][]string
	decision      string
	justification string
}

func (r rule) String() string {
	parts := make([]string, len(r.tokens))
	for i, alts := range r.tokens {
		if len(alts) == 1 {
			parts[i] = strconv.Quote(alts[0])
		} else {
			parts[i] = importkit.Quoted(alts)
		}
	}
	return fmt.Sprintf("%s: prefix_rule [%s] %s", r.pos, strings.Join(parts, ", "), r.decision)
}

// matches is Codex's prefix match of a command's words.
func (r rule) matches(cmd []string) bool {
	if len(cmd) < len(r.tokens) {
		return false
	}
	for i, alts := range r.tokens {
		if !slices.Contains(alts, cmd[i]) {
			return false
		}
	}
	return true
}

// policy is what the rules files declare.
type policy struct {
	rules   []rule
	hosts   map[string][]string // host_executable name: paths
	network []string            // network_rule, each "file:line: host decision"
}

// config is the part of Codex's config.toml the importer reads.
type config struct {
	ApprovalPolicy any    `toml:"approval_policy"`
	SandboxMode    string `toml:"sandbox_mode"`
	Workspace      struct {
		WritableRoots []string `toml:"writable_roots"`
		NetworkAccess bool     `toml:"network_access"`
	} `toml:"sandbox_workspace_write"`
	MCPServers map[string]struct {
		Enabled       *bool    `toml:"enabled"`
		EnabledTools  []string `toml:"enabled_tools"`
		DisabledTools []string `toml:"disabled_tools"`
		Approval      string   `toml:"default_tools_approval_mode"`
	} `toml:"mcp_servers"`
	Profiles map[string]any `toml:"profiles"`
}

// Files are the files an argument names: a file as it is, and a
// directory (a CODEX_HOME or a project's .codex) as Codex reads it, its
// config.toml and its rules/*.rules.
func Files(arg string) ([]string, error) { return importkit.Files(arg, "config.toml", "rules/*.rules") }

// Import turns the files (*.rules and at most one config.toml) into a
// policy. project is the workspace Codex's sandbox lets a command write
// (its working directory), against which a relative writable root is read.
func Import(files []string, project string) (*importkit.Imported, error) {
	p := policy{hosts: map[string][]string{}}
	var cfg config
	var cfgFile string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(f, ".rules"):
			if err := p.parse(f, data); err != nil {
				return nil, err
			}
		case strings.HasSuffix(f, ".toml"):
			if cfgFile != "" {
				return nil, fmt.Errorf("%s and %s are both config files; give one config.toml (Codex layers a project's over the user's: import the one in force)", cfgFile, f)
			}
			cfgFile = f
			if err := toml.Unmarshal(data, &cfg); err != nil {
				var de *toml.DecodeError
				if errors.As(err, &de) {
					row, col := de.Position()
					return nil, fmt.Errorf("%s:%d:%d: not Codex's config.toml (TOML): %s", f, row, col, tomlProblem(de, data))
				}
				return nil, fmt.Errorf("%s: not Codex's config.toml (TOML): %s", f, strings.TrimPrefix(err.Error(), "toml: "))
			}
		default:
			return nil, fmt.Errorf("%s is neither a Codex rules file (.rules) nor its config.toml", f)
		}
	}
	b := &importkit.Builder{Runtime: "codex", Schema: "codex", Files: files, Shell: Shell, AskAdmitted: true, Unknown: "deny",
		UnknownNote: "A tool this policy does not mention is refused (Codex runs its other tools, view_image, web_search and the like, without rules)."}
	where := "Codex's defaults (no config.toml)"
	if cfgFile != "" {
		where = filepath.Base(cfgFile)
	}
	if err := sandbox(b, cfg, where, project); err != nil {
		return nil, err
	}
	for _, r := range p.rules {
		p.translate(b, r)
	}
	for _, n := range p.network {
		b.Put(importkit.Allow, "", b.Lose("%s cannot be kept: the sandbox reaches the network for every command as its network setting says, not per host for some; it is left out, so the network is as the sandbox's setting has it", n))
	}
	if err := mcp(b, cfg, where); err != nil {
		return nil, err
	}
	b.Put(importkit.Allow, "", b.Note("Codex runs a command no rule names by its own judgment (its known-safe commands, its sandbox, approval_policy); here only what an allow rule names runs, and anything else is refused."))
	return b.Result(), nil
}

// parse runs a rules file as Codex does: Starlark with prefix_rule,
// host_executable and network_rule, each prefix_rule's match and not_match
// examples checked as it loads.
func (p *policy) parse(file string, data []byte) error {
	thread := &starlark.Thread{Name: file}
	pos := func(th *starlark.Thread) string {
		at := th.CallFrame(1).Pos
		return fmt.Sprintf("%s:%d", at.Filename(), at.Line)
	}
	predeclared := starlark.StringDict{
		"prefix_rule": starlark.NewBuiltin("prefix_rule", func(th *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var pattern, match, notMatch *starlark.List
			var decision, justification starlark.String = "allow", ""
			if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "pattern", &pattern, "decision?", &decision, "match?", &match, "not_match?", &notMatch, "justification?", &justification); err != nil {
				return nil, fmt.Errorf("%s: %v", pos(th), err)
			}
			r := rule{pos: pos(th), decision: string(decision), justification: string(justification)}
			switch r.decision {
			case "allow", "prompt", "forbidden":
			default:
				return nil, fmt.Errorf("%s: prefix_rule's decision %q is not one Codex knows: write allow, prompt or forbidden", r.pos, r.decision)
			}
			if justification != "" && strings.TrimSpace(string(justification)) == "" {
				return nil, fmt.Errorf("%s: prefix_rule's justification is blank; Codex refuses it", r.pos)
			}
			if pattern.Len() == 0 {
				return nil, fmt.Errorf("%s: prefix_rule's pattern is empty; Codex refuses it", r.pos)
			}
			for i := range pattern.Len() {
				alts, err := stringsOf(pattern.Index(i))
				if err != nil || len(alts) == 0 {
					return nil, fmt.Errorf("%s: prefix_rule's pattern element %d must be a string or a non-empty list of strings", r.pos, i+1)
				}
				r.tokens = append(r.tokens, alts)
			}
			// Examples are the rule's unit tests: Codex refuses to load a
			// file whose examples do not hold.
			for _, ex := range []struct {
				list *starlark.List
				want bool
			}{{match, true}, {notMatch, false}} {
				if ex.list == nil {
					continue
				}
				for i := range ex.list.Len() {
					cmd, err := exampleOf(ex.list.Index(i))
					if err != nil {
						return nil, fmt.Errorf("%s: prefix_rule's example %s: %v", r.pos, ex.list.Index(i), err)
					}
					if r.matches(cmd) != ex.want {
						verb := "match"
						if ex.want {
							verb = "not match"
						}
						return nil, fmt.Errorf("%s: prefix_rule's example %s does %s its pattern; Codex refuses to load the file", r.pos, ex.list.Index(i), verb)
					}
				}
			}
			p.rules = append(p.rules, r)
			return starlark.None, nil
		}),
		"host_executable": starlark.NewBuiltin("host_executable", func(th *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var name starlark.String
			var paths *starlark.List
			if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "name", &name, "paths", &paths); err != nil {
				return nil, fmt.Errorf("%s: %v", pos(th), err)
			}
			list, err := stringsOf(paths)
			if err != nil || string(name) == "" || strings.Contains(string(name), "/") {
				return nil, fmt.Errorf("%s: host_executable takes a bare name and a list of absolute paths", pos(th))
			}
			for _, path := range list {
				if !filepath.IsAbs(path) || filepath.Base(path) != string(name) {
					return nil, fmt.Errorf("%s: host_executable path %q must be absolute, with basename %q", pos(th), path, string(name))
				}
				if !slices.Contains(p.hosts[string(name)], path) {
					p.hosts[string(name)] = append(p.hosts[string(name)], path)
				}
			}
			return starlark.None, nil
		}),
		"network_rule": starlark.NewBuiltin("network_rule", func(th *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var host, protocol, decision, justification starlark.String
			if err := starlark.UnpackArgs(fn.Name(), args, kwargs, "host", &host, "protocol", &protocol, "decision", &decision, "justification?", &justification); err != nil {
				return nil, fmt.Errorf("%s: %v", pos(th), err)
			}
			p.network = append(p.network, fmt.Sprintf("%s: network_rule %s %s", pos(th), host, decision))
			return starlark.None, nil
		}),
	}
	opts := &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
	if _, err := starlark.ExecFileOptions(opts, thread, file, data, predeclared); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			at := file
			for i := range ee.CallStack {
				if fr := ee.CallStack[i]; fr.Pos.Filename() == file {
					at = fmt.Sprintf("%s:%d", file, fr.Pos.Line)
				}
			}
			msg := ee.Msg
			if strings.HasPrefix(msg, file+":") {
				return fmt.Errorf("%s, so Codex refuses the file", msg)
			}
			return fmt.Errorf("%s: %s, so Codex refuses the file", at, msg)
		}
		return fmt.Errorf("%v: the file is not Starlark Codex can load, so Codex refuses it", err)
	}
	return nil
}

func stringsOf(v starlark.Value) ([]string, error) {
	if s, ok := v.(starlark.String); ok {
		return []string{string(s)}, nil
	}
	l, ok := v.(*starlark.List)
	if !ok {
		return nil, fmt.Errorf("not a string or a list")
	}
	var out []string
	for i := range l.Len() {
		s, ok := l.Index(i).(starlark.String)
		if !ok {
			return nil, fmt.Errorf("not a string")
		}
		out = append(out, string(s))
	}
	return out, nil
}

// exampleOf is an example's words: a list as it is, a string split as
// the shell (Codex's shlex) splits it.
func exampleOf(v starlark.Value) ([]string, error) {
	if s, ok := v.(starlark.String); ok {
		w, ok := allow.Words(string(s))
		if !ok || len(w) == 0 {
			return nil, fmt.Errorf("its words cannot be told")
		}
		return w, nil
	}
	w, err := stringsOf(v)
	if err != nil || len(w) == 0 {
		return nil, fmt.Errorf("an example is a string or a non-empty list of strings")
	}
	return w, nil
}

// plain reports whether a token reads the same as a word of the command
// as written: no space, quote, backslash, glob or metacharacter.
func plain(tok string) bool {
	return tok != "" && !strings.ContainsAny(tok, " \t\v\f'\"\\*?[]{}~#;|&`$><()\n\r\x00") && !strings.Contains(tok, ":*")
}

// maxCombinations bounds the entries one rule's alternatives make.
const maxCombinations = 256

// translate writes one prefix_rule's entries: each combination of its
// alternatives is a prefix at a word boundary, Bash(git push:*), as
// Codex matches it; an allowed program is also allowed by each path a
// host_executable gives it (deny and ask entries read a path before the
// name already).
func (p *policy) translate(b *importkit.Builder, r rule) {
	k := map[string]importkit.Kind{"allow": importkit.Allow, "prompt": importkit.Ask, "forbidden": importkit.Deny}[r.decision]
	why := ""
	if r.justification != "" {
		why = " (" + r.justification + ")"
	}
	keep := len(r.tokens)
	for i, alts := range r.tokens {
		if !slices.ContainsFunc(alts, func(a string) bool { return !plain(a) }) {
			continue
		}
		keep = i
		break
	}
	combos := [][]string{nil}
	for _, alts := range r.tokens[:keep] {
		var next [][]string
		for _, c := range combos {
			for _, a := range alts {
				next = append(next, append(slices.Clone(c), a))
			}
		}
		combos = next
		if len(combos) > maxCombinations {
			break
		}
	}
	note := ""
	switch {
	case len(combos) > maxCombinations && k == importkit.Allow:
		b.Put(k, "", b.Lose("%s cannot be kept: its alternatives make more than %d commands; it is left out, so it allows nothing", r, maxCombinations))
		return
	case len(combos) > maxCombinations:
		keep, combos = 0, [][]string{nil}
		note = b.Lose("%s cannot be kept: its alternatives make more than %d commands; it is widened to every command", r, maxCombinations)
	case keep < len(r.tokens) && k == importkit.Allow:
		b.Put(k, "", b.Lose("%s cannot be kept: aimon-gw matches the command as written, and a token with a space, a quote, a glob or a shell metacharacter does not read the same there; it is left out, so it allows nothing", r))
		return
	case keep < len(r.tokens):
		what := "every command"
		if keep > 0 {
			what = fmt.Sprintf("the commands its first %d token(s) start", keep)
		}
		note = b.Lose("%s cannot be kept: aimon-gw matches the command as written, and a token with a space, a quote, a glob or a shell metacharacter does not read the same there; it is widened to %s", r, what)
	default:
		if k == importkit.Ask {
			why += ": Codex asks a person (or refuses, under approval_policy \"never\"); the codex hook cannot ask, so the call is refused"
		}
		note = b.Note("%s%s.", r, why)
	}
	first := true
	put := func(e string) {
		c := ""
		if first {
			c, first = note, false
		}
		b.Put(k, e, c)
	}
	for _, c := range combos {
		if len(c) == 0 {
			put(Shell)
			continue
		}
		put(Shell + "(" + strings.Join(c, " ") + ":*)")
		if k == importkit.Allow {
			for _, path := range p.hosts[c[0]] {
				put(Shell + "(" + strings.Join(append([]string{path}, c[1:]...), " ") + ":*)")
			}
		}
	}
}

// tomlTypeRE is go-toml's sentence for a value of the wrong type, which
// names the Go field and type the file is decoded into.
var tomlTypeRE = regexp.MustCompile(`^cannot decode TOML (\w+) into .*? of type (.+)$`)

// tomlProblem is what the TOML decoder refused, by the key of the line it
// stopped at (data's) and in TOML's words rather than Go's.
func tomlProblem(de *toml.DecodeError, data []byte) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	m := tomlTypeRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want := map[string]string{"string": "a string", "bool": "true or false", "[]string": "an array of strings", "int": "an integer", "int64": "an integer", "float64": "a number"}[m[2]]
	if want == "" {
		want = "a table"
		if strings.HasPrefix(m[2], "[]") {
			want = "an array"
		}
	}
	row, _ := de.Position()
	lines := strings.Split(string(data), "\n")
	key := "the value"
	if row >= 1 && row <= len(lines) {
		if k, _, ok := strings.Cut(lines[row-1], "="); ok {
			key = strings.TrimSpace(k)
		}
	}
	return fmt.Sprintf("%s is a TOML %s where %s belongs", key, m[1], want)
}

// sandbox writes the shell's sandbox and apply_patch as Codex's
// sandbox_mode lets commands and patches write without asking.
func sandbox(b *importkit.Builder, cfg config, where, project string) error {
	switch a := cfg.ApprovalPolicy.(type) {
	case nil, string:
		if s, _ := a.(string); s != "" && !slices.Contains([]string{"untrusted", "on-failure", "on-request", "never"}, s) {
			return fmt.Errorf("%s: approval_policy %q is not one Codex knows (untrusted, on-failure, on-request, never)", where, s)
		}
	case map[string]any:
		b.Note("%s: approval_policy as a table is read as asking: a prompt rule's call is refused here either way.", where)
	default:
		return fmt.Errorf("%s: approval_policy is %v, which is neither one Codex knows (untrusted, on-failure, on-request, never) nor a table", where, a)
	}
	mode := cfg.SandboxMode
	if mode == "" {
		mode = "read-only"
	}
	var write []string
	network := false
	switch mode {
	case "read-only":
		b.ToolsNote = b.Note("%s: sandbox_mode %q: a command writes nothing, and no patch is applied (apply_patch is not allowed).", where, mode)
	case "workspace-write":
		write = append(write, project)
		for _, r := range cfg.Workspace.WritableRoots {
			switch {
			case filepath.IsAbs(r):
				write = append(write, filepath.Clean(r))
			case strings.HasPrefix(r, "~"):
				return fmt.Errorf("%s: writable root %q: give it as an absolute path", where, r)
			default:
				write = append(write, filepath.Join(project, r))
			}
		}
		network = cfg.Workspace.NetworkAccess
		b.ToolsNote = b.Note("%s: sandbox_mode %q: a command writes in the workspace %s and the writable roots, in aimon-gw's sandbox; apply_patch is left out, since the policy allows a patch whole or not at all and Codex applies one only inside them (add \"apply_patch\" if every patch there is acceptable).", where, mode, project)
	case "danger-full-access":
		write, network = []string{project}, true
		b.Put(importkit.Allow, "apply_patch", b.Note("%s: sandbox_mode %q: Codex applies every patch.", where, mode))
		b.ToolsNote = b.Note("%s: sandbox_mode %q: Codex runs commands unsandboxed; here an allowed command still runs in aimon-gw's sandbox, writing only in the workspace %s.", where, mode, project)
	default:
		return fmt.Errorf("%s: sandbox_mode %q is not one Codex knows (read-only, workspace-write, danger-full-access)", where, mode)
	}
	if len(cfg.Profiles) > 0 {
		b.Note("%s: its profiles are not imported; Codex applies one only when it is chosen.", where)
	}
	sb := "write: " + importkit.Quoted(write)
	if network {
		sb = "{" + sb + ", network: true}"
	}
	b.Tools = "codex.#Tools & {Bash: sandbox: " + sb + "}"
	return nil
}

// mcp writes the MCP servers' tools as Codex offers them: a server that
// is off is denied; enabled_tools are the tools it offers, disabled_tools
// are taken away. A call Codex makes only with approval (no
// default_tools_approval_mode "approve" under a sandbox of its own) is an
// ask entry, which the codex hook refuses.
func mcp(b *importkit.Builder, cfg config, where string) error {
	names := make([]string, 0, len(cfg.MCPServers))
	for n := range cfg.MCPServers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		s := cfg.MCPServers[name]
		at := fmt.Sprintf("%s [mcp_servers.%s]", where, name)
		server := "mcp__" + name
		if _, err := allow.ParseEntry(server); err != nil || strings.Contains(name, "__") {
			return fmt.Errorf("%s: the server's name cannot be named in a policy (1 to 64 of a-z, A-Z, 0-9, _ and -, no __)", at)
		}
		if s.Enabled != nil && !*s.Enabled {
			b.Put(importkit.Deny, server, b.Note("%s: enabled = false; Codex starts no such server.", at))
			continue
		}
		k, why := importkit.Allow, "Codex calls its tools"
		if s.Approval != "approve" && cfg.SandboxMode != "danger-full-access" {
			k, why = importkit.Ask, "Codex calls its tools only with approval (no default_tools_approval_mode = \"approve\"), which the codex hook cannot give, so they are refused"
		}
		first := b.Note("%s: %s.", at, why)
		if len(s.EnabledTools) == 0 {
			b.Put(k, server, first)
		}
		for i, t := range s.EnabledTools {
			c := ""
			if i == 0 {
				c = first + " " + b.Note("Only its enabled_tools are offered.")
			}
			if !slices.Contains(s.DisabledTools, t) {
				b.Put(k, server+"__"+t, c)
			}
		}
		for i, t := range s.DisabledTools {
			c := ""
			if i == 0 {
				c = b.Note("%s: disabled_tools; Codex does not offer them.", at)
			}
			b.Put(importkit.Deny, server+"__"+t, c)
		}
	}
	return nil
}
