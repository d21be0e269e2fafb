package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"cuelang.org/go/cue"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/jsontok"
)

// ErrNeedsCUE is returned when a gate whose shape leaves some inputs to
// CUE is encoded: its schema is not data, so such a gate is kept only as
// the CUE it was compiled from.
var ErrNeedsCUE = errors.New("the schema needs CUE to decide some inputs")

// A gate is plain data but for its CUE schema: its shape and limits encode
// as JSON, and decode to a gate that decides every input as the compiled
// one does, with the same values (the hook's cache keeps a policy's plan
// so). The regular expressions encode as their source.
type plan struct {
	Limits Limits
	Root   *node
}

// MarshalJSON encodes the gate's shape; ErrNeedsCUE when the shape alone
// does not decide every input.
func (g *Gate) MarshalJSON() ([]byte, error) {
	if g.root.CUE {
		return nil, ErrNeedsCUE
	}
	return json.Marshal(plan{Limits: g.lim, Root: g.root})
}

// UnmarshalJSONFrom decodes what MarshalJSON wrote with json v2, in the
// stream of what holds the gate: encoding/json would read the gate's bytes
// whole first and check them once more for each UnmarshalJSON above it
// (issue 32: most of a restore's time). The gate has no CUE schema
// (Schema returns the zero value), which its shape never consults.
//
// It reads the shape token by token (package jsontok), not through json
// v2's reflection, whose decoders for the shape's types a hook process
// would build on each call.
func (g *Gate) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	var p plan
	if err := p.decode(dec); err != nil {
		return err
	}
	if p.Root == nil {
		return errors.New("the gate has no schema")
	}
	if err := p.Root.settle(0); err != nil {
		return fmt.Errorf("the gate cannot be read: %w", err)
	}
	*g = Gate{root: p.Root, lim: p.Limits, js: &exported{}}
	g.js.once.Do(func() { g.js.err = errDecoded })
	return nil
}

// UnmarshalJSON is UnmarshalJSONFrom for encoding/json.
func (g *Gate) UnmarshalJSON(data []byte) error { return jsonv2.Unmarshal(data, g) }

// settle checks a decoded shape and sorts its names, which are not
// encoded: a shape without its CUE schema cannot leave an input to CUE,
// and no compiled shape is deeper than the compiler walks.
func (n *node) settle(depth int) error {
	if n == nil {
		return nil
	}
	switch {
	case depth > maxCompileDepth+2:
		return errTooDeep
	case n.CUE:
		return ErrNeedsCUE
	}
	for name, f := range n.Fields {
		if f == nil || f.Node == nil {
			return fmt.Errorf("the field %q has no schema", name)
		}
		if err := f.Node.settle(depth + 1); err != nil {
			return err
		}
		n.names = append(n.names, name)
	}
	slices.Sort(n.names)
	for _, r := range n.Allow {
		if r.Re == nil {
			return errors.New("a name pattern has no regular expression")
		}
	}
	for _, c := range n.Checks {
		if (c.Op == cue.RegexMatchOp || c.Op == cue.NotRegexMatchOp) != (c.Re != nil) {
			return errors.New("a check's regular expression does not go with its operator")
		}
	}
	if err := n.Extra.settle(depth + 1); err != nil {
		return err
	}
	return n.Elem.settle(depth + 1)
}

// NeedsCUE reports whether the gate leaves some inputs to CUE, so that it
// does not encode (ErrNeedsCUE).
func (g *Gate) NeedsCUE() bool { return g.root.CUE }

// errTooDeep is a decoded shape deeper than any compiled one.
var errTooDeep = errors.New("the schema is nested deeper than a compiled one can be")

func (p *plan) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Limits":
			return p.Limits.decode(dec)
		case "Root":
			return decodeNode(dec, &p.Root, 0)
		}
		return jsontok.Unknown("a gate", name)
	})
	return err
}

func (l *Limits) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		var n *int
		switch name {
		case "MaxDepth":
			n = &l.MaxDepth
		case "MaxKeys":
			n = &l.MaxKeys
		case "MaxKeyLen":
			n = &l.MaxKeyLen
		case "MaxString":
			n = &l.MaxString
		case "MaxItems":
			n = &l.MaxItems
		case "MaxValues":
			n = &l.MaxValues
		default:
			return jsontok.Unknown("a gate's limits", name)
		}
		return jsontok.Int(dec, n, 64)
	})
	return err
}

// decodeNode reads a node into *np (nil for null), depth below the root;
// deeper than settle allows is refused before it is read.
func decodeNode(dec *jsontext.Decoder, np **node, depth int) error {
	if depth > maxCompileDepth+2 {
		return errTooDeep
	}
	n := new(node)
	ok, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Kinds":
			return jsontok.Uint(dec, &n.Kinds, 8)
		case "Enum":
			n.Enum, err = jsontok.Slice(dec, func(s *scalar) error { return s.decode(dec) })
		case "Fields":
			n.Fields, err = jsontok.Map(dec, func(f **field) error { return decodeField(dec, f, depth+1) })
		case "Closed":
			return jsontok.Bool(dec, &n.Closed)
		case "Extra":
			return decodeNode(dec, &n.Extra, depth+1)
		case "Patterned":
			return jsontok.Bool(dec, &n.Patterned)
		case "Allow":
			n.Allow, err = jsontok.Slice(dec, func(r *allowRule) error { return r.decode(dec) })
		case "Elem":
			return decodeNode(dec, &n.Elem, depth+1)
		case "CUE":
			return jsontok.Bool(dec, &n.CUE)
		case "Text":
			return jsontok.String(dec, &n.Text)
		case "Checks":
			n.Checks, err = jsontok.Slice(dec, func(c *check) error { return c.decode(dec) })
		default:
			return jsontok.Unknown("a gate's schema", name)
		}
		return err
	})
	if ok {
		*np = n
	}
	return err
}

func decodeField(dec *jsontext.Decoder, fp **field, depth int) error {
	f := new(field)
	ok, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Node":
			return decodeNode(dec, &f.Node, depth)
		case "Required":
			return jsontok.Bool(dec, &f.Required)
		}
		return jsontok.Unknown("a gate's field", name)
	})
	if ok {
		*fp = f
	}
	return err
}

func (s *scalar) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "K":
			return jsontok.Uint(dec, &s.K, 8)
		case "S":
			return jsontok.String(dec, &s.S)
		case "B":
			return jsontok.Bool(dec, &s.B)
		}
		return jsontok.Unknown("a gate's enum value", name)
	})
	return err
}

func (c *check) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Op":
			return jsontok.Int(dec, &c.Op, 64)
		case "Num":
			return c.Num.decode(dec)
		case "Re":
			return decodeRegexp(dec, &c.Re)
		}
		return jsontok.Unknown("a gate's check", name)
	})
	return err
}

func (n *number) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Neg":
			return jsontok.Bool(dec, &n.Neg)
		case "Digits":
			return jsontok.String(dec, &n.Digits)
		case "Exp":
			return jsontok.Int(dec, &n.Exp, 64)
		}
		return jsontok.Unknown("a gate's number", name)
	})
	return err
}

func (r *allowRule) decode(dec *jsontext.Decoder) error {
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Re":
			return decodeRegexp(dec, &r.Re)
		case "Neg":
			return jsontok.Bool(dec, &r.Neg)
		case "Text":
			return jsontok.String(dec, &r.Text)
		}
		return jsontok.Unknown("a gate's name pattern", name)
	})
	return err
}

// decodeRegexp reads a regular expression as its source (MarshalText's),
// compiled as regexp.Regexp.UnmarshalText would; null is none.
func decodeRegexp(dec *jsontext.Decoder, re **regexp.Regexp) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	var src string
	if err := jsontok.String(dec, &src); err != nil {
		return err
	}
	r, err := regexp.Compile(src)
	if err != nil {
		return err
	}
	*re = r
	return nil
}
