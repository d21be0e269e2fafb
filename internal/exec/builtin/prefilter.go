package builtin

import (
	"bytes"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// prefilter is where in a buffer the first line that can match expr is,
// for Grep to skip the lines before it with one byte search rather than
// the regular expression line by line (issue 32): the index of a literal
// that every match holds, the longest one found among the pieces that
// every match is made of, as ripgrep does; matched without regard to case
// where the expression says (?i). prefix, the compiled expression's
// literal prefix, is the literal when no longer one is found. nil when no
// literal is known: then every line is matched.
func prefilter(expr string, prefix []byte) func([]byte) int {
	lit, fold := string(prefix), false
	if re, err := syntax.Parse(expr, syntax.Perl); err == nil {
		if l, f := required(re.Simplify()); len(l) > len(lit) {
			lit, fold = l, f
		}
	}
	switch {
	case lit == "" || strings.ContainsRune(lit, '\n'):
		return nil // a line holds no newline: such a literal would skip every line
	case !fold:
		b := []byte(lit)
		return func(buf []byte) int { return bytes.Index(buf, b) }
	}
	return foldFinder(lit)
}

// required is the longest literal that every match of re holds, and
// whether it is matched without regard to case.
func required(re *syntax.Regexp) (lit string, fold bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune), re.Flags&syntax.FoldCase != 0
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if l, f := required(sub); len(l) > len(lit) {
				lit, fold = l, f
			}
		}
	}
	return lit, fold
}

// foldFinder finds lit without regard to case: an ASCII literal by its
// first letter in either case, each found with bytes.IndexByte once, and
// bytes.EqualFold on the bytes there. Under (?i) k also matches the Kelvin
// sign and s the long s, which are longer in UTF-8: the first line that
// holds either before the literal is given too, to be matched line by
// line. nil for a literal not all ASCII.
func foldFinder(lit string) func([]byte) int {
	for i := range len(lit) {
		if lit[i] >= utf8.RuneSelf {
			return nil
		}
	}
	b := []byte(lit)
	lower, upper := toLower(b[0]), toUpper(b[0])
	odd := strings.ContainsAny(lit, "kKsS")
	return func(buf []byte) int {
		at := -1
		nl, nu := -2, -2 // where the next lower and upper letter are; -2 unknown, -1 none
		for off := 0; off+len(b) <= len(buf); {
			if nl == -2 || nl >= 0 && nl < off {
				nl = indexFrom(buf, off, lower)
			}
			if nu == -2 || nu >= 0 && nu < off {
				nu = indexFrom(buf, off, upper)
			}
			i := nl
			if i < 0 || nu >= 0 && nu < i {
				i = nu
			}
			if i < 0 {
				break
			}
			if i+len(b) <= len(buf) && bytes.EqualFold(buf[i:i+len(b)], b) {
				at = i
				break
			}
			off = i + 1
		}
		if odd {
			end := len(buf)
			if at >= 0 {
				end = at
			}
			for _, r := range oddFolds {
				if i := bytes.Index(buf[:end], r); i >= 0 {
					at, end = i, i
				}
			}
		}
		return at
	}
}

// oddFolds are the Kelvin sign and the long s in UTF-8.
var oddFolds = [][]byte{[]byte("\u212a"), []byte("\u017f")}

// indexFrom is the index of c in buf at or after off, -1 for none.
func indexFrom(buf []byte, off int, c byte) int {
	if i := bytes.IndexByte(buf[off:], c); i >= 0 {
		return off + i
	}
	return -1
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func toUpper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}
