package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/gate"
)

// maxDepth is how deep a line may nest: the tokenizer's bound, and
// encoding/json's.
const maxDepth = 10000

// decode reads one line in one pass of the gate's tokenizer (jsontext):
// the members the protocol names, matched exactly and each given once at
// every level it reads (rule R2), each call's input as the gate reads it
// (gate.ReadInput: a name given twice or a limit passed refuses that call,
// not the line), and, for what is wrong with the line, the sentence of
// where the reading stopped. Unknown names are ignored. Numbers stay
// json.Number so that 3.0 and 3 keep their spelling for the gate (S5).
func decode(line []byte) (*request, error) {
	r := &request{}
	if err := decodeText(line, string(line), r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeText is decode into r of line, which the caller also holds as the
// string text: the strings read are parts of it, one copy of the line.
func decodeText(line []byte, text string, r *request) error {
	d := gate.NewTextDecoder(line, text)
	defer d.Release()
	lr := lineReader{d: d, line: line}
	switch k := d.PeekKind(); k {
	case '{':
	case 0:
		_, err := d.ReadToken()
		return lr.syntax(err)
	case '[':
		return notObject("the line", kindName(k))
	default:
		if _, err := d.ReadValue(); err != nil {
			return lr.syntax(err)
		}
		return notObject("the line", kindName(k))
	}
	if err := lr.object(theLine, func(name string) error { return lr.member(r, name) }); err != nil {
		return lr.syntax(err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return errors.New("the line holds more than one JSON value; send one JSON object per line")
	}
	if r.Object == "response" && r.outputErr != nil && lr.bad == nil {
		lr.bad = r.outputErr
	}
	if lr.bad != nil {
		return lr.bad
	}
	if err := validIDs(r); err != nil {
		return err
	}
	return nil
}

// lineReader reads a line at its tokenizer. It reads to the end whatever
// it finds, so that a line that is not JSON says so first; bad is the
// first other thing wrong.
type lineReader struct {
	d    *gate.Decoder
	line []byte
	bad  error
}

func (lr *lineReader) fail(err error) {
	if lr.bad == nil {
		lr.bad = err
	}
}

// skip reads past the value at the tokenizer.
func (lr *lineReader) skip() error { return lr.d.SkipValue() }

// place is where in a line an object is, for a sentence, spelt only when
// one is needed: what, its index unless negative, then after.
type place struct {
	what  string
	index int
	after string
}

var theLine = place{what: "the line", index: -1}

func (p place) String() string {
	if p.index < 0 {
		return p.what + p.after
	}
	return p.what + " " + strconv.Itoa(p.index) + p.after
}

// object reads the object at the tokenizer, calling member with each name
// and the tokenizer at its value, which member must read or skip.
func (lr *lineReader) object(what place, member func(name string) error) error {
	if _, err := lr.d.ReadToken(); err != nil {
		return err
	}
	var few [16]string
	names := few[:0]
	var many map[string]bool // past len(few) names
	for lr.d.PeekKind() != '}' {
		name, err := lr.d.ReadString()
		if err != nil {
			return err
		}
		dup := false
		switch {
		case many != nil:
			dup = many[name]
			many[name] = true
		case len(names) == len(few):
			many = make(map[string]bool, 2*len(few))
			for _, n := range names {
				many[n] = true
			}
			dup = many[name]
			many[name] = true
		default:
			for _, n := range names {
				dup = dup || n == name
			}
			names = append(names, name)
		}
		if dup {
			lr.fail(fmt.Errorf("%s gives the name %q twice; give each field once", what, name))
		}
		if err := member(name); err != nil {
			return err
		}
	}
	_, err := lr.d.ReadToken()
	return err
}

// member reads a member of a line (or of a response's output item) into r.
func (lr *lineReader) member(r *request, name string) error {
	if ok, err := lr.callMember(&r.callFields, name); ok {
		return err
	}
	switch name {
	case "role":
		return lr.str(&r.Role, name)
	case "format":
		return lr.str(&r.Format, name)
	case "call_id":
		return lr.str(&r.CallID, name)
	case "object":
		return lr.str(&r.Object, name)
	case "arguments":
		return lr.arguments(&r.args)
	case "strict":
		switch lr.d.PeekKind() {
		case 't', 'f', 'n':
			tok, err := lr.d.ReadToken()
			r.Strict = err == nil && tok.Kind() == 't'
			return err
		}
		lr.fail(errors.New(`field "strict" must be true or false`))
		return lr.skip()
	case "surface":
		var err error
		r.Surface, err = lr.strings(`field "surface" must be an array of strings such as ["agent", "subagent:reviewer"]`)
		return err
	case "approvals":
		var err error
		r.Approvals, err = lr.strings(`field "approvals" must be an array of the approval tokens a person gave, as strings`)
		return err
	case "content":
		r.hasContent = true
		return lr.content(r)
	case "tool_calls":
		r.hasToolCalls = true
		return lr.toolCalls(r)
	case "output":
		return lr.output(r)
	}
	return lr.skip()
}

// callMember reads the member name into f when it is one of a call's;
// false when it is not.
func (lr *lineReader) callMember(f *callFields, name string) (bool, error) {
	switch name {
	case "type":
		return true, lr.str(&f.Type, name)
	case "id":
		return true, lr.str(&f.ID, name)
	case "name":
		return true, lr.str(&f.Name, name)
	case "input":
		start := lr.d.InputOffset()
		in, bad, err := gate.ReadInput(lr.d, gate.DefaultLimits)
		if err != nil {
			return true, err
		}
		f.Input = bytes.TrimLeft(lr.line[start:lr.d.InputOffset()], " \t\r\n:")
		f.decoded, f.inputErr = in, bad
		return true, nil
	}
	return false, nil
}

// str reads a member that must be a JSON string; null reads as "", as
// encoding/json reads it into a string.
func (lr *lineReader) str(dst *string, name string) error {
	switch k := lr.d.PeekKind(); k {
	case '"', 'n':
		if k == 'n' {
			_, err := lr.d.ReadToken()
			return err
		}
		var err error
		*dst, err = lr.d.ReadString()
		return err
	default:
		if k != 0 {
			lr.fail(fmt.Errorf("field %q must be a string, not %s; see the protocol's line forms", name, describe(k)))
		}
		return lr.skip()
	}
}

// arguments reads an OpenAI call's arguments, JSON in a string; null reads
// as "", anything else as none.
func (lr *lineReader) arguments(dst *arguments) error {
	*dst = arguments{}
	if lr.d.PeekKind() != '"' {
		dst.given = lr.d.PeekKind() == 'n'
		return lr.str(&dst.text, "arguments")
	}
	var err error
	dst.text, dst.data, err = lr.d.ReadText()
	dst.given = true
	return err
}

// strings reads an array of strings, or null (nil); wrong is the sentence
// of anything else.
func (lr *lineReader) strings(wrong string) ([]string, error) {
	switch lr.d.PeekKind() {
	case 'n':
		_, err := lr.d.ReadToken()
		return nil, err
	case '[':
	default:
		lr.fail(errors.New(wrong))
		return nil, lr.skip()
	}
	if _, err := lr.d.ReadToken(); err != nil {
		return nil, err
	}
	out := []string{}
	for lr.d.PeekKind() != ']' {
		var s string
		switch lr.d.PeekKind() {
		case '"', 'n':
			if err := lr.str(&s, ""); err != nil {
				return nil, err
			}
		default:
			lr.fail(errors.New(wrong))
			if err := lr.skip(); err != nil {
				return nil, err
			}
		}
		out = append(out, s)
	}
	_, err := lr.d.ReadToken()
	return out, err
}

// items reads an array, calling item with each index and the tokenizer at
// the item, which item must read or skip.
func (lr *lineReader) items(item func(i int) error) error {
	if _, err := lr.d.ReadToken(); err != nil {
		return err
	}
	for i := 0; lr.d.PeekKind() != ']'; i++ {
		if err := item(i); err != nil {
			return err
		}
	}
	_, err := lr.d.ReadToken()
	return err
}

// objectAt reads the object item what, or refuses another kind of value.
func (lr *lineReader) objectAt(what place, member func(name string) error) error {
	if k := lr.d.PeekKind(); k != '{' {
		if k != 0 {
			lr.fail(notObject(what.String(), kindName(k)))
		}
		return lr.skip()
	}
	return lr.object(what, member)
}

// content reads an assistant message's content: an array of blocks, each
// read as strictly as the line; a plain-text content holds none.
func (lr *lineReader) content(r *request) error {
	switch lr.d.PeekKind() {
	case '"':
		r.Content = []block{}
		var text string
		err := lr.str(&text, "content")
		r.texts = append(r.texts, text)
		return err
	case 'n':
		r.Content = nil
		return lr.skip()
	case '[':
	default:
		lr.fail(errors.New(`field "content" must be an array of content blocks, or text`))
		return lr.skip()
	}
	r.Content = []block{}
	return lr.items(func(i int) error {
		r.Content = append(r.Content, block{})
		b := &r.Content[len(r.Content)-1]
		return lr.objectAt(place{"content block", i, ""}, func(name string) error {
			if ok, err := lr.callMember(&b.callFields, name); ok {
				return err
			}
			if name == "text" {
				return lr.str(&b.Text, name)
			}
			return lr.skip()
		})
	})
}

// toolCalls reads a Chat Completions message's tool_calls.
func (lr *lineReader) toolCalls(r *request) error {
	switch lr.d.PeekKind() {
	case 'n':
		r.ToolCalls = nil
		return lr.skip()
	case '[':
	default:
		lr.fail(errors.New(`field "tool_calls" must be an array of tool calls`))
		return lr.skip()
	}
	r.ToolCalls = []openaiCall{}
	return lr.items(func(i int) error {
		r.ToolCalls = append(r.ToolCalls, openaiCall{})
		c := &r.ToolCalls[len(r.ToolCalls)-1]
		return lr.objectAt(place{"tool call", i, ""}, func(name string) error {
			switch name {
			case "id":
				return lr.str(&c.ID, name)
			case "type":
				return lr.str(&c.Type, name)
			case "function":
				return lr.objectAt(place{"tool call", i, "'s function"}, func(name string) error {
					switch name {
					case "name":
						return lr.str(&c.Name, name)
					case "arguments":
						return lr.arguments(&c.args)
					}
					return lr.skip()
				})
			}
			return lr.skip()
		})
	})
}

// output reads a response object's output items, each as a line is read;
// what is wrong with them is kept apart (outputErr), since output is the
// protocol's only in a response object, which may name itself after it.
func (lr *lineReader) output(r *request) error {
	outer := lr.bad
	lr.bad = nil
	defer func() { r.outputErr, lr.bad = lr.bad, outer }()
	switch lr.d.PeekKind() {
	case 'n':
		return lr.skip()
	case '[':
	default:
		lr.fail(errors.New(`field "output" of a response must be an array of items`))
		return lr.skip()
	}
	return lr.items(func(i int) error {
		item := &request{}
		at := place{"output item", i, " of the response"}
		before := lr.bad
		err := lr.objectAt(at, func(name string) error { return lr.member(item, name) })
		if what := at.String(); lr.bad != nil && before == nil && !strings.HasPrefix(lr.bad.Error(), what) {
			lr.bad = fmt.Errorf("%s: %w", what, lr.bad)
		}
		r.Output = append(r.Output, item)
		return err
	})
}

// syntax is the sentence of the tokenizer's error on the line.
func (lr *lineReader) syntax(err error) error {
	if r, _ := utf8.DecodeRune(bytes.TrimLeft(lr.line, " \t\r\n")); r >= utf8.RuneSelf && unicode.IsSpace(r) || r < ' ' && r != 0 {
		return fmt.Errorf("the line holds %U, which is neither JSON white space nor JSON; send one JSON object per line", r)
	}
	var se *jsontext.SyntacticError
	msg := ""
	if errors.As(err, &se) && se.Err != nil {
		msg = se.Err.Error()
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the line is not valid JSON (it ends early); send one JSON object per line")
	case strings.Contains(msg, "invalid UTF-8"):
		return errors.New("the line is not valid UTF-8; send JSON text in UTF-8")
	case strings.Contains(msg, "surrogate"):
		return fmt.Errorf("the line holds an escape of half a character (a lone surrogate such as \\ud800) at byte %d, which is not text; send each character whole", se.ByteOffset)
	case strings.Contains(msg, "max depth"):
		return fmt.Errorf("the line is nested deeper than %d levels; send a flatter input", maxDepth)
	}
	return fmt.Errorf("the line is not valid JSON (%s); send one JSON object per line", gate.SyntaxText(err))
}

// kindName names a JSON kind as encoding/json does ("array", "number").
func kindName(k jsontext.Kind) string {
	switch k {
	case '[':
		return "array"
	case '{':
		return "object"
	case '"':
		return "string"
	case '0':
		return "number"
	case 't', 'f':
		return "bool"
	}
	return "null"
}

// describe names a JSON kind for a sentence: "a JSON array".
func describe(k jsontext.Kind) string {
	if k == 'n' {
		return "JSON null"
	}
	if k == 't' || k == 'f' {
		return "a JSON boolean"
	}
	return "a JSON " + kindName(k)
}

// notObject is the error of a value that is not an object; value is as
// kindName names it.
func notObject(what, value string) error {
	article := "a JSON "
	switch value {
	case "null":
		article = "JSON "
	case "bool":
		value = "boolean"
	}
	if what != "the line" {
		return fmt.Errorf("%s is %s%s, not an object", what, article, value)
	}
	return fmt.Errorf("%s is %s%s, not an object; send one JSON object per line", what, article, value)
}
