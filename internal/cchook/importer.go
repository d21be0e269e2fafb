package cchook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Settings is the part of a Claude Code settings file the importer reads.
type Settings struct {
	Permissions struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
		Ask   []string `json:"ask"`
	} `json:"permissions"`
}

// An Imported policy is the CUE source of a policy and the notes on what
// was translated or left out, one sentence each.
type Imported struct {
	Source string
	Notes  []string
}

// Import turns a Claude Code settings file's permissions into a policy that
// vet accepts. project is the project directory ("/path" rules resolve
// against it, as Claude Code's do against the settings file's project) and
// home the user's home directory (for "~/path"). Where Claude Code's
// meaning differs from aimon-gw's it says so, as a CUE comment beside the
// entry and in Notes; deny and ask rules the policy cannot express are
// listed as unsupported.
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
	denied := map[string]bool{}
	var unsupported []string
	for _, d := range s.Permissions.Deny {
		if name, _, paren := strings.Cut(d, "("); !paren {
			denied[strings.TrimSpace(name)] = true
			continue
		}
		unsupported = append(unsupported, note("deny rule %s is not supported: an aimon-gw allow list cannot subtract a pattern; narrow the allow entries instead.", strconv.Quote(d)))
	}
	for _, a := range s.Permissions.Ask {
		unsupported = append(unsupported, note("ask rule %s is not supported: the hook asks only for tools the policy does not mention (claudeCode: unknownTools: \"ask\").", strconv.Quote(a)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Imported from %s by aimon-gw import claude-code; review it, then vet it.\npackage policy\n\nimport \"aimon.dev/gw/schema/claudecode\"\n\ntools: claudecode.#Tools\n\nagent: \"allowed-tools\": [\n", filepath.Base(file))
	for _, raw := range s.Permissions.Allow {
		entry, why := translate(raw, project, home)
		name, _, _ := strings.Cut(entry, "(")
		if denied[name] {
			fmt.Fprintf(&b, "\t// %s is left out: the deny list denies %s.\n", strconv.Quote(raw), name)
			note("%s is left out: the deny list denies %s.", strconv.Quote(raw), name)
			continue
		}
		if why != "" {
			fmt.Fprintf(&b, "\t%s, // %s\n", strconv.Quote(entry), note("%s: %s", strconv.Quote(raw), why))
			continue
		}
		fmt.Fprintf(&b, "\t%s,\n", strconv.Quote(entry))
	}
	b.WriteString("]\n")
	for _, u := range unsupported {
		fmt.Fprintf(&b, "\n// Unsupported: %s", u)
	}
	if len(unsupported) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("\n// A tool this policy does not mention is left to Claude Code's own prompt.\nclaudeCode: unknownTools: \"ask\"\n")
	im.Source = b.String()
	return im, nil
}

// translate turns one Claude Code allow rule into an aimon-gw entry, and
// says why when the meaning differs.
func translate(rule, project, home string) (entry, why string) {
	name, rest, paren := strings.Cut(strings.TrimSpace(rule), "(")
	if !paren || !strings.HasSuffix(rest, ")") {
		return rule, ""
	}
	pattern := strings.TrimSuffix(rest, ")")
	switch name {
	case "Bash":
		switch {
		case strings.HasSuffix(pattern, ":*"):
			return rule, ""
		case strings.HasSuffix(pattern, " *"):
			p := strings.TrimSuffix(pattern, " *")
			return "Bash(" + p + ":*)", fmt.Sprintf("Claude Code's %q is a prefix rule; aimon-gw's Bash(%s:*) matches %s alone or followed by a space, and no command with ; | & ` $ > < ( )", pattern, p, p)
		case strings.HasSuffix(pattern, "*"):
			p := strings.TrimSpace(strings.TrimSuffix(pattern, "*"))
			return "Bash(" + p + ":*)", fmt.Sprintf("Claude Code's %q matches any command starting with %q; aimon-gw's Bash(%s:*) needs a word boundary after it (not %sx)", pattern, p, p, p)
		}
		return rule, ""
	case "Read", "Write", "Edit", "MultiEdit", "NotebookEdit", "Grep", "Glob":
		switch {
		case strings.HasPrefix(pattern, "//"):
			return name + "(" + pattern[1:] + ")", "Claude Code's // means an absolute path"
		case strings.HasPrefix(pattern, "~/"):
			return name + "(" + filepath.Join(home, pattern[2:]) + ")", fmt.Sprintf("~ is the home directory of the user who imported it (%s), fixed here", home)
		case strings.HasPrefix(pattern, "/"):
			return name + "(" + filepath.Join(project, pattern[1:]) + ")", fmt.Sprintf("Claude Code's /path is relative to the project (%s), fixed here", project)
		case strings.HasPrefix(pattern, "./"), pattern == ".":
			return rule, ""
		default:
			return name + "(./" + pattern + ")", "a path relative to the project; ./ resolves against the hook input's cwd"
		}
	}
	return rule, ""
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
