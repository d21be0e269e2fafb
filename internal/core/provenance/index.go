// Package provenance finds where a value came from (rule P18): the texts a
// session has seen (the user's words, the results of its calls), each
// normalised and indexed, are searched for an argument's value as an
// exact or a normalised substring.
//
// The index is the standard library's index/suffixarray: a substring
// query is two binary searches over the suffixes, O(len(value) log n),
// whatever the value, with no false positive (rolling hashes have them)
// and no hand-written automaton to keep. A suffix array cannot grow, so
// the texts are indexed in runs that merge as a binary counter does (a
// run is rebuilt with its equal-sized neighbour), and the newest texts,
// under pendingBytes, are scanned directly: adding a result costs its
// share of O(n log n) over the session, and a query looks at O(log n)
// runs.
package provenance

import (
	"bytes"
	"index/suffixarray"
	"sort"
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// pendingBytes is how many of the newest bytes are scanned rather than
// indexed: bytes.Index over 32 KiB takes a few microseconds.
const pendingBytes = 32 << 10

// sep ends each text in the index; Normal removes every control character,
// so no normalised value holds one and no match spans two texts.
const sep = 0

// An Index holds texts, each with a reference the caller gives it, and
// says which text a value occurs in. Safe for concurrent use.
type Index struct {
	mu   sync.RWMutex
	data []byte // every text normalised, each followed by sep
	ends []int  // where each text's sep lies in data
	refs []int  // the caller's reference of each text
	runs []run  // consecutive ranges of data, oldest first, each indexed
	done int    // the end of the last run: data[done:] is scanned
	// max bounds data; a text past it is not kept (Full says so).
	max  int
	full bool
}

// A run is data[start:end] and its suffix array.
type run struct {
	start, end int
	sa         *suffixarray.Index
}

// New returns an index that keeps at most max bytes of normalised text.
func New(max int) *Index { return &Index{max: max} }

// Add keeps text with ref; it reports false when the index is full and
// the text was not kept.
func (x *Index) Add(text string, ref int) bool {
	n := Normal(text)
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.data)+len(n)+1 > x.max {
		x.full = true
		return false
	}
	x.data = append(append(x.data, n...), sep)
	x.ends = append(x.ends, len(x.data)-1)
	x.refs = append(x.refs, ref)
	if len(x.data)-x.done >= pendingBytes {
		x.index()
	}
	return true
}

// index makes the pending bytes a run, then merges the newest two runs
// while the older is no larger than the newer (a binary counter).
func (x *Index) index() {
	x.runs = append(x.runs, run{start: x.done, end: len(x.data)})
	for len(x.runs) >= 2 {
		a, b := x.runs[len(x.runs)-2], x.runs[len(x.runs)-1]
		if a.end-a.start > b.end-b.start {
			break
		}
		x.runs = append(x.runs[:len(x.runs)-2], run{start: a.start, end: b.end})
	}
	for i := range x.runs {
		if r := &x.runs[i]; r.sa == nil {
			r.sa = suffixarray.New(x.data[r.start:r.end])
		}
	}
	x.done = len(x.data)
}

// Full reports whether a text was left out because the index was full.
func (x *Index) Full() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.full
}

// Len is how many texts the index holds.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.refs)
}

// Find returns the reference of a text that value occurs in, normalised
// (Normal) as the texts are; false when none holds it. The empty value
// occurs nowhere.
func (x *Index) Find(value string) (int, bool) {
	return x.FindNormal(Normal(value))
}

// FindNormal is Find of a value normalised already.
func (x *Index) FindNormal(n string) (int, bool) {
	if n == "" {
		return 0, false
	}
	q := []byte(n)
	x.mu.RLock()
	defer x.mu.RUnlock()
	// The newest texts first, scanned; then the runs, newest first.
	if i := bytes.Index(x.data[x.done:], q); i >= 0 {
		return x.refAt(x.done + i), true
	}
	for i := len(x.runs) - 1; i >= 0; i-- {
		r := x.runs[i]
		if m := r.sa.Lookup(q, 1); len(m) > 0 {
			return x.refAt(r.start + m[0]), true
		}
	}
	return 0, false
}

// refAt is the reference of the text that data[off] lies in.
func (x *Index) refAt(off int) int {
	return x.refs[sort.SearchInts(x.ends, off)]
}

// Normal is s as the index compares it: compatibility-decomposed and
// recomposed (NFKC: a full-width or ligature letter is its plain one),
// case-folded, and without white space, control or format characters
// (zero-width spaces, direction marks), so that "DE89 3704" and
// "de893704" are one value. It is not a parser: an encoded value (a
// percent-escaped URL, base64) is another value.
func Normal(s string) string {
	if isPlain(s) {
		return s
	}
	s = norm.NFKC.String(cases.Fold().String(s))
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
}

// isPlain reports whether s is normal already: lower-case printable ASCII
// without white space, the common argument.
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}
