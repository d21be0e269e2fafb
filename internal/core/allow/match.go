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
	// minDir and maxDir bound the lengths of the literal directories
	// other than "/": a subject's shorter or longer prefixes are none.
	minDir, maxDir int
	// A command's entries again, by first word: those of one word, and
	// the others by their first two (git push), so that a command whose
	// first word many entries share is read against those it may run.
	oneWord   map[string][]int
	twoWords  map[[2]string][]int
	rest      []int // entries with a matcher that no key narrows
	rules     []int // entries whose pattern the tool's own rule reads
	npatterns int   // entries with a pattern, usable or not

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
				te.indexWords(in.Pattern, c.words, i)
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
		if k == Path && key != "/" {
			if te.minDir == 0 || len(key) < te.minDir {
				te.minDir = len(key)
			}
			te.maxDir = max(te.maxDir, len(key))
		}
	}
}

// fewEntries is how many entries of one first word are read without the
// index by two words; a test reads them all.
var fewEntries = 8

// indexWords files command entry i, of pattern and its words, by its
// first two words, or by its first alone when it has one or is spelt with
// other spaces than one between words (its matcher reads the spelling).
func (te *toolEntries) indexWords(pattern string, words []string, i int) {
	if te.oneWord == nil {
		te.oneWord, te.twoWords = map[string][]int{}, map[[2]string][]int{}
	}
	prefix, _ := strings.CutSuffix(pattern, ":*")
	if len(words) == 1 || prefix != strings.Join(words, " ") {
		te.oneWord[words[0]] = append(te.oneWord[words[0]], i)
		return
	}
	k := [2]string{words[0], words[1]}
	te.twoWords[k] = append(te.twoWords[k], i)
}

// byWords appends, in the order of the list, the command entries of
// first word first that a command may match whose second word is one of
// seconds: those of one word, and those of two or more whose second is.
func (te *toolEntries) byWords(first string, seconds []string, out []int) []int {
	n := len(out)
	out = append(out, te.oneWord[first]...)
	for _, s := range seconds {
		out = append(out, te.twoWords[[2]string{first, s}]...)
	}
	slices.Sort(out[n:])
	return out[:n+len(slices.Compact(out[n:]))]
}

// commandCandidates appends, in the order of the list, the indexes of the
// command entries that words may run (mayRun, mayRunAfterOptions): those
// of their first word, all when it is wild. An entry of two words or more
// needs its second among the later words, unless one of them is wild.
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
	first := words[0].text
	all := te.byKey[first]
	if len(all) <= fewEntries {
		return append(out, all...)
	}
	for _, w := range words[1:] {
		if w.wild || w.any {
			return append(out, all...)
		}
	}
	var few [16]string
	seconds := few[:0]
	for _, w := range words[1:] {
		seconds = append(seconds, w.text)
	}
	return te.byWords(first, seconds, out)
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
		// A pattern's words match the command's as spelt (exactly,
		// wordPrefix): its second word is the command's second.
		first, rest, _ := strings.Cut(subj, " ")
		if all := te.byKey[first]; len(all) <= fewEntries {
			out = append(out, all...)
		} else {
			second := [1]string{firstWord(rest)}
			out = te.byWords(first, second[:], out)
		}
	case Path:
		// Every directory the subject lies in, itself included (under).
		out = append(out, te.byKey["/"]...)
		for i := max(2, te.minDir); i <= min(len(subj), te.maxDir); i++ {
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
