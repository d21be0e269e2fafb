// Package jsontok reads the JSON a plan is saved as (policy.Save) token by
// token, with json v2's jsontext, for the types a hook decodes in every
// process: json v2's reflection builds each struct type's decoder on its
// first use, which a process that decodes one plan and exits pays for
// every type (issues 42, 43: most of a restore's time). What it reads is
// what json v2 reads into the same Go types (names matched exactly, null
// as the zero value, [] and {} as empty but not nil), except that a name
// the type does not have is an error: a field added to a type and not to
// its reader fails every restore (and the round-trip tests) instead of
// being dropped.
package jsontok

import (
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Object reads an object, calling member with each name while the
// decoder is at its value, which member must read whole. null is no
// object: member is not called and Object returns false.
func Object(dec *jsontext.Decoder, member func(name string) error) (bool, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return false, err
	}
	switch tok.Kind() {
	case 'n':
		return false, nil
	case '{':
	default:
		return false, fmt.Errorf("%s where an object belongs", what(tok.Kind()))
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return false, err
		}
		if err := member(name.String()); err != nil {
			return false, err
		}
	}
	_, err = dec.ReadToken()
	return true, err
}

// Array reads an array, calling elem for each element while the decoder
// is at it; null is no array (false).
func Array(dec *jsontext.Decoder, elem func() error) (bool, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return false, err
	}
	switch tok.Kind() {
	case 'n':
		return false, nil
	case '[':
	default:
		return false, fmt.Errorf("%s where an array belongs", what(tok.Kind()))
	}
	for dec.PeekKind() != ']' {
		if err := elem(); err != nil {
			return false, err
		}
	}
	_, err = dec.ReadToken()
	return true, err
}

// Slice reads an array of T, each read by elem: nil for null, empty and
// not nil for [].
func Slice[T any](dec *jsontext.Decoder, elem func(*T) error) ([]T, error) {
	var s []T
	ok, err := Array(dec, func() error {
		var v T
		if err := elem(&v); err != nil {
			return err
		}
		s = append(s, v)
		return nil
	})
	if ok && s == nil {
		s = []T{}
	}
	return s, err
}

// Map reads an object of T by name, each read by elem: nil for null,
// empty and not nil for {}.
func Map[T any](dec *jsontext.Decoder, elem func(*T) error) (map[string]T, error) {
	var m map[string]T
	ok, err := Object(dec, func(name string) error {
		var v T
		if err := elem(&v); err != nil {
			return err
		}
		if m == nil {
			m = map[string]T{}
		}
		m[name] = v
		return nil
	})
	if ok && m == nil {
		m = map[string]T{}
	}
	return m, err
}

// Strings reads an array of strings.
func Strings(dec *jsontext.Decoder) ([]string, error) {
	return Slice(dec, func(s *string) error { return String(dec, s) })
}

// String reads a string into any string type; null leaves it "".
func String[T ~string](dec *jsontext.Decoder, s *T) error {
	tok, err := scalar(dec, '"')
	if err == nil && tok.Kind() == '"' {
		*s = T(tok.String())
	}
	return err
}

// Bool reads true or false; null leaves it false.
func Bool(dec *jsontext.Decoder, b *bool) error {
	tok, err := dec.ReadToken()
	switch {
	case err != nil:
		return err
	case tok.Kind() == 't' || tok.Kind() == 'f':
		*b = tok.Bool()
	case tok.Kind() != 'n':
		return fmt.Errorf("%s where a boolean belongs", what(tok.Kind()))
	}
	return nil
}

// Int reads an integer of bits bits into any signed integer type; null
// leaves it 0.
func Int[T ~int | ~int8 | ~int16 | ~int32 | ~int64](dec *jsontext.Decoder, n *T, bits int) error {
	lit, err := number(dec)
	if err != nil || lit == "" {
		return err
	}
	v, err := strconv.ParseInt(lit, 10, bits)
	if err != nil {
		return fmt.Errorf("the number %s is not an integer of %d bits", lit, bits)
	}
	*n = T(v)
	return nil
}

// Uint reads an unsigned integer of bits bits; null leaves it 0.
func Uint[T ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64](dec *jsontext.Decoder, n *T, bits int) error {
	lit, err := number(dec)
	if err != nil || lit == "" {
		return err
	}
	v, err := strconv.ParseUint(lit, 10, bits)
	if err != nil {
		return fmt.Errorf("the number %s is not an unsigned integer of %d bits", lit, bits)
	}
	*n = T(v)
	return nil
}

// Raw reads a value's bytes whole, as json.RawMessage keeps them under
// json v2 (null as null), into any byte slice type.
func Raw[T ~[]byte](dec *jsontext.Decoder, b *T) error {
	v, err := dec.ReadValue()
	if err == nil {
		*b = T(slices.Clone(v)) // the decoder's buffer is reused
	}
	return err
}

// number reads a number's literal, or null ("").
func number(dec *jsontext.Decoder) (string, error) {
	tok, err := scalar(dec, '0')
	if err != nil || tok.Kind() != '0' {
		return "", err
	}
	return tok.String(), nil
}

// scalar reads a token of kind k, or null.
func scalar(dec *jsontext.Decoder, k jsontext.Kind) (jsontext.Token, error) {
	tok, err := dec.ReadToken()
	if err == nil && tok.Kind() != k && tok.Kind() != 'n' {
		err = fmt.Errorf("%s where %s belongs", what(tok.Kind()), what(k))
	}
	return tok, err
}

// End reports whether dec holds nothing after what was read: an error
// naming what (a plan, a record) was given twice, or dec's own.
func End(dec *jsontext.Decoder, what string) error {
	_, err := dec.ReadToken()
	switch err {
	case io.EOF:
		return nil
	case nil:
		return fmt.Errorf("more than one %s", what)
	}
	return err
}

// Unknown is the error of a name a type does not have.
func Unknown(typ, name string) error {
	return fmt.Errorf("%s has no field %q", typ, name)
}

func what(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the end of a value"
}
