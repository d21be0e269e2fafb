package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"cuelang.org/go/cue"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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
func (g *Gate) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	var p plan
	if err := jsonv2.UnmarshalDecode(dec, &p); err != nil {
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
		return errors.New("the schema is nested deeper than a compiled one can be")
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
