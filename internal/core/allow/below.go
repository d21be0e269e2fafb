package allow

import (
	"strings"

	"github.com/bmatcuk/doublestar/v4"
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
		switch {
		case !in.HasPattern || in.err != nil:
			continue // name-only at a narrowing level, or denying (P7): admits nothing
		case in.m == nil:
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
