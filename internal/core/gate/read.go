package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// The gate reads JSON with one tokenizer, jsontext (encoding/json/v2's):
// it refuses invalid UTF-8 and lone surrogates, reads every escape (\u
// with surrogate pairs too) in the same pass, and bounds the depth, so the
// gate needs no scanner of its own beside it. Names given twice are let
// through the tokenizer and refused here, with their path, so that a line
// holding such an input refuses that call and not the whole line.

// Options are the tokenizer's options for whatever the gate reads: names
// given twice are the reader's to refuse (ReadInput), invalid UTF-8 is
// refused by the tokenizer.
var Options = jsontext.AllowDuplicateNames(true)

// Decoder is a pooled tokenizer over one text; Release gives it back. It
// reads the text in place (a bytes.Buffer, which jsontext does not copy).
type Decoder struct {
	*jsontext.Decoder
	b bytes.Buffer
	// text is the same bytes as a string when the caller holds them so
	// (NewTextDecoder): a string without escapes is read as a part of it,
	// not copied.
	text    string
	scratch []byte    // for unquoting
	path    []segment // ReadInput's, kept for the next input
}

var decoders = sync.Pool{New: func() any {
	d := &Decoder{}
	d.Decoder = jsontext.NewDecoder(&d.b, Options)
	return d
}}

// NewTextDecoder returns a pooled tokenizer over data, which must not
// change until the decoder is released, and which the caller also holds
// as the string text (text == string(data), or ""): the strings read from
// it share text's memory, one copy of the text for all of them.
func NewTextDecoder(data []byte, text string) *Decoder {
	d := decoders.Get().(*Decoder)
	d.b = *bytes.NewBuffer(data)
	d.text = text
	d.Reset(&d.b, Options)
	return d
}

// Release gives d back to the pool; d must not be used after.
func (d *Decoder) Release() {
	d.b, d.text = bytes.Buffer{}, ""
	decoders.Put(d)
}

// ReadString reads the string (or object name) at the tokenizer.
func (d *Decoder) ReadString() (string, error) {
	raw, err := d.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return d.textOf(raw[1:len(raw)-1], 1), nil
	}
	d.scratch, err = jsontext.AppendUnquote(d.scratch[:0], raw)
	return string(d.scratch), err
}

// ReadText is ReadString giving the string's bytes too, which share its
// memory (one copy for both, none when the string holds no escape): data
// must not be written.
func (d *Decoder) ReadText() (text string, data []byte, err error) {
	raw, err := d.ReadValue()
	if err != nil {
		return "", nil, err
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return d.textOf(raw[1:len(raw)-1], 1), raw[1 : len(raw)-1 : len(raw)-1], nil
	}
	data, err = jsontext.AppendUnquote(nil, raw)
	return unsafe.String(unsafe.SliceData(data), len(data)), data, err
}

// textOf is raw, bytes of the text that end back bytes before where the
// tokenizer stopped, as a string: a part of text when the decoder has it.
func (d *Decoder) textOf(raw []byte, back int) string {
	end := int(d.InputOffset()) - back
	if start := end - len(raw); d.text != "" && start >= 0 && end <= len(d.text) {
		if s := d.text[start:end]; s == string(raw) {
			return s
		}
	}
	return string(raw)
}

// Decode reads a tool call's input object from the wire as the gate wants
// it (numbers as json.Number), refusing what encoding/json lets through or
// turns into a hang: a name given twice (encoding/json keeps the last one
// silently), invalid UTF-8, nesting deeper than lim.MaxDepth, more names
// than lim.MaxKeys in an object, longer names than lim.MaxKeyLen, strings
// longer than lim.MaxString, arrays longer than lim.MaxItems, and data
// after the object. The error is a sentence for the model.
func Decode(data []byte, lim Limits) (map[string]any, error) { return DecodeText(data, "", lim) }

// DecodeText is Decode of data that the caller also holds as the string
// text (text == string(data), or ""): the strings read share its memory,
// as NewTextDecoder's do.
func DecodeText(data []byte, text string, lim Limits) (map[string]any, error) {
	d := NewTextDecoder(data, text)
	defer d.Release()
	m, bad, err := ReadInput(d, lim)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the input is not valid JSON: %s", SyntaxText(err))
	case bad != nil:
		return nil, bad
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, errors.New("the input has data after its object; send one JSON object")
	}
	return m, nil
}

// SyntaxText says what a tokenizer error found, and where.
func SyntaxText(err error) string {
	var se *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected EOF"
	case errors.As(err, &se) && se.Err != nil:
		what := strings.TrimPrefix(se.Err.Error(), "jsontext: ")
		if se.JSONPointer != "" {
			return fmt.Sprintf("%s at byte %d (within %s)", what, se.ByteOffset, se.JSONPointer)
		}
		return fmt.Sprintf("%s at byte %d", what, se.ByteOffset)
	}
	return strings.TrimPrefix(err.Error(), "jsontext: ")
}

// ReadInput reads the value at d as a tool input under lim. It reads the
// whole value whatever it holds, so that a caller reading a line goes on
// after it: bad is the sentence of an input that is not an object or
// passes a limit (the call's to refuse), err the tokenizer's error when
// the text itself is not JSON (the caller's to refuse).
func ReadInput(d *Decoder, lim Limits) (in map[string]any, bad, err error) {
	r := inputReader{d: d, lim: lim, at: d.path[:0]}
	defer func() { d.path = r.at[:0] }()
	switch k := d.PeekKind(); k {
	case '{':
	case 0:
		_, err := d.ReadToken()
		return nil, nil, err
	default:
		raw, err := d.ReadValue()
		if err != nil {
			return nil, nil, err
		}
		return nil, fmt.Errorf("the input must be a JSON object, got %s", describeRaw(raw)), nil
	}
	v, err := r.value(0)
	if err != nil {
		return nil, nil, err
	}
	if r.bad != nil {
		return nil, r.bad, nil
	}
	return v.(map[string]any), nil, nil
}

type inputReader struct {
	d   *Decoder
	lim Limits
	// values counts the values read, against lim.MaxValues.
	values int
	// at is the path to the value being read, spelt only for a sentence.
	at []segment
	// bad is the first way the input breaks the limits; past it the rest
	// of the input is skipped.
	bad error
}

// segment is a name, or an index when name is "" and index >= 0.
type segment struct {
	name  string
	index int
}

func (r *inputReader) where() string {
	if len(r.at) == 0 {
		return "the input"
	}
	var b strings.Builder
	for _, s := range r.at {
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

// fail keeps the first sentence and skips the value at the tokenizer.
func (r *inputReader) fail(format string, args ...any) (any, error) {
	if r.bad == nil {
		r.bad = fmt.Errorf(format, args...)
	}
	return nil, r.d.SkipValue()
}

// value reads one value whose container is at depth (0 for the input).
func (r *inputReader) value(depth int) (any, error) {
	if r.bad != nil {
		return nil, r.d.SkipValue()
	}
	if depth > 0 {
		if r.values++; r.lim.MaxValues > 0 && r.values > r.lim.MaxValues {
			return r.fail("the input holds more than %d values; send a smaller input", r.lim.MaxValues)
		}
	}
	switch r.d.PeekKind() {
	case '{':
		if depth+1 > r.lim.MaxDepth {
			return r.fail("%s is nested more than %d levels deep", r.where(), r.lim.MaxDepth)
		}
		return r.object(depth + 1)
	case '[':
		if depth+1 > r.lim.MaxDepth {
			return r.fail("%s is nested more than %d levels deep", r.where(), r.lim.MaxDepth)
		}
		return r.array(depth + 1)
	case '"':
		s, err := r.d.ReadString()
		if err != nil {
			return nil, err
		}
		if len(s) > r.lim.MaxString && r.bad == nil {
			r.bad = fmt.Errorf("%s is a string of %d bytes; at most %d are accepted", r.where(), len(s), r.lim.MaxString)
		}
		return s, nil
	case '0':
		raw, err := r.d.ReadValue()
		if err != nil {
			return nil, err
		}
		text := r.d.textOf(raw, 0)
		if n, ok := parseNumber(text); (!ok || n.tooLarge()) && r.bad == nil {
			r.bad = fmt.Errorf("%s is a number too large to check (%.40s)", r.where(), text)
		}
		return json.Number(text), nil
	}
	tok, err := r.d.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 't', 'f':
		return tok.Bool(), nil
	}
	return nil, nil // null
}

func (r *inputReader) object(depth int) (any, error) {
	if _, err := r.d.ReadToken(); err != nil {
		return nil, err
	}
	m := map[string]any{}
	for r.d.PeekKind() != '}' {
		name, err := r.d.ReadString()
		if err != nil {
			return nil, err
		}
		if r.bad == nil {
			_, dup := m[name]
			switch {
			case len(name) > r.lim.MaxKeyLen:
				r.bad = fmt.Errorf("%s has a name of %d bytes (%q); at most %d are accepted", r.where(), len(name), clip(name), r.lim.MaxKeyLen)
			case dup:
				r.bad = fmt.Errorf("%s gives the name %q twice; send each parameter once", r.where(), name)
			case len(m) == r.lim.MaxKeys:
				r.bad = fmt.Errorf("%s has more than %d names", r.where(), r.lim.MaxKeys)
			}
		}
		r.at = append(r.at, segment{name, -1})
		v, err := r.value(depth)
		if err != nil {
			return nil, err
		}
		r.at = r.at[:len(r.at)-1]
		if r.bad == nil {
			m[name] = v
		}
	}
	if _, err := r.d.ReadToken(); err != nil {
		return nil, err
	}
	return m, nil
}

func (r *inputReader) array(depth int) (any, error) {
	if _, err := r.d.ReadToken(); err != nil {
		return nil, err
	}
	a := []any{}
	for n := 0; r.d.PeekKind() != ']'; n++ {
		if n == r.lim.MaxItems && r.bad == nil {
			r.bad = fmt.Errorf("%s has more than %d items", r.where(), r.lim.MaxItems)
		}
		r.at = append(r.at, segment{"", n})
		v, err := r.value(depth)
		if err != nil {
			return nil, err
		}
		r.at = r.at[:len(r.at)-1]
		if r.bad == nil {
			a = append(a, v)
		}
	}
	if _, err := r.d.ReadToken(); err != nil {
		return nil, err
	}
	return a, nil
}

// describeRaw names a JSON value that is not an object for a sentence.
func describeRaw(raw []byte) string {
	switch raw[0] {
	case '[':
		return "an array"
	case '"':
		s, _ := jsontext.AppendUnquote(nil, raw)
		return fmt.Sprintf("string %q", clip(string(s)))
	case 'n':
		return "null"
	}
	return string(raw)
}
