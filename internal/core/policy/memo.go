package policy

import (
	"bytes"
	"crypto/sha256"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
)

// A policy with many tools declares most of them alike (schema.#Echo,
// a server's tools narrowed the same way). Unifying each with its
// built-in's declaration was most of a 1,000-tool load (issue 32), so a
// tool written exactly as an earlier one, in the same file, shares that
// one's compiled form: the same text in the same scope is the same value;
// laid out alike too, its places are that one's moved by whole lines.
// The sharing holds only where the syntax shows every conjunct of a tool,
// so toolDecls gives up on whatever could add one unseen.

// shareTools turns the sharing off, for the tests that hold it equal to
// compiling every tool on its own.
var shareTools = true

// evaluating, when set, is told each tool compiled from its own CUE value,
// for the tests that count them.
var evaluating func(name string)

// toolDecl is where the policy declares one tool, and the text of it.
type toolDecl struct {
	key  string   // file and expression: equal keys are equal values
	pos  Position // the expression, which names the implementation
	many bool     // declared more than once: its conjuncts meet
	// For a reload's reuse (reuse.go): the expression, its file, and the
	// names of the tools declared beside it, which it may refer to.
	expr     ast.Expr
	file     *ast.File
	siblings map[string]bool
	shape    string // its layout (shapeOf), once asked for
	end      int    // the last line of it, with shape
	share    string // shareKey, once asked for
}

// shapeOf is where each node of d lies, lines counted from its first and
// columns on it from its own (layout), and its last line. Two
// declarations of one key and one shape place every value alike but for
// the lines between them and the columns of their first line: a tool that
// shares another's compiled form has its places moved by as many (moved);
// declarations of one text laid out otherwise share nothing.
func (d *toolDecl) shapeOf() (string, int) {
	if d.shape == "" && d.expr != nil {
		h := sha256.New()
		p := d.expr.Pos()
		d.end = layout(h, d.expr, p.Line(), p.Column())
		d.shape = string(h.Sum(nil))
	}
	return d.shape, d.end
}

// shareKey is what declarations that share one compiled form have in
// common: their key and shape.
func (d *toolDecl) shareKey() string {
	if d.share == "" {
		shape, _ := d.shapeOf()
		d.share = d.key + "\x00" + shape
	}
	return d.share
}

// alike reports whether d may share what was compiled for from: one key,
// one shape.
func (d *toolDecl) alike(from *toolDecl) bool {
	if from == nil || d.key != from.key {
		return false
	}
	a, _ := d.shapeOf()
	b, _ := from.shapeOf()
	return a == b
}

// moved is t, compiled for the declaration from, as declared at d (alike):
// a place within from's lines moves to the same place in d's, on their
// first line by as many columns as d's value lies from from's.
func (d *toolDecl) moved(t *Tool, from *toolDecl) *Tool {
	c := *t
	_, end := from.shapeOf()
	shift := func(p Position) Position {
		if p.File == from.pos.File && p.Line >= from.pos.Line && p.Line <= end {
			if p.Line == from.pos.Line {
				p.Col += d.pos.Col - from.pos.Col
			}
			p.Line += d.pos.Line - from.pos.Line
		}
		return p
	}
	c.subjectPos = shift(c.subjectPos)
	c.typeNames = slices.Clone(c.typeNames)
	for i := range c.typeNames {
		c.typeNames[i].pos = shift(c.typeNames[i].pos)
	}
	return &c
}

// toolDecls maps each tool name to its one declaration, or is nil when a
// file declares tools, or could add to them, in a form it cannot follow.
// src holds the files' bytes, where a declaration's text is read.
func toolDecls(files []*ast.File, src sources) map[string]*toolDecl {
	if !shareTools {
		return nil
	}
	decls := map[string]*toolDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.Package, *ast.ImportDecl, *ast.CommentGroup, *ast.Attribute:
			case *ast.Field:
				name, ok := plainLabel(d)
				if !ok {
					return nil
				}
				if name == "tools" && !addTools(decls, f, d.Value, src[f.Filename]) {
					return nil
				}
			default: // an embedding, a comprehension, a let: anything may follow
				return nil
			}
		}
	}
	return decls
}

// addTools records the fields of a tools struct; src is its file's bytes
// (nil when they are not at hand).
func addTools(decls map[string]*toolDecl, file *ast.File, v ast.Expr, src []byte) bool {
	s, ok := v.(*ast.StructLit)
	if !ok {
		return false
	}
	siblings := map[string]bool{}
	rel := relative(file.Filename) // once: it asks for the working directory
	for i, e := range s.Elts {
		switch e := e.(type) {
		case *ast.CommentGroup, *ast.Attribute:
		case *ast.Field:
			name, ok := plainLabel(e)
			if !ok {
				return false
			}
			text, textual := declText(src, file.Filename, s, i)
			if !textual {
				formatted, err := format.Node(e.Value)
				if err != nil {
					return false
				}
				text = append([]byte("\x00formatted\x00"), formatted...)
			}
			siblings[name] = true
			if d, ok := decls[name]; ok {
				d.many = true
				continue
			}
			var at Position
			if p := e.Value.Pos(); p.IsValid() && p.Filename() == file.Filename {
				at = Position{File: rel, Line: p.Line(), Col: p.Column()}
			} else {
				at = position(p)
			}
			d := &toolDecl{key: file.Filename + "\x00" + string(text), pos: at,
				expr: e.Value, file: file, siblings: siblings}
			if textual {
				// Its text from the file lays it out: a node's line is
				// counted in it, and its column from the value's first
				// byte on that line, from the line's start after it.
				d.shape, d.end = "text", at.Line+bytes.Count(text, []byte("\n"))
			}
			decls[name] = d
		default:
			return false
		}
	}
	return true
}

// declText is the text of the value of field s.Elts[i] as src (its file's
// bytes) has it, read from the value's first byte to the element after it,
// or to the struct's closing brace, less the white space and commas that
// end it: a span that holds the whole value whatever node it is, and
// nothing else but comments, so equal texts are equal values. It was
// formatted from the syntax for each tool, a fifteenth of a load (issue
// 49). False when the positions do not say where the text lies.
func declText(src []byte, file string, s *ast.StructLit, i int) ([]byte, bool) {
	start := s.Elts[i].(*ast.Field).Value.Pos()
	end := s.Rbrace
	if i+1 < len(s.Elts) {
		end = s.Elts[i+1].Pos()
	}
	if src == nil || !start.IsValid() || !end.IsValid() || start.Filename() != file || end.Filename() != file {
		return nil, false
	}
	a, b := start.Offset(), end.Offset()
	if a < 0 || a >= b || b > len(src) {
		return nil, false
	}
	return bytes.TrimRight(src[a:b], " \t\r\n,"), true
}

// plainLabel is a field's name when it is a regular field with a plain
// label: no alias, pattern, interpolation or optional marker.
func plainLabel(f *ast.Field) (string, bool) {
	if f.Constraint != token.ILLEGAL {
		return "", false
	}
	name, isIdent, err := ast.LabelName(f.Label)
	if err != nil || !isIdent && !isString(f.Label) {
		return "", false
	}
	return name, true
}

func isString(l ast.Label) bool {
	b, ok := l.(*ast.BasicLit)
	return ok && b.Kind == token.STRING
}

// shareable reports whether tool name may share a compiled tool with
// another of the same declaration: declared once, in a form followed,
// and no server's SERVER__TOOL, which the schema's comprehension extends.
func shareable(decls map[string]*toolDecl, name string) (*toolDecl, bool) {
	d, ok := decls[name]
	return d, ok && !d.many && !strings.Contains(name, "__")
}
