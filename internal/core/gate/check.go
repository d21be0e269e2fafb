package gate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"cuelang.org/go/cue"
)

// check is one bound or regular expression an author wrote on a scalar
// (int & >=1 & <=100, =~"^/srv/"), checked in Go as CUE would.
type check struct {
	Op  cue.Op         `json:",omitzero"`
	Num number         `json:",omitzero"` // a numeric bound
	Re  *regexp.Regexp `json:",omitzero"` // =~ and !~; CUE's regular expressions are Go's
	// js is a numeric bound as the JSON Schema export spells it; "" when
	// it has no JSON spelling.
	js json.Number
}

// constraints reads v's conjunction into checks. It reports cue=true when
// some conjunct is not a kind, a numeric bound or a regular expression,
// and noExport when the checks are not what the JSON Schema export reads
// (it stops at conjunctions nested 8 deep).
func (c *compiler) constraints(v cue.Value) (cs []check, needsCUE, noExport bool) {
	c.deepAnd = false
	if !c.collect(v, &cs, 0) {
		return nil, true, false
	}
	return cs, false, c.deepAnd
}

func (c *compiler) collect(v cue.Value, cs *[]check, depth int) bool {
	if depth > 16 {
		return false
	}
	op, args := v.Expr()
	switch op {
	case cue.AndOp:
		c.deepAnd = c.deepAnd || depth >= maxBoundsDepth
		for _, a := range args {
			if !c.collect(a, cs, depth+1) {
				return false
			}
		}
		return true
	case cue.NoOp:
		k := v.IncompleteKind()
		return !v.IsConcrete() && k&^(cue.StructKind|cue.ListKind) == k && c.isBasic(v, kindsOf(k))
	case cue.GreaterThanEqualOp, cue.GreaterThanOp, cue.LessThanEqualOp, cue.LessThanOp:
		if len(args) != 1 || !args[0].IsConcrete() {
			return false
		}
		k := args[0].Kind()
		if k != cue.IntKind && k != cue.FloatKind && k != cue.NumberKind {
			return false // string bounds: CUE decides
		}
		n, ok := parseNumber(strings.TrimSpace(fmt.Sprint(args[0])))
		if !ok {
			return false
		}
		js, _ := jsonScalar(args[0])
		num, _ := js.(json.Number)
		*cs = append(*cs, check{Op: op, Num: n, js: num})
		return true
	case cue.RegexMatchOp, cue.NotRegexMatchOp:
		if len(args) != 1 || !args[0].IsConcrete() {
			return false
		}
		src, err := args[0].String()
		if err != nil {
			return false
		}
		re, err := regexp.Compile(src)
		if err != nil {
			return false
		}
		*cs = append(*cs, check{Op: op, Re: re})
		return true
	}
	return false
}

// holds reports whether the decoded JSON scalar v, already of the node's
// kinds, passes every check.
func holds(cs []check, v any) bool {
	for _, c := range cs {
		switch c.Op {
		case cue.RegexMatchOp, cue.NotRegexMatchOp:
			s, ok := v.(string)
			if !ok || c.Re.MatchString(s) != (c.Op == cue.RegexMatchOp) {
				return false
			}
		default:
			n, ok := numberOf(v)
			if !ok {
				return false
			}
			d := compare(n, c.Num)
			switch c.Op {
			case cue.GreaterThanEqualOp:
				ok = d >= 0
			case cue.GreaterThanOp:
				ok = d > 0
			case cue.LessThanEqualOp:
				ok = d <= 0
			case cue.LessThanOp:
				ok = d < 0
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// compare orders two numbers exactly: -1, 0 or 1.
func compare(a, b number) int {
	sign := func(n number) int {
		switch {
		case n.Digits == "":
			return 0
		case n.Neg:
			return -1
		}
		return 1
	}
	sa, sb := sign(a), sign(b)
	if sa != sb || sa == 0 {
		return cmpInt(sa, sb)
	}
	m := cmpMagnitude(a, b)
	if sa < 0 {
		return -m
	}
	return m
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpMagnitude compares |a| and |b|, both non-zero.
func cmpMagnitude(a, b number) int {
	// The position of the leading digit decides first.
	if c := cmpInt(len(a.Digits)+a.Exp, len(b.Digits)+b.Exp); c != 0 {
		return c
	}
	// Same leading position: compare digit strings, the shorter padded with zeros.
	da, db := a.Digits, b.Digits
	for i := 0; i < max(len(da), len(db)); i++ {
		ca, cb := byte('0'), byte('0')
		if i < len(da) {
			ca = da[i]
		}
		if i < len(db) {
			cb = db[i]
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
	}
	return 0
}
