package gate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	"cuelang.org/go/cue"
)

// ErrNeedsCUE is returned by Save for a gate whose schema says more than its
// shape models: such a gate decides some inputs through CUE, so it cannot be
// kept without its CUE value.
var ErrNeedsCUE = errors.New("the schema needs CUE to decide some inputs")

// Save returns the gate as plain data (it marshals to JSON) that Restore
// turns back into a gate that decides every input as this one does,
// without CUE: a one-shot process (the Claude Code hook) can then skip the
// policy's load. It fails with ErrNeedsCUE when the shape alone does not
// decide every input.
func (g *Gate) Save() (*Saved, error) {
	if g.root.cue {
		return nil, ErrNeedsCUE
	}
	return &Saved{Limits: g.lim, Root: saveNode(g.root)}, nil
}

// Restore makes a gate of what Save returned, or of its JSON read back.
// The gate has no CUE schema (Schema returns the zero value), which its
// shape never consults.
func Restore(s *Saved) (*Gate, error) {
	if s == nil || s.Root == nil {
		return nil, errors.New("the saved gate has no schema")
	}
	root, err := s.Root.node(0)
	if err != nil {
		return nil, fmt.Errorf("the saved gate cannot be restored: %w", err)
	}
	return &Gate{root: root, lim: s.Limits}, nil
}

// Saved is a gate as data. Its forms spell out every field of the shape,
// nil and empty kept apart (an enum of nothing is not "no enum"): a field
// is left out of the JSON only when it is zero (omitzero), which an empty
// list or map is not.
type Saved struct {
	Limits Limits
	Root   *savedNode
}

type savedNode struct {
	Kinds     kinds                 `json:",omitzero"`
	Enum      []savedScalar         `json:",omitzero"`
	Fields    map[string]savedField `json:",omitzero"` // its sorted names are the node's names
	Closed    bool                  `json:",omitzero"`
	Extra     *savedNode            `json:",omitzero"`
	Patterned bool                  `json:",omitzero"`
	Allow     []savedRule           `json:",omitzero"`
	Elem      *savedNode            `json:",omitzero"`
	Text      string                `json:",omitzero"`
	Checks    []savedCheck          `json:",omitzero"`
}

type savedField struct {
	Node     *savedNode `json:",omitzero"`
	Required bool       `json:",omitzero"`
}

type savedScalar struct {
	K kinds  `json:",omitzero"`
	S string `json:",omitzero"`
	B bool   `json:",omitzero"`
}

type savedRule struct {
	Re   string `json:",omitzero"`
	Neg  bool   `json:",omitzero"`
	Text string `json:",omitzero"`
}

type savedCheck struct {
	Op     cue.Op  `json:",omitzero"`
	Neg    bool    `json:",omitzero"`
	Digits string  `json:",omitzero"`
	Exp    int     `json:",omitzero"`
	Re     *string `json:",omitzero"`
}

func saveNode(n *node) *savedNode {
	if n == nil {
		return nil
	}
	s := &savedNode{Kinds: n.kinds, Closed: n.closed, Extra: saveNode(n.extra),
		Patterned: n.patterned, Elem: saveNode(n.elem), Text: n.text}
	if n.enum != nil {
		s.Enum = make([]savedScalar, len(n.enum))
		for i, e := range n.enum {
			s.Enum[i] = savedScalar{K: e.k, S: e.s, B: e.b}
		}
	}
	if n.fields != nil {
		s.Fields = make(map[string]savedField, len(n.fields))
		for name, f := range n.fields {
			s.Fields[name] = savedField{Node: saveNode(f.node), Required: f.required}
		}
	}
	if n.allow != nil {
		s.Allow = make([]savedRule, len(n.allow))
		for i, r := range n.allow {
			s.Allow[i] = savedRule{Re: r.re.String(), Neg: r.neg, Text: r.text}
		}
	}
	if n.checks != nil {
		s.Checks = make([]savedCheck, len(n.checks))
		for i, c := range n.checks {
			s.Checks[i] = savedCheck{Op: c.op, Neg: c.num.neg, Digits: c.num.digits, Exp: c.num.exp}
			if c.re != nil {
				re := c.re.String()
				s.Checks[i].Re = &re
			}
		}
	}
	return s
}

func (s *savedNode) node(depth int) (*node, error) {
	if s == nil {
		return nil, nil
	}
	if depth > maxCompileDepth+2 {
		return nil, errors.New("the saved schema is nested deeper than a compiled one can be")
	}
	n := &node{kinds: s.Kinds, closed: s.Closed, patterned: s.Patterned, text: s.Text}
	var err error
	if n.extra, err = s.Extra.node(depth + 1); err != nil {
		return nil, err
	}
	if n.elem, err = s.Elem.node(depth + 1); err != nil {
		return nil, err
	}
	if s.Enum != nil {
		n.enum = make([]scalar, len(s.Enum))
		for i, e := range s.Enum {
			n.enum[i] = scalar{k: e.K, s: e.S, b: e.B}
		}
	}
	if s.Fields != nil {
		n.fields = make(map[string]*field, len(s.Fields))
		for name, f := range s.Fields {
			if f.Node == nil {
				return nil, fmt.Errorf("the saved field %q has no schema", name)
			}
			fn, err := f.Node.node(depth + 1)
			if err != nil {
				return nil, err
			}
			n.fields[name] = &field{node: fn, required: f.Required}
			n.names = append(n.names, name)
		}
		slices.Sort(n.names)
	}
	if s.Allow != nil {
		n.allow = make([]allowRule, len(s.Allow))
		for i, r := range s.Allow {
			re, err := regexp.Compile(r.Re)
			if err != nil {
				return nil, err
			}
			n.allow[i] = allowRule{re: re, neg: r.Neg, text: r.Text}
		}
	}
	if s.Checks != nil {
		n.checks = make([]check, len(s.Checks))
		for i, c := range s.Checks {
			n.checks[i] = check{op: c.Op, num: number{neg: c.Neg, digits: c.Digits, exp: c.Exp}}
			if c.Re != nil {
				re, err := regexp.Compile(*c.Re)
				if err != nil {
					return nil, err
				}
				n.checks[i].re = re
			}
		}
	}
	return n, nil
}
