package gate

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// scanner reads the JSON that tool calls hold in one pass over the bytes,
// without encoding/json's reflection: objects, arrays, strings (without
// \u escapes), numbers and literals, within the limits. It gives up (ok
// false) on anything else, and Decode's exact paths then read the input
// and give their sentences: FuzzDecodeFastIsSlow holds the values it accepts
// to theirs.
type scanner struct {
	data   []byte
	i      int
	lim    Limits
	values int
}

// scan decodes a whole input object, as Decode does when it accepts it.
func scan(data []byte, lim Limits) (map[string]any, bool) {
	s := scanner{data: data, lim: lim}
	s.ws()
	if !s.at('{') {
		return nil, false
	}
	m, ok := s.object(1)
	if !ok {
		return nil, false
	}
	s.ws()
	return m, s.i == len(s.data)
}

// lineLimits bound a whole line as encoding/json does: its depth only.
var lineLimits = Limits{MaxDepth: 10000, MaxKeys: 1 << 30, MaxKeyLen: 1 << 30, MaxString: 1 << 30, MaxItems: 1 << 30}

// ScanLine decodes a line that is one JSON object in one pass, as
// encoding/json with UseNumber would, but false for a name given twice at
// any depth and for whatever the one pass does not read (a \u escape, a
// number too large for the gate). An input found in it is then held to
// the gate's limits by Within, as Decode would hold it.
func ScanLine(line []byte) (map[string]any, bool) {
	return scan(line, lineLimits)
}

// Within reports whether an input decoded by ScanLine is one that Decode,
// given its bytes alone, would accept under lim.
func Within(in map[string]any, lim Limits) bool {
	w := fastWalk{lim: lim}
	return w.value(in, 1)
}

// Envelope reads a line that is one JSON object whose members are strings
// but for at most one, named obj, which is an object: field is given each
// string member, and may refuse it (false), and obj's value is decoded as
// Decode decodes an input on its own (its depth counting from 1, under
// lim), and returned with its bytes; both are nil when the line has no
// member obj. ok is false for any other line — another kind of member, a
// name given twice, a limit passed, an escape the one pass does not read —
// which the caller then reads its slower, exact way.
func Envelope(line []byte, obj string, lim Limits, field func(name, value string) bool) (in map[string]any, raw []byte, ok bool) {
	s := scanner{data: line, lim: lim}
	s.ws()
	if in, raw, ok = s.envelope(obj, field, nil); !ok {
		return nil, nil, false
	}
	s.ws()
	if s.i != len(s.data) {
		return nil, nil, false
	}
	return in, raw, true
}

// Envelopes reads a line that is one JSON object whose members are strings
// but for one, named arr, which is an array of objects of the form Envelope
// reads: field is given each string member of the line (item -1) and of
// each object (item its index), and may refuse it, and ins holds each
// object's member obj decoded as Decode decodes an input on its own, nil
// for an object without one. A member of another kind is read and dropped
// when skip says its name may be (a field the caller ignores, such as a
// Messages API response's usage). ok is false for any other line (as for
// Envelope, or a line without arr), which the caller then reads its
// slower, exact way.
func Envelopes(line []byte, arr, obj string, lim Limits, field func(item int, name, value string) bool, skip func(item int, name string) bool) (ins []map[string]any, ok bool) {
	s := scanner{data: line, lim: lim}
	s.ws()
	if !s.eat('{') {
		return nil, false
	}
	var names [8]string
	n := 0
	s.ws()
	for !s.eat('}') {
		if n > 0 && !s.eat(',') {
			return nil, false
		}
		s.ws()
		name, ok := s.str()
		if !ok || n == len(names) || slices.Contains(names[:n], name) {
			return nil, false
		}
		names[n] = name
		n++
		s.ws()
		if !s.eat(':') {
			return nil, false
		}
		s.ws()
		if name != arr {
			if !s.member(func(v string) bool { return field(-1, name, v) }, func() bool { return skip(-1, name) }) {
				return nil, false
			}
			s.ws()
			continue
		}
		if !s.eat('[') {
			return nil, false
		}
		ins = []map[string]any{}
		s.ws()
		for !s.eat(']') {
			if len(ins) > 0 && !s.eat(',') || len(ins) == s.lim.MaxItems {
				return nil, false
			}
			s.ws()
			item := len(ins)
			in, _, ok := s.envelope(obj, func(name, v string) bool { return field(item, name, v) }, func(name string) bool { return skip(item, name) })
			if !ok {
				return nil, false
			}
			ins = append(ins, in)
			s.ws()
		}
		s.ws()
	}
	s.ws()
	if s.i != len(s.data) || ins == nil {
		return nil, false
	}
	return ins, true
}

// envelope reads the object at the scanner as Envelope reads a line, with
// obj's value counted on its own against the limits, and a member of
// another kind than a string dropped when skip (nil for none) allows it.
func (s *scanner) envelope(obj string, field func(name, value string) bool, skip func(name string) bool) (in map[string]any, raw []byte, ok bool) {
	if !s.eat('{') {
		return nil, nil, false
	}
	var names [8]string
	n := 0
	s.ws()
	for !s.eat('}') {
		if n > 0 && !s.eat(',') {
			return nil, nil, false
		}
		s.ws()
		name, ok := s.str()
		if !ok || n == len(names) || slices.Contains(names[:n], name) {
			return nil, nil, false
		}
		names[n] = name
		n++
		s.ws()
		if !s.eat(':') {
			return nil, nil, false
		}
		s.ws()
		if name == obj {
			start := s.i
			if !s.at('{') {
				return nil, nil, false
			}
			s.values = 0
			if in, ok = s.object(1); !ok {
				return nil, nil, false
			}
			raw = s.data[start:s.i]
		} else {
			var allow func() bool
			if skip != nil {
				allow = func() bool { return skip(name) }
			}
			if !s.member(func(v string) bool { return field(name, v) }, allow) {
				return nil, nil, false
			}
		}
		s.ws()
	}
	return in, raw, true
}

// member reads a member's value at the scanner: a string, given to field,
// or, when skip (nil for never) allows it, any other value, dropped.
func (s *scanner) member(field func(v string) bool, skip func() bool) bool {
	if s.at('"') {
		v, ok := s.str()
		return ok && field(v)
	}
	if skip == nil || !skip() {
		return false
	}
	_, ok := s.value(1)
	return ok
}

func (s *scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) at(c byte) bool { return s.i < len(s.data) && s.data[s.i] == c }

func (s *scanner) eat(c byte) bool {
	if s.at(c) {
		s.i++
		return true
	}
	return false
}

// object reads an object at '{', as decodeSlow's object does.
func (s *scanner) object(depth int) (map[string]any, bool) {
	if depth > s.lim.MaxDepth {
		return nil, false
	}
	s.i++ // '{'
	m := map[string]any{}
	s.ws()
	if s.eat('}') {
		return m, true
	}
	for {
		s.ws()
		name, ok := s.str()
		if !ok || len(name) > s.lim.MaxKeyLen || len(m) == s.lim.MaxKeys {
			return nil, false
		}
		if _, dup := m[name]; dup {
			return nil, false
		}
		s.ws()
		if !s.eat(':') {
			return nil, false
		}
		v, ok := s.value(depth)
		if !ok {
			return nil, false
		}
		m[name] = v
		s.ws()
		if s.eat('}') {
			return m, true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// array reads an array at '['.
func (s *scanner) array(depth int) ([]any, bool) {
	if depth > s.lim.MaxDepth {
		return nil, false
	}
	s.i++ // '['
	a := []any{}
	s.ws()
	if s.eat(']') {
		return a, true
	}
	for {
		if len(a) == s.lim.MaxItems {
			return nil, false
		}
		v, ok := s.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		s.ws()
		if s.eat(']') {
			return a, true
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// value reads one member value or array item, at depth of its container.
func (s *scanner) value(depth int) (any, bool) {
	if s.values++; s.lim.MaxValues > 0 && s.values > s.lim.MaxValues {
		return nil, false
	}
	s.ws()
	if s.i >= len(s.data) {
		return nil, false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		str, ok := s.str()
		return str, ok && len(str) <= s.lim.MaxString
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return true, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return nil, s.literal("null")
	}
	return nil, false
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.i < len(word) || string(s.data[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}

// number reads a JSON number, as json.Number, when the gate can check it.
func (s *scanner) number() (any, bool) {
	start := s.i
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() > 0:
	default:
		return nil, false
	}
	if s.eat('.') && s.digits() == 0 {
		return nil, false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return nil, false
		}
	}
	text := string(s.data[start:s.i])
	if n, ok := parseNumber(text); !ok || n.tooLarge() {
		return nil, false
	}
	return json.Number(text), true
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// str reads a string at '"': valid UTF-8, no control character, and of
// the escapes only the one-letter ones.
func (s *scanner) str() (string, bool) {
	if !s.eat('"') {
		return "", false
	}
	start, ascii := s.i, true
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			raw := s.data[start:s.i]
			s.i++
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			return string(raw), true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		s.i++
	}
	return "", false
}

// escaped finishes a string from its first backslash.
func (s *scanner) escaped(start int) (string, bool) {
	buf := append([]byte(nil), s.data[start:s.i]...)
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.data) {
			return "", false
		}
		var r byte
		switch s.data[s.i+1] {
		case '"', '\\', '/':
			r = s.data[s.i+1]
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		default: // \u, or no escape at all: the exact paths decide
			return "", false
		}
		buf = append(buf, r)
		s.i += 2
	}
	return "", false
}
