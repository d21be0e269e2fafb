package allow

import (
	"fmt"
	"regexp"

	"cuelang.org/go/cue"
)

// matcher is a compiled form of a CUE subject constraint. It is derived by
// walking the unified value's expression, never written by hand, so it
// cannot drift from the lattice; constraints it does not understand are
// decided by CUE itself.
type matcher interface{ match(s string) bool }

type (
	anyOf   []matcher
	allOf   []matcher
	exactly string
	reMatch struct{ re *regexp.Regexp }
	reNot   struct{ re *regexp.Regexp }
	always  bool
)

func (m anyOf) match(s string) bool {
	for _, x := range m {
		if x.match(s) {
			return true
		}
	}
	return false
}

func (m allOf) match(s string) bool {
	for _, x := range m {
		if !x.match(s) {
			return false
		}
	}
	return true
}

func (m exactly) match(s string) bool { return string(m) == s }
func (m reMatch) match(s string) bool { return m.re.MatchString(s) }
func (m reNot) match(s string) bool   { return !m.re.MatchString(s) }
func (m always) match(string) bool    { return bool(m) }

// derive compiles a string constraint: &, |, =~, !~, string literals, string
// and _. It reports false for anything else.
func derive(v cue.Value) (matcher, bool) {
	op, args := v.Expr()
	switch op {
	case cue.AndOp, cue.OrOp:
		ms := make([]matcher, 0, len(args))
		for _, a := range args {
			m, ok := derive(a)
			if !ok {
				return nil, false
			}
			ms = append(ms, m)
		}
		if op == cue.AndOp {
			return allOf(ms), true
		}
		return anyOf(ms), true
	case cue.RegexMatchOp, cue.NotRegexMatchOp:
		if len(args) != 1 {
			return nil, false
		}
		src, err := args[0].String()
		if err != nil {
			return nil, false
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, false
		}
		if op == cue.RegexMatchOp {
			return reMatch{re}, true
		}
		return reNot{re}, true
	case cue.NoOp:
		if v.Err() != nil {
			return nil, false
		}
		switch k := v.IncompleteKind(); {
		case k == cue.TopKind:
			return always(true), true
		case k == cue.StringKind && v.IsConcrete():
			s, err := v.String()
			if err != nil {
				return nil, false
			}
			return exactly(s), true
		case k == cue.StringKind && fmt.Sprint(v) == "string":
			return always(true), true // the type string: subjects are strings
		}
	}
	return nil, false
}
