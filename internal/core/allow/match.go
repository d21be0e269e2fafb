package allow

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

// matcher is the compiled constraint of one entry on a subject. It is built
// from the pattern by the same translation as the entry's CUE alternative
// (commandAlt, globRegexp, domainRegexp); a differential test holds a
// chain's decisions to the unification of its lists' CUE values.
type matcher interface{ match(s string) bool }

type (
	// exactly matches one string: a command without :*, a path pattern
	// without a glob character.
	exactly string
	// wordPrefix matches a command pattern P:*: P itself, or P and a space.
	wordPrefix string
	// dirTree matches a path pattern D/**: D and everything below it.
	dirTree string
	reMatch struct{ re *regexp.Regexp }
)

func (m exactly) match(s string) bool { return string(m) == s }
func (m wordPrefix) match(s string) bool {
	return s == string(m) || len(s) > len(m) && s[len(m)] == ' ' && strings.HasPrefix(s, string(m))
}
func (m dirTree) match(s string) bool {
	return s == string(m) || len(s) > len(m) && s[len(m)] == '/' && strings.HasPrefix(s, string(m))
}
func (m reMatch) match(s string) bool { return m.re.MatchString(s) }

// toolEntries are one list's entries for one tool, indexed so that a
// decision looks only at the entries that can match its subject: command
// patterns by their first word, path patterns by their literal directory.
type toolEntries struct {
	infos     []entryInfo
	patterned bool     // some entry has a pattern: the list narrows the tool (P6)
	bad       []string // the errors of its patterns that cannot be used (P7)
	valid     bool     // some pattern can be used
	kind      Kind
	byKey     map[string][]int // entry indexes by first word or literal directory
	rest      []int            // entries with a matcher that no key narrows
	rules     []int            // entries whose pattern the tool's own rule reads
	npatterns int              // entries with a pattern, usable or not

	nearOnce sync.Once  // near is built by the first refusal that needs it
	near     *nearIndex // the patterns in sorted order (closest)
}

func (te *toolEntries) index(k Kind) {
	te.kind = k
	for i, in := range te.infos {
		if !in.HasPattern {
			continue
		}
		te.patterned = true
		te.npatterns++
		if in.err != nil {
			te.bad = append(te.bad, in.err.Error())
			continue
		}
		te.valid = true
		if in.rule {
			te.rules = append(te.rules, i)
		}
		if in.m == nil {
			continue
		}
		key, ok := "", false
		switch k {
		case Command:
			c := cmdPatternOf(in.Pattern)
			te.infos[i].cmd, ok = c, true
			if len(c.words) > 0 {
				key = c.words[0] // as deny's readings split it
			}
		case Path:
			key, ok = LiteralDir(in.Pattern), true
		}
		if !ok {
			te.rest = append(te.rest, i)
			continue
		}
		if te.byKey == nil {
			te.byKey = map[string][]int{}
		}
		te.byKey[key] = append(te.byKey[key], i)
	}
}

// commandCandidates appends the indexes of the command entries whose
// first word words may start with: all when its first word is wild.
func (te *toolEntries) commandCandidates(words []shellWord, out []int) []int {
	switch {
	case len(words) == 0:
		return out
	case words[0].wild:
		for i := range te.infos {
			out = append(out, i)
		}
		return out
	}
	return append(out, te.byKey[words[0].text]...)
}

// firstWord is a command up to its first space: a pattern's first word is
// its command's, for every command the pattern matches (rule P3).
func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// candidates appends the indexes of the entries that may match subj, in
// the order of the list.
func (te *toolEntries) candidates(subj string, out []int) []int {
	n := len(out)
	switch te.kind {
	case Command:
		out = append(out, te.byKey[firstWord(subj)]...)
	case Path:
		// Every directory the subject lies in, itself included (under).
		out = append(out, te.byKey["/"]...)
		for i := 2; i <= len(subj); i++ {
			if i == len(subj) || subj[i] == '/' {
				out = append(out, te.byKey[subj[:i]]...)
			}
		}
	}
	out = append(out, te.rest...)
	slices.Sort(out[n:])
	return out
}

// matches appends the entries of the list that admit subj, in order; ok is
// false when the list narrows the tool and none does. A list without a
// pattern for the tool admits it by its name-only entries (P6).
func (te *toolEntries) matches(subj string, out []string) ([]string, bool) {
	if !te.patterned {
		for _, in := range te.infos {
			out = append(out, in.Raw)
		}
		return out, true
	}
	if te.kind == Command && hasCommandMeta(subj) {
		return out, false // rule P3
	}
	var buf [16]int
	n := len(out)
	for _, i := range te.candidates(subj, buf[:0]) {
		if in := &te.infos[i]; in.m.match(subj) {
			out = append(out, in.Raw)
		}
	}
	return out, len(out) > n
}
