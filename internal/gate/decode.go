package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Decode reads a tool call's input object from the wire as the gate wants
// it (numbers as json.Number), refusing what encoding/json lets through or
// turns into a hang: a name given twice (encoding/json keeps the last one
// silently), nesting deeper than lim.MaxDepth, more names than lim.MaxKeys
// in an object, longer names than lim.MaxKeyLen, strings longer than
// lim.MaxString, arrays longer than lim.MaxItems, and data after the object.
// The error is a sentence for the model.
func Decode(data []byte, lim Limits) (map[string]any, error) {
	if m, ok := scan(data, lim); ok {
		return m, nil
	}
	if m, ok := decodeFast(data, lim); ok {
		return m, nil
	}
	return decodeSlow(data, lim)
}

// decodeFast decodes data in one pass of encoding/json and then checks
// what that pass cannot: that no object gives a name twice (the members
// counted in the text equal the names decoded) and the limits. It reports
// false on anything amiss, and decodeSlow, the token-by-token reading,
// then gives the exact sentence: the two accept the same inputs, and a
// fuzz test holds them to it.
func decodeFast(data []byte, lim Limits) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if d.More() {
		return nil, false
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, false
	}
	members := countMembers(data)
	w := fastWalk{lim: lim}
	if !w.value(m, 1) || w.names != members {
		return nil, false
	}
	return m, true
}

type fastWalk struct {
	lim           Limits
	names, values int
}

// value checks v at depth against the limits, counting names and values.
func (w *fastWalk) value(v any, depth int) bool {
	switch x := v.(type) {
	case map[string]any:
		if depth > w.lim.MaxDepth || len(x) > w.lim.MaxKeys {
			return false
		}
		w.names += len(x)
		for k, e := range x {
			if len(k) > w.lim.MaxKeyLen {
				return false
			}
			if w.values++; w.lim.MaxValues > 0 && w.values > w.lim.MaxValues || !w.value(e, depth+1) {
				return false
			}
		}
	case []any:
		if depth > w.lim.MaxDepth || len(x) > w.lim.MaxItems {
			return false
		}
		for _, e := range x {
			if w.values++; w.lim.MaxValues > 0 && w.values > w.lim.MaxValues || !w.value(e, depth+1) {
				return false
			}
		}
	case string:
		return len(x) <= w.lim.MaxString
	case json.Number:
		n, ok := parseNumber(string(x))
		return ok && !n.tooLarge()
	}
	return true
}

// countMembers counts the members of every object in valid JSON text: the
// colons outside strings.
func countMembers(data []byte) int {
	n := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case ':':
			n++
		}
	}
	return n
}

// decodeSlow reads data token by token, with the path of whatever is wrong.
func decodeSlow(data []byte, lim Limits) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	p := parser{d: d, lim: lim}
	tok, err := d.Token()
	if err != nil {
		return nil, p.syntax(err)
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("the input must be a JSON object, got %s", describeToken(tok))
	}
	m, err := p.object(1)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("the input has data after its object; send one JSON object")
	}
	return m, nil
}

type parser struct {
	d   *json.Decoder
	lim Limits
	// at is the path to the value being read, spelt only for an error.
	at []segment
	// values counts the values read, against lim.MaxValues.
	values int
}

// segment is a name, or an index when name is "" and index >= 0.
type segment struct {
	name  string
	index int
}

func (p *parser) where() string {
	if len(p.at) == 0 {
		return "the input"
	}
	var b strings.Builder
	for _, s := range p.at {
		if s.index >= 0 {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return "'" + b.String() + "'"
}

func (p *parser) syntax(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("the input is not valid JSON: %v", err)
}

// object reads the members of an object whose '{' was read.
func (p *parser) object(depth int) (map[string]any, error) {
	if depth > p.lim.MaxDepth {
		return nil, fmt.Errorf("%s is nested more than %d levels deep", p.where(), p.lim.MaxDepth)
	}
	m := map[string]any{}
	for p.d.More() {
		tok, err := p.d.Token()
		if err != nil {
			return nil, p.syntax(err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, p.syntax(fmt.Errorf("a name expected in %s", p.where()))
		}
		if len(name) > p.lim.MaxKeyLen {
			return nil, fmt.Errorf("%s has a name of %d bytes (%q); at most %d are accepted", p.where(), len(name), clip(name), p.lim.MaxKeyLen)
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("%s gives the name %q twice; send each parameter once", p.where(), name)
		}
		if len(m) == p.lim.MaxKeys {
			return nil, fmt.Errorf("%s has more than %d names", p.where(), p.lim.MaxKeys)
		}
		p.at = append(p.at, segment{name, -1})
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.at = p.at[:len(p.at)-1]
		m[name] = v
	}
	if _, err := p.d.Token(); err != nil {
		return nil, p.syntax(err)
	}
	return m, nil
}

func (p *parser) value(depth int) (any, error) {
	if p.values++; p.lim.MaxValues > 0 && p.values > p.lim.MaxValues {
		return nil, fmt.Errorf("the input holds more than %d values; send a smaller input", p.lim.MaxValues)
	}
	tok, err := p.d.Token()
	if err != nil {
		return nil, p.syntax(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return p.object(depth + 1)
		case '[':
			return p.array(depth + 1)
		}
		return nil, p.syntax(fmt.Errorf("unexpected %q", t))
	case string:
		if len(t) > p.lim.MaxString {
			return nil, fmt.Errorf("%s is a string of %d bytes; at most %d are accepted", p.where(), len(t), p.lim.MaxString)
		}
		return t, nil
	case json.Number:
		if n, ok := parseNumber(string(t)); !ok || n.tooLarge() {
			return nil, fmt.Errorf("%s is a number too large to check (%.40s)", p.where(), t)
		}
		return t, nil
	}
	return tok, nil // bool or nil
}

func (p *parser) array(depth int) ([]any, error) {
	if depth > p.lim.MaxDepth {
		return nil, fmt.Errorf("%s is nested more than %d levels deep", p.where(), p.lim.MaxDepth)
	}
	a := []any{}
	for p.d.More() {
		if len(a) == p.lim.MaxItems {
			return nil, fmt.Errorf("%s has more than %d items", p.where(), p.lim.MaxItems)
		}
		p.at = append(p.at, segment{"", len(a)})
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.at = p.at[:len(p.at)-1]
		a = append(a, v)
	}
	if _, err := p.d.Token(); err != nil {
		return nil, p.syntax(err)
	}
	return a, nil
}

func describeToken(tok any) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return string(t)
	case string:
		return fmt.Sprintf("string %q", clip(t))
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}
