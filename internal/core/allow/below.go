package allow

import (
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"aimon.dev/gw/internal/core/rule"
)

// MayAllowBelow reports whether the tool's allow entries along the chain
// may admit some path strictly below dir (absolute, clean), so that a
// search need not read a directory where every file would be refused
// (rule R6). It is false only when some level that narrows the tool has no
// absolute path pattern that can match below dir, segment by segment. A
// "./" pattern reaches it absolute (the policy resolves it against the
// working directory, escaped); a backslash escape is read as doublestar
// reads it; what it cannot read so (a pattern not absolute, a malformed
// one, a tool's own rule) counts as matching. Deny and ask entries never
// make it false: they prune nothing an allow entry reaches.
func (e *Effective) MayAllowBelow(tool, dir string) bool {
	if e.allowAll() {
		return true
	}
	r, ok := e.rules[tool]
	if !ok || r.top || r.subject.Kind != Path || r.subject.Rule != nil {
		return true
	}
	dsegs := segments(dir)
	for _, lv := range r.levels {
		if !lv.patterned || lv.mayMatchBelow(dsegs) {
			continue
		}
		return false
	}
	return true
}

// mayMatchBelow reports whether an entry of the level may admit a path
// below the directory of dsegs.
func (te *toolEntries) mayMatchBelow(dsegs []string) bool {
	for _, in := range te.infos {
		if in.HasPattern && in.err == nil && in.mayMatchBelow(dsegs) {
			return true // a name-only entry at a narrowing level, or a denying one (P7), admits nothing
		}
	}
	return false
}

// mayMatchBelow reports whether the entry's pattern may match a path below
// the directory of dsegs; one it cannot read so may.
func (in *entryInfo) mayMatchBelow(dsegs []string) bool {
	if in.m == nil {
		return true
	}
	alts, err := expandBraces(in.Pattern, nil)
	if err != nil {
		return true
	}
	for _, a := range alts {
		if patternMayMatchBelow(a, dsegs) {
			return true
		}
	}
	return false
}

// TreeWithheld returns the entries that withhold from the tool some path
// strictly below dir (absolute, clean): each deny or ask pattern that may
// match there, and the patterns of each level that narrows the tool when
// none of them admits dir's whole tree. A search the gateway does not run
// cannot be kept, file by file, to what the lists admit (Claude Code's
// Grep and Glob), so it may search dir only when this is empty (rules P4,
// P14). id is the rule that withholds (P14 for a deny or ask entry, P4
// for a narrower allow list), and ask is true when only ask entries do,
// so that a person may approve the search. It errs towards withholding:
// what it cannot read may match.
func (e *Effective) TreeWithheld(tool, dir string) (by []string, id rule.ID, ask bool) {
	if e == nil || e.subjects[tool].Kind != Path {
		return nil, "", false
	}
	dsegs := segments(dir)
	below := func(lvs []*toolEntries) []string {
		var out []string
		for _, lv := range lvs {
			for _, in := range lv.infos {
				if in.HasPattern && (in.err != nil || in.mayMatchBelow(dsegs)) {
					out = append(out, in.Raw)
				}
			}
		}
		return out
	}
	denied, asked := below(e.deny[tool]), below(e.ask[tool])
	var narrow []string
	if r, ok := e.rules[tool]; ok && !r.top {
		for _, lv := range r.levels {
			if lv.patterned && !slices.ContainsFunc(lv.infos, func(in entryInfo) bool { return in.coversTree(dir) }) {
				narrow = append(narrow, patterned([]*toolEntries{lv})...)
			}
		}
	}
	switch {
	case denied != nil || asked != nil && narrow != nil:
		return slices.Concat(denied, asked, narrow), rule.P14, false
	case asked != nil:
		return asked, rule.P14, true
	case narrow != nil:
		return narrow, rule.P4, false
	}
	return nil, "", false
}

// coversTree reports whether the entry admits dir and every path below it:
// a pattern X/** (or **) whose X matches dir or a directory dir lies in.
func (in *entryInfo) coversTree(dir string) bool {
	if !in.HasPattern || in.err != nil || in.m == nil {
		return false
	}
	alts, err := expandBraces(in.Pattern, nil)
	if err != nil {
		return false
	}
	for _, a := range alts {
		x, ok := strings.CutSuffix(a, "/**")
		switch {
		case a == "**" || ok && x == "":
			return true
		case !ok:
			continue
		}
		m, _, err := pathMatcher(x)
		if err != nil {
			continue
		}
		for q := dir; ; q = path.Dir(q) {
			if m.match(q) {
				return true
			}
			if q == "/" {
				break
			}
		}
	}
	return false
}

// patternMayMatchBelow reports whether the brace-free pattern p may match
// a path below the directory of dsegs: each of the directory's segments
// matches the pattern's segment in its place, and the pattern goes on past
// them; a ** segment may match anything from there on. A segment is
// matched by doublestar itself, escapes included; one it finds malformed
// counts as matching.
func patternMayMatchBelow(p string, dsegs []string) bool {
	if !strings.HasPrefix(p, "/") {
		return true
	}
	var psegs []string // "/" has none
	if p != "/" {
		psegs = patternSegments(p[1:])
	}
	for i, d := range dsegs {
		if i >= len(psegs) {
			return false
		}
		if strings.Contains(psegs[i], "**") {
			return true
		}
		ok, err := doublestar.Match(psegs[i], d)
		if err != nil {
			return true
		}
		if !ok {
			return false
		}
	}
	return len(psegs) > len(dsegs)
}

// patternSegments splits a pattern (without its leading slash) where
// doublestar's matcher steps from one name to the next: at each "/" that is
// not inside a character class, an escaped "\/" included (it matches the
// separator). An unterminated class runs to the end, a trailing backslash
// stays in its segment: doublestar then finds that segment malformed.
func patternSegments(p string) []string {
	var segs []string
	start := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			if i+1 < len(p) && p[i+1] == '/' {
				segs = append(segs, p[start:i])
				start = i + 2
			}
			i++
		case '[':
			i = skipClass(p, i)
		case '/':
			segs = append(segs, p[start:i])
			start = i + 1
		}
	}
	return append(segs, p[start:])
}

// segments splits an absolute path into its names; "/" has none.
func segments(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// GlobMayMatchBelow reports whether the doublestar pattern may match a
// path strictly below dir, both relative to the same directory ("." for
// it), for a walk that looks ahead only where the pattern leads. Like
// MayAllowBelow it errs only towards true: a pattern it cannot read so
// may match anywhere.
func GlobMayMatchBelow(pattern, dir string) bool {
	alts, err := expandBraces(pattern, nil)
	if err != nil {
		return true
	}
	var dsegs []string
	if dir != "." {
		dsegs = segments("/" + dir)
	}
	for _, a := range alts {
		if patternMayMatchBelow("/"+a, dsegs) {
			return true
		}
	}
	return false
}
