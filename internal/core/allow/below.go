package allow

import (
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// MayAllowBelow reports whether the tool's allow entries along the chain
// may admit some path strictly below dir (absolute, clean), so that a
// search need not read a directory where every file would be refused
// (rule R6). It is false only when some level that narrows the tool has no
// absolute path pattern that can match below dir, segment by segment; a
// pattern it cannot read so (a backslash escape, a working-directory one, a
// tool's own rule) counts as matching. Deny and ask entries never make it
// false: they prune nothing an allow entry reaches.
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
// them; a ** segment may match anything from there on.
func patternMayMatchBelow(p string, dsegs []string) bool {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		return true
	}
	psegs := segments(p)
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

// segments splits an absolute path into its names; "/" has none.
func segments(p string) []string {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}
