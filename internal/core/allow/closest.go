package allow

import (
	"math/bits"
	"slices"
	"strings"
)

// closest appends to dst at most n of the level's pattern entries, those
// whose pattern shares the longest prefix with subj (the earlier first
// among equals), in their order, and returns how many it left out. A level
// with more than n patterns is searched through its patterns in sorted
// order, so a refusal under a long list costs about the same as under a
// short one.
func (te *toolEntries) closest(subj string, n int, dst []string) ([]string, int) {
	total := te.npatterns
	if total <= n {
		for _, in := range te.infos {
			if in.HasPattern {
				dst = append(dst, in.Raw)
			}
		}
		return dst, 0
	}
	te.nearOnce.Do(te.buildNear)
	var buf [maxShown]int
	picked := te.near.closest(te.infos, subj, n, buf[:0])
	slices.Sort(picked)
	for _, i := range picked {
		dst = append(dst, te.infos[i].Raw)
	}
	return dst, total - len(picked)
}

// nearIndex orders one level's pattern entries by pattern. Those sharing
// a prefix with a subject lie next to one another and next to where the
// subject sorts: the longer the prefix shared, the nearer (so a tier of
// equally close entries is a range on each side). Among a tier too large
// to name whole, the earliest in the list are found with a sparse table of
// range minima.
type nearIndex struct {
	sorted []int32   // indexes into infos of the pattern entries, by pattern, then index
	rank   []int32   // rank[i]: where infos[i] lies in sorted; -1 for name-only entries
	mins   [][]int32 // mins[j][k]: the least of sorted[k : k+2^j]
}

func (te *toolEntries) buildNear() {
	ix := &nearIndex{rank: make([]int32, len(te.infos))}
	for i, in := range te.infos {
		ix.rank[i] = -1
		if in.HasPattern {
			ix.sorted = append(ix.sorted, int32(i))
		}
	}
	slices.SortStableFunc(ix.sorted, func(a, b int32) int {
		return strings.Compare(te.infos[a].Pattern, te.infos[b].Pattern)
	})
	for k, i := range ix.sorted {
		ix.rank[i] = int32(k)
	}
	ix.mins = [][]int32{ix.sorted}
	for w := 1; 2*w <= len(ix.sorted); w *= 2 {
		prev := ix.mins[len(ix.mins)-1]
		next := make([]int32, len(prev)-w)
		for k := range next {
			next[k] = min(prev[k], prev[k+w])
		}
		ix.mins = append(ix.mins, next)
	}
	te.near = ix
}

// least is the earliest entry of sorted[lo:hi], which is not empty.
func (ix *nearIndex) least(lo, hi int) int32 {
	j := bits.Len(uint(hi-lo)) - 1
	return min(ix.mins[j][lo], ix.mins[j][hi-(1<<j)])
}

// closest appends to out the indexes of the n entries closest to subj,
// unsorted; there are more than n. It allocates nothing beyond out.
func (ix *nearIndex) closest(infos []entryInfo, subj string, n int, out []int) []int {
	shared := func(k int) int {
		p := infos[ix.sorted[k]].Pattern
		l := 0
		for l < len(p) && l < len(subj) && p[l] == subj[l] {
			l++
		}
		return l
	}
	size := len(ix.sorted)
	// [lo, hi) are the entries taken so far, whole tiers; before pos the
	// patterns sort below subj, and the prefix they share with it shrinks
	// going left; from pos on, going right.
	pos, _ := slices.BinarySearchFunc(ix.sorted, subj, func(i int32, s string) int { return strings.Compare(infos[i].Pattern, s) })
	lo, hi := pos, pos
	start := len(out)
	for len(out)-start < n && (lo > 0 || hi < size) {
		level := -1
		if lo > 0 {
			level = shared(lo - 1)
		}
		if hi < size {
			level = max(level, shared(hi))
		}
		// The next tier: every entry outside [lo, hi) sharing level bytes,
		// nlo the first on the left (shared grows going right there) and
		// nhi the first past it on the right.
		nlo, nhi := lo, hi
		for a, b := 0, lo; a < b; {
			if m := int(uint(a+b) >> 1); shared(m) >= level {
				b, nlo = m, m
			} else {
				a = m + 1
			}
		}
		for a, b := hi, size; a < b; {
			if m := int(uint(a+b) >> 1); shared(m) < level {
				b = m
			} else {
				a, nhi = m+1, m+1
			}
		}
		if len(out)-start+(lo-nlo)+(nhi-hi) <= n {
			for k := nlo; k < lo; k++ {
				out = append(out, int(ix.sorted[k]))
			}
			for k := hi; k < nhi; k++ {
				out = append(out, int(ix.sorted[k]))
			}
		} else {
			out = ix.earliest(span{nlo, lo}, span{hi, nhi}, n-(len(out)-start), out)
		}
		lo, hi = nlo, nhi
	}
	return out
}

// span is a range [lo, hi) of sorted.
type span struct{ lo, hi int }

// earliest appends the m earliest entries of two spans of sorted, which
// hold more than m, taking the least of a span and splitting it around it.
// The spans live in an array on the stack: each pick takes one and leaves
// at most two.
func (ix *nearIndex) earliest(a, b span, m int, out []int) []int {
	var buf [2 * (maxShown + 1)]span
	spans := buf[:0]
	if m > maxShown {
		spans = make([]span, 0, 2*m+2)
	}
	for _, s := range [2]span{a, b} {
		if s.lo < s.hi {
			spans = append(spans, s)
		}
	}
	for ; m > 0 && len(spans) > 0; m-- {
		best, bi := 0, ix.least(spans[0].lo, spans[0].hi)
		for j := 1; j < len(spans); j++ {
			if i := ix.least(spans[j].lo, spans[j].hi); i < bi {
				best, bi = j, i
			}
		}
		s := spans[best]
		out = append(out, int(bi))
		r := int(ix.rank[bi])
		spans[best] = spans[len(spans)-1]
		spans = spans[:len(spans)-1]
		if s.lo < r {
			spans = append(spans, span{s.lo, r})
		}
		if r+1 < s.hi {
			spans = append(spans, span{r + 1, s.hi})
		}
	}
	return out
}
