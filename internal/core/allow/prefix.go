package allow

import (
	"path"
	"strings"
)

// Prefixes returns the directories under which the tool's path patterns
// along the chain allow anything at all: each level's literal directory
// prefixes ("/srv/repo/docs" for "/srv/repo/docs/**"), intersected level by
// level (rule R6: a sandbox's writable set derives from them). all is true
// when the chain leaves the tool unlimited (name-only everywhere, or no list
// limits the chain); with neither dirs nor all, the tool allows nothing.
func (e *Effective) Prefixes(tool string) (dirs []string, all bool) {
	if e.deniedWhole(tool) != nil {
		return nil, false // P14
	}
	if e.allowAll() {
		return nil, true
	}
	r, ok := e.rules[tool]
	if !ok || r.subject.Kind != Path {
		return nil, false
	}
	if r.top {
		return nil, true
	}
	var cur []string // nil: unlimited so far
	limited := false
	for _, lv := range r.levels {
		var mine []string
		patterned := false
		for _, in := range lv.infos {
			if !in.HasPattern {
				continue
			}
			patterned = true
			if in.err == nil {
				mine = append(mine, LiteralDir(in.Pattern))
			}
		}
		if !patterned {
			continue // name-only at this level: it does not narrow
		}
		if !limited {
			cur, limited = mine, true
			continue
		}
		cur = meetDirs(cur, mine)
	}
	if !limited {
		return nil, true
	}
	return dedupDirs(cur), false
}

// LiteralDir is the directory part of a path pattern before its first
// segment with a glob character: everything the pattern can match lies
// below it. A pattern without one is its own parent's file or directory:
// its directory is the pattern itself when it may be a directory, so the
// pattern is returned whole.
func LiteralDir(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if strings.ContainsAny(s, "*?[{\\") {
			d := strings.Join(segs[:i], "/")
			if d == "" {
				return "/"
			}
			return path.Clean(d)
		}
	}
	return path.Clean(p)
}

// under reports whether p is d or lies below it.
func under(p, d string) bool {
	return d == "/" || p == d || strings.HasPrefix(p, d+"/")
}

// meetDirs is the intersection of two sets of directory trees: the deeper
// of each pair where one lies below the other.
func meetDirs(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			switch {
			case under(x, y):
				out = append(out, x)
			case under(y, x):
				out = append(out, y)
			}
		}
	}
	return out
}

// dedupDirs drops directories that lie below another in the set.
func dedupDirs(ds []string) []string {
	var out []string
	for _, d := range ds {
		covered := false
		for _, o := range ds {
			if o != d && under(d, o) {
				covered = true
				break
			}
		}
		if !covered && !contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Withheld is the literal directories (or files) of the tool's deny and ask
// pattern entries along the chain: what a command that writes without
// asking must not write, since the tool may not write there without a
// refusal or a person's approval (rule P14). A pattern that cannot be used
// withholds "/" (fail closed).
func (e *Effective) Withheld(tool string) []string {
	if e == nil {
		return nil
	}
	var out []string
	for _, lists := range [][]*toolEntries{e.deny[tool], e.ask[tool]} {
		for _, te := range lists {
			for _, in := range te.infos {
				switch {
				case !in.HasPattern:
				case in.err != nil:
					out = append(out, "/")
				default:
					out = append(out, LiteralDir(in.Pattern))
				}
			}
		}
	}
	return dedupDirs(out)
}

// Withholds reports whether a deny or ask entry of the path tool admits
// the path p (rule P17): a file a command must not read where no mount
// can hide it by its entry's literal directory.
func (e *Effective) Withholds(tool, p, workdir string) bool {
	if e == nil || len(e.deny[tool]) == 0 && len(e.ask[tool]) == 0 || e.subjects[tool].Kind != Path {
		return false
	}
	m := e.matcherOf(tool, map[string]any{e.subjects[tool].Field: p}, nil, workdir)
	return m.why == "" && (len(m.matching(e.deny[tool])) > 0 || len(m.matching(e.ask[tool])) > 0)
}
