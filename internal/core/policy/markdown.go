package policy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueyaml "cuelang.org/go/encoding/yaml"
)

// Surfaces from the markdown files agents already have (the layouts of
// the design guide and of Claude Code): agent.md for the main agent,
// agents/*.md for subagents, skills/*/SKILL.md for skills and
// commands/*.md for commands, each with its allowed-tools in YAML front
// matter. A surface's name is its name: key, or its file's (skill: its
// directory's) name.

// mdList is one markdown file's lists: its allowed-tools when allow is
// set, and its denied-tools and ask-tools (rule P14).
type mdList struct {
	ref       string
	file      string
	allow     bool
	entries   []string
	pos       []Position
	deny, ask []string
	denyPos   []Position
	askPos    []Position
}

// markdownSurfaces reads the surfaces of each directory; a front matter
// that cannot be read, or a key that is a near miss of allowed-tools, is an
// error at its place (rule P8: never silently ignored).
func (c *compiler) markdownSurfaces(dirs []string) ([]mdList, []string) {
	var out []mdList
	var abs []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(c.dir, d)
		}
		d = filepath.Clean(d)
		abs = append(abs, d)
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			c.errs = append(c.errs, Diagnostic{Pos: dirPos(relative(d)), Code: "P8", Message: fmt.Sprintf("surfaces.from names %s, which is not a directory; give the directory that holds agent.md, agents/, skills/ and commands/.", relative(d))})
			continue
		}
		add := func(kind, file, name string) {
			if l, ok := c.markdownFile(kind, file, name); ok {
				out = append(out, l)
			}
		}
		if _, err := os.Stat(filepath.Join(d, "agent.md")); err == nil {
			add("agent", filepath.Join(d, "agent.md"), "")
		}
		glob := func(kind, pattern string, name func(string) string) {
			files, _ := filepath.Glob(filepath.Join(d, pattern))
			sort.Strings(files)
			for _, f := range files {
				add(kind, f, name(f))
			}
		}
		base := func(f string) string { return strings.TrimSuffix(filepath.Base(f), ".md") }
		glob("subagent", "agents/*.md", base)
		glob("skill", "skills/*/SKILL.md", func(f string) string { return filepath.Base(filepath.Dir(f)) })
		glob("command", "commands/*.md", base)
	}
	return out, abs
}

// markdownFile reads one file's front matter.
func (c *compiler) markdownFile(kind, file, name string) (mdList, bool) {
	l := mdList{file: file}
	data, err := os.ReadFile(file)
	if err != nil {
		c.errs = append(c.errs, Diagnostic{Pos: dirPos(relative(file)), Code: "P8", Message: fmt.Sprintf("cannot read %s: %v.", relative(file), err)})
		return l, false
	}
	fm, ok := frontMatter(data)
	if !ok {
		return l, false // no front matter: the file declares no list
	}
	f, err := cueyaml.Extract(file, fm)
	if err != nil {
		c.errs = append(c.errs, dataError(file, err, c.schemaDir)...)
		return l, false
	}
	v := cuecontext.New().BuildFile(f)
	if err := v.Err(); err != nil {
		c.errs = append(c.errs, fromCUE(err, c.schemaDir)...)
		return l, false
	}
	if n := v.LookupPath(cue.ParsePath("name")); n.Exists() {
		if s, err := n.String(); err == nil && s != "" {
			name = s
		}
	}
	l.ref = kind
	if kind != "agent" {
		l.ref = kind + ":" + name
	}
	found := false
	iter, _ := v.Fields()
	for iter.Next() {
		key := iter.Selector().Unquoted()
		switch {
		case key == "allowed-tools" || key == "tools" && kind == "subagent":
			found, l.allow = true, true
			l.entries, l.pos = c.mdEntries(l.ref, key, iter.Value(), l.entries, l.pos)
		case key == "denied-tools" || key == "disallowed-tools":
			// disallowed-tools is Claude Code's name for the same list.
			found = true
			l.deny, l.denyPos = c.mdEntries(l.ref, key, iter.Value(), l.deny, l.denyPos)
		case key == "ask-tools":
			found = true
			l.ask, l.askPos = c.mdEntries(l.ref, key, iter.Value(), l.ask, l.askPos)
		default:
			if want := nearListKey(key); want != "" {
				c.errs = append(c.errs, Diagnostic{Pos: position(iter.Value().Pos()), Code: "P8", Message: fmt.Sprintf(
					"%s: front matter key %q is not %s; write %s (it is never read as anything else).", l.ref, key, want, want)})
				return l, false
			}
		}
	}
	return l, found
}

// mdEntries reads a list, appending it to entries and pos: a YAML list, or
// one string of entries separated by spaces (Agent Skills) or, for Claude
// Code's tools: and disallowed-tools: keys, commas.
func (c *compiler) mdEntries(ref, key string, v cue.Value, entries []string, pos []Position) ([]string, []Position) {
	if iter, err := v.List(); err == nil {
		for iter.Next() {
			s, err := iter.Value().String()
			if err != nil {
				c.errs = append(c.errs, Diagnostic{Pos: position(iter.Value().Pos()), Code: "P8", Message: fmt.Sprintf("%s: every %s entry must be a string.", ref, key)})
				continue
			}
			entries = append(entries, s)
			pos = append(pos, position(iter.Value().Pos()))
		}
		return entries, pos
	}
	s, err := v.String()
	if err != nil {
		c.errs = append(c.errs, Diagnostic{Pos: position(v.Pos()), Code: "P8", Message: fmt.Sprintf("%s: %s must be a list of entries or one string of them.", ref, key)})
		return entries, pos
	}
	sep := func(r rune) bool { return r == ' ' || r == '\t' }
	if key == "tools" || key == "disallowed-tools" {
		sep = func(r rune) bool { return r == ',' }
	}
	for _, e := range splitEntries(s, sep) {
		entries = append(entries, e)
		pos = append(pos, position(v.Pos()))
	}
	return entries, pos
}

// splitEntries splits a string of entries at sep outside parentheses, so
// that Bash(git add:*) stays one entry.
func splitEntries(s string, sep func(rune) bool) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && sep(r):
			if e := strings.TrimSpace(s[start:i]); e != "" {
				out = append(out, e)
			}
			start = i + len(string(r))
		}
	}
	if e := strings.TrimSpace(s[start:]); e != "" {
		out = append(out, e)
	}
	return out
}

// nearListKey returns the list key that key is a near miss of, another
// spelling (allowedTools, allowed_tools, Allowed-Tools, disallowedTools),
// or "" for none.
func nearListKey(key string) string {
	norm := strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(key))
	for _, want := range []string{"allowed-tools", "denied-tools", "disallowed-tools", "ask-tools"} {
		if key != want && norm == strings.ReplaceAll(want, "-", "") {
			return want
		}
	}
	return ""
}

// frontMatter is a file's YAML front matter, with the lines before it kept
// as blank lines so that positions are the file's own.
func frontMatter(data []byte) ([]byte, bool) {
	if !bytes.HasPrefix(data, []byte("---\n")) && !bytes.HasPrefix(data, []byte("---\r\n")) {
		return nil, false
	}
	rest := data[bytes.IndexByte(data, '\n')+1:]
	end := -1
	for off := 0; off < len(rest); {
		nl := bytes.IndexByte(rest[off:], '\n')
		line := rest[off:]
		if nl >= 0 {
			line = rest[off : off+nl]
		}
		if strings.TrimRight(string(line), "\r") == "---" {
			end = off
			break
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
	if end < 0 {
		return nil, false
	}
	return append([]byte("\n"), rest[:end]...), true
}

// mergeMarkdown adds the markdown lists to the surfaces: a surface declared
// in CUE too is bound by both lists.
func (c *compiler) mergeMarkdown(g *Generation, lists []mdList) {
	for _, l := range lists {
		s := g.Surfaces[l.ref]
		if s == nil {
			s = &Surface{Ref: l.ref}
			g.Surfaces[l.ref] = s
		}
		s.Denied, s.DeniedPos = append(s.Denied, l.deny...), append(s.DeniedPos, l.denyPos...)
		s.Asked, s.AskedPos = append(s.Asked, l.ask...), append(s.AskedPos, l.askPos...)
		if !l.allow {
			if len(l.deny)+len(l.ask) > 0 {
				s.RuleFiles = append(s.RuleFiles, relative(l.file))
			}
			continue
		}
		if s.Declared && len(s.Sources) == 0 {
			s.Sources = []Source{{Start: 0, End: len(s.Entries)}}
		}
		s.Declared = true
		start := len(s.Entries)
		s.Entries = append(s.Entries, l.entries...)
		s.EntryPos = append(s.EntryPos, l.pos...)
		s.Sources = append(s.Sources, Source{Start: start, End: len(s.Entries), File: relative(l.file)})
	}
}
