package tools

import "strings"

// Closest returns the name in declared closest to name by edit distance, or
// "" when none is close enough to be what was meant: the suggestion of an
// unknown parameter (rule S6), tool or allow-list entry.
//
// A name that differs from a declared one only in case is that one, before
// any other at the same distance ("-I" is "-i", not "-A").
func Closest(name string, declared []string) string {
	for _, d := range declared {
		if d != name && strings.EqualFold(d, name) {
			return d
		}
	}
	best, bestD := "", -1
	for _, d := range declared {
		dist := distance(name, d)
		if dist > closeEnough(d) || dist >= len([]rune(d)) {
			continue
		}
		if bestD < 0 || dist < bestD {
			best, bestD = d, dist
		}
	}
	return best
}

// closeEnough is the largest distance at which a typo of d is still a typo:
// a third of its length, at least one, at most three; and never all of d
// ("b" is not a typo of "a").
func closeEnough(d string) int {
	return max(1, min(3, len([]rune(d))/3))
}

// distance is the optimal string alignment distance: insertions, deletions,
// substitutions and transpositions of adjacent characters ("paht" → "path"
// is one edit).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		return max(len(ra), len(rb))
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
