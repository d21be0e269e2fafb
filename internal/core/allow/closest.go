package allow

import (
	"math/bits"
	"slices"
	"sort"
	"strings"
)

// closest returns at most n of the level's pattern entries, those whose
// pattern shares the longest prefix with subj (the earlier first among
// equals), in their order, and how many it left out. A level with more
// than n patterns is searched through its patterns in sorted order, so
// a refusal under a long list costs about the same as under a short one.
func (te *toolEntries) closest(subj string, n int) ([]string, int) {
	total := te.npatterns
	if total <= n {
		var out []string
		for _, in := range te.infos {
			if in.HasPattern {
				out = append(out, in.Raw)
			}
		}
		return out, 0
	}
	te.nearOnce.Do(te.buildNear)
	picked := te.near.closest(te.infos, subj, n)
	slices.Sort(picked)
	out := make([]string, len(picked))
	for j, i := range picked {
		out[j] = te.infos[i].Raw
	}
	return out, total - len(picked)
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

// closest returns the indexes of the n entries closest to subj, unsorted;
// there are more than n.
func (ix *nearIndex) closest(infos []entryInfo, subj string, n int) []int {
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
	picked := make([]int, 0, n)
	for len(picked) < n && (lo > 0 || hi < size) {
		level := -1
		if lo > 0 {
			level = shared(lo - 1)
		}
		if hi < size {
			level = max(level, shared(hi))
		}
		// The next tier: every entry outside [lo, hi) sharing level bytes.
		nlo := sort.Search(lo, func(k int) bool { return shared(k) >= level })
		nhi := hi + sort.Search(size-hi, func(k int) bool { return shared(hi+k) < level })
		spans := [][2]int{{nlo, lo}, {hi, nhi}}
		if len(picked)+(lo-nlo)+(nhi-hi) <= n {
			for _, s := range spans {
				for k := s[0]; k < s[1]; k++ {
					picked = append(picked, int(ix.sorted[k]))
				}
			}
		} else {
			picked = ix.earliest(spans, n-len(picked), picked)
		}
		lo, hi = nlo, nhi
	}
	return picked
}

// earliest appends the m earliest entries of the spans of sorted, which
// hold more than m, taking the least of a span and splitting it around it.
func (ix *nearIndex) earliest(spans [][2]int, m int, out []int) []int {
	spans = slices.DeleteFunc(spans, func(s [2]int) bool { return s[0] >= s[1] })
	for ; m > 0 && len(spans) > 0; m-- {
		best := 0
		for j := range spans {
			if ix.least(spans[j][0], spans[j][1]) < ix.least(spans[best][0], spans[best][1]) {
				best = j
			}
		}
		s := spans[best]
		i := ix.least(s[0], s[1])
		out = append(out, int(i))
		r := int(ix.rank[i])
		spans = slices.Delete(spans, best, best+1)
		for _, part := range [][2]int{{s[0], r}, {r + 1, s[1]}} {
			if part[0] < part[1] {
				spans = append(spans, part)
			}
		}
	}
	return out
}
