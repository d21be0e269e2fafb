// Package importkit writes the policy an importer made of an agent
// runtime's own permission rules (aimon-gw import codex, import
// gemini-cli): the surface's allowed-tools, ask-tools and denied-tools,
// each entry with the note that says where it came from, and the rules
// it could not keep exactly (Lossy), each then made stricter, never looser.
package importkit

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"aimon.dev/gw/internal/core/allow"
)

// Kind is which list an entry goes to.
type Kind int

const (
	Allow Kind = iota
	Ask
	Deny
)

func (k Kind) String() string { return [...]string{"allow", "ask", "deny"}[k] }

// An Imported policy is the CUE source of a policy, the notes on what was
// translated, one sentence each, and the rules it could not keep exactly.
type Imported struct {
	Source string
	Notes  []string
	Lossy  []string
}

type line struct{ entry, comment string }

// Builder gathers a policy's entries.
type Builder struct {
	// Runtime is the importer's name (codex), Schema the package of the
	// runtime's tools (codex for aimon.dev/gw/schema/codex).
	Runtime, Schema string
	// Files are the files imported, for the header.
	Files []string
	// Tools is the value of tools (codex.#Tools & {…}), ToolsNote its comment.
	Tools, ToolsNote string
	// Preamble is CUE written after tools, before the lists.
	Preamble string
	// Shell is the runtime's shell tool, whose patterns are commands;
	// Kind, when set, is the kind of each tool's patterns instead.
	Shell string
	Kind  func(tool string) allow.Kind
	// AskAdmitted lists each ask entry in allowed-tools too, so that the
	// call is asked rather than refused; OmitAllow writes no
	// allowed-tools (a policy that lifts the lists).
	AskAdmitted, OmitAllow bool
	// Unknown is claudeCode: unknownTools, the answer to a tool the policy
	// does not mention; UnknownNote says why.
	Unknown, UnknownNote string
	lists                map[Kind][]line
	im                   Imported
}

// Note keeps a note and returns it, for an entry's comment.
func (b *Builder) Note(format string, args ...any) string {
	n := fmt.Sprintf(format, args...)
	b.im.Notes = append(b.im.Notes, n)
	return n
}

// Lose records a rule that cannot be kept exactly and returns the note
// that says so (what was written instead, stricter).
func (b *Builder) Lose(format string, args ...any) string {
	n := fmt.Sprintf(format, args...)
	b.im.Lossy = append(b.im.Lossy, n)
	return b.Note("%s", n)
}

// Put adds an entry to a list once, with its comment; an entry "" is a
// comment alone.
func (b *Builder) Put(k Kind, entry, comment string) {
	if b.lists == nil {
		b.lists = map[Kind][]line{}
	}
	if entry != "" && slices.ContainsFunc(b.lists[k], func(l line) bool { return l.entry == entry }) {
		return
	}
	b.lists[k] = append(b.lists[k], line{entry, comment})
}

// Has reports whether a list holds the entry.
func (b *Builder) Has(k Kind, entry string) bool {
	return slices.ContainsFunc(b.lists[k], func(l line) bool { return l.entry == entry })
}

// Entries are the entries of a list, in order.
func (b *Builder) Entries(k Kind) []string {
	var out []string
	for _, l := range b.lists[k] {
		if l.entry != "" {
			out = append(out, l.entry)
		}
	}
	return out
}

// Drop removes the entries of a list for which gone is true, leaving the
// comment given in their place.
func (b *Builder) Drop(k Kind, gone func(entry string) (comment string, drop bool)) {
	for i, l := range b.lists[k] {
		if l.entry == "" {
			continue
		}
		if c, drop := gone(l.entry); drop {
			b.lists[k][i] = line{"", c}
		}
	}
}

// Result writes the policy. The allowed-tools list is always written, so
// that a policy whose rules allow nothing allows nothing (a surface
// without a list would be unlimited, rule P11).
func (b *Builder) Result() *Imported {
	// An ask entry asks only for a call the allowed-tools admit; a call
	// the runtime asks for is admitted, then asked.
	first := true
	for _, e := range b.Entries(Ask) {
		if !b.AskAdmitted {
			break
		}
		if b.Has(Allow, e) {
			continue
		}
		c := ""
		if first {
			c, first = b.Note("%s and the entries after it are asked (ask-tools): listed here so that they are asked, not refused.", strconv.Quote(e)), false
		}
		b.Put(Allow, e, c)
	}
	var denies []allow.Entry
	for _, e := range b.Entries(Deny) {
		if d, err := allow.ParseEntry(e); err == nil {
			denies = append(denies, d)
		}
	}
	kind := func(tool string) allow.Kind {
		switch {
		case b.Kind != nil:
			return b.Kind(tool)
		case tool == b.Shell:
			return allow.Command
		}
		return allow.None
	}
	coveredBy := func(entry string) string {
		a, err := allow.ParseEntry(entry)
		if err != nil {
			return ""
		}
		for _, d := range denies {
			if allow.Covers(kind(a.Tool), d, a) {
				return d.Raw
			}
		}
		return ""
	}
	files := make([]string, len(b.Files))
	for i, f := range b.Files {
		files[i] = filepath.Base(f)
	}
	var s strings.Builder
	fmt.Fprintf(&s, "// Imported from %s by aimon-gw import %s; review it, then vet it.\npackage policy\n\nimport \"aimon.dev/gw/schema/%s\"\n\n",
		strings.Join(files, ", "), b.Runtime, b.Schema)
	if b.ToolsNote != "" {
		fmt.Fprintf(&s, "// %s\n", b.ToolsNote)
	}
	fmt.Fprintf(&s, "tools: %s\n%s", b.Tools, b.Preamble)
	for _, k := range []Kind{Allow, Ask, Deny} {
		key := [...]string{"allowed-tools", "ask-tools", "denied-tools"}[k]
		if k != Allow && len(b.lists[k]) == 0 || k == Allow && b.OmitAllow {
			continue
		}
		fmt.Fprintf(&s, "\nagent: %q: [\n", key)
		// A name-only entry allows every call of its tool; beside it a
		// pattern entry of the tool would narrow it (rule P6).
		whole := map[string]bool{}
		for _, l := range b.lists[k] {
			if l.entry != "" && !strings.Contains(l.entry, "(") {
				whole[l.entry] = true
			}
		}
		for _, l := range b.lists[k] {
			by := ""
			if k == Allow {
				by = coveredBy(l.entry)
			}
			name, _, patterned := strings.Cut(l.entry, "(")
			switch {
			case l.entry == "":
				fmt.Fprintf(&s, "\t// %s\n", l.comment)
			case by != "":
				fmt.Fprintf(&s, "\t// %s\n", b.Note("%s is left out: the deny entry %s denies every call it allows.", strconv.Quote(l.entry), strconv.Quote(by)))
			case k == Allow && patterned && whole[name]:
				fmt.Fprintf(&s, "\t// %s\n", b.Note("%s is left out: %q allows every call of %s.", strconv.Quote(l.entry), name, name))
			case l.comment != "":
				fmt.Fprintf(&s, "\t%s, // %s\n", strconv.Quote(l.entry), l.comment)
			default:
				fmt.Fprintf(&s, "\t%s,\n", strconv.Quote(l.entry))
			}
		}
		s.WriteString("]\n")
	}
	fmt.Fprintf(&s, "\n// %s\nclaudeCode: unknownTools: %q\n", b.UnknownNote, b.Unknown)
	b.im.Source = s.String()
	return &b.im
}

// Quoted is a CUE list of strings.
func Quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Files are the files an argument names: a file as it is, and a
// directory as the runtime reads one: its settings file (config.toml,
// settings.json) and the rules files its glob finds (rules/*.rules), or,
// for a directory of rules itself (dir named as the glob's directory),
// those directly in it.
func Files(arg, settings, glob string) ([]string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{arg}, nil
	}
	var files []string
	if _, err := os.Stat(filepath.Join(arg, settings)); err == nil {
		files = append(files, filepath.Join(arg, settings))
	}
	if filepath.Base(filepath.Clean(arg)) == filepath.Dir(glob) {
		glob = filepath.Base(glob)
	}
	rules, _ := filepath.Glob(filepath.Join(arg, glob))
	slices.Sort(rules)
	files = append(files, rules...)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds neither a %s nor %s", arg, settings, glob)
	}
	return files, nil
}
