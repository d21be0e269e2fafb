package gate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
)

// maxNumberDigits bounds the digits of an integer the gate spells out for
// CUE (1e400 is an integer of 401 digits; 1e999999 is refused, not expanded).
const maxNumberDigits = 400

// number is a JSON number read exactly: ±digits × 10^exp, digits without
// leading or trailing zeros ("" for zero).
type number struct {
	Neg    bool   `json:",omitzero"`
	Digits string `json:",omitzero"`
	Exp    int    `json:",omitzero"`
}

// parseNumber reads a JSON number's text. It never allocates more than the
// text's length, whatever the exponent says.
func parseNumber(s string) (number, bool) {
	var n number
	if strings.HasPrefix(s, "-") {
		n.Neg, s = true, s[1:]
	}
	mant, expText, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expText, hasExp = s[:i], s[i+1:], true
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return n, false
	}
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expText, "+"))
		if err != nil || expText == "" || e > 1e8 || e < -1e8 {
			return n, false
		}
		n.Exp = e
	}
	if frac == "" {
		// An integer: no concatenation needed.
		d := strings.TrimLeft(intPart, "0")
		trimmed := strings.TrimRight(d, "0")
		n.Exp += len(d) - len(trimmed)
		n.Digits = trimmed
		if n.Digits == "" {
			n.Neg, n.Exp = false, 0
		}
		return n, true
	}
	d := strings.TrimLeft(intPart+frac, "0")
	n.Exp -= len(frac)
	trimmed := strings.TrimRight(d, "0")
	n.Exp += len(d) - len(trimmed)
	n.Digits = trimmed
	if n.Digits == "" {
		n.Neg, n.Exp = false, 0
	}
	return n, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// integral reports whether n has no fraction (rule S5: 3.0 is an integer).
func (n number) integral() bool { return n.Exp >= 0 }

// tooLarge reports whether n's integer spelling would exceed maxNumberDigits,
// or its magnitude is beyond what a tool could mean.
func (n number) tooLarge() bool {
	return len(n.Digits)+n.Exp > maxNumberDigits || n.Exp < -maxNumberDigits
}

// key is a canonical spelling, equal for equal numbers (3, 3.0, 30e-1).
func (n number) key() string {
	if n.Digits == "" {
		return "0"
	}
	s := n.Digits + "e" + strconv.Itoa(n.Exp)
	if n.Neg {
		s = "-" + s
	}
	return s
}

// literal is n as a CUE number literal: an int when integral (CUE's int
// rejects 3.0, the gate does not), else a float.
func (n number) literal() (string, bool) {
	if n.Digits == "" {
		return "0", true
	}
	sign := ""
	if n.Neg {
		sign = "-"
	}
	if n.integral() {
		return sign + n.Digits + strings.Repeat("0", n.Exp), true
	}
	return sign + n.Digits + "e" + strconv.Itoa(n.Exp), false
}

// numberOf reads a decoded JSON number: json.Number from the wire, or
// float64/int from a Go caller.
func numberOf(v any) (number, bool) {
	switch x := v.(type) {
	case json.Number:
		return parseNumber(string(x))
	case float64:
		return parseNumber(strconv.FormatFloat(x, 'g', -1, 64))
	case float32:
		return parseNumber(strconv.FormatFloat(float64(x), 'g', -1, 32))
	case int:
		return parseNumber(strconv.Itoa(x))
	case int64:
		return parseNumber(strconv.FormatInt(x, 10))
	}
	return number{}, false
}

// scalar is a concrete JSON scalar of an enum.
type scalar struct {
	K kinds  `json:",omitzero"` // kNull, kBool, kInt|kFrac (number) or kString
	S string `json:",omitzero"`
	B bool   `json:",omitzero"`
}

func scalarOf(v cue.Value) (scalar, bool) {
	switch v.Kind() {
	case cue.NullKind:
		return scalar{K: kNull}, true
	case cue.BoolKind:
		b, err := v.Bool()
		return scalar{K: kBool, B: b}, err == nil
	case cue.StringKind:
		s, err := v.String()
		return scalar{K: kString, S: s}, err == nil
	case cue.IntKind, cue.FloatKind, cue.NumberKind:
		// CUE's float 3.0 is not its int 3; keep the kind with the value.
		n, ok := parseNumber(fmt.Sprint(v))
		if !ok {
			return scalar{}, false
		}
		k := kFrac
		if v.Kind() == cue.IntKind {
			k = kInt
		}
		return scalar{K: k, S: n.key()}, true
	}
	return scalar{}, false
}

// matches reports whether the decoded JSON value v equals s.
func (s scalar) matches(v any) bool {
	switch x := v.(type) {
	case nil:
		return s.K == kNull
	case bool:
		return s.K == kBool && s.B == x
	case string:
		return s.K == kString && s.S == x
	}
	n, ok := numberOf(v)
	if !ok {
		return false
	}
	k := kFrac
	if n.integral() {
		k = kInt
	}
	return s.K == k && s.S == n.key()
}

func (s scalar) String() string {
	switch s.K {
	case kNull:
		return "null"
	case kBool:
		return strconv.FormatBool(s.B)
	case kString:
		return strconv.Quote(s.S)
	}
	n, _ := parseNumber(s.S)
	l, _ := n.literal()
	return l
}
