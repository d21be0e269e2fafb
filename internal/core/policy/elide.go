package policy

import (
	"regexp"
	"strconv"
	"sync"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"

	"aimon.dev/gw/internal/core/rule"
)

// CUE evaluating every tool against #Policy was most of a 1,000-tool load
// (issue 49), even where the tools share one compiled form (memo.go) or a
// reload reuses what the generation before compiled (reuse.go). Such a
// tool needs no evaluation of its own when nothing in the policy refers
// to it: it is left out of the syntax CUE builds, and takes its compiled
// form from the tool written alike that CUE does evaluate, or from the
// generation before. The policy is still loaded whole: every other field
// is evaluated and unified with #Policy as before. A load that finds any
// problem is made again with every tool evaluated, so that each says its
// own at file:line:col.

// elision is what one load leaves out of CUE's evaluation.
type elision struct {
	shared map[string]bool  // tools written as one CUE evaluates, by name
	reused map[string]*Tool // tools the generation before compiled, by name
	mode   rule.Mode        // the validation mode the reuse keys assume
	failed bool             // a left-out tool cannot be completed: load again whole
}

// elide returns the syntax CUE is to build, without the tools it may leave
// out, and what it left out; files itself and nil when it leaves out none.
func (c *compiler) elide(files []*ast.File) ([]*ast.File, *elision) {
	if c.decls == nil {
		return files, nil
	}
	refs, ok := referenced(files)
	if !ok {
		return files, nil
	}
	e := &elision{shared: map[string]bool{}, reused: map[string]*Tool{}}
	if c.reuse != nil && c.opts.prev != nil {
		e.mode = c.opts.prev.Validation
	}
	nameOK := toolNameCheck(c.def)
	first := map[string]*toolDecl{} // the first declaration of each key
	leave := func(f *ast.Field) bool {
		name, _ := plainLabel(f)
		d, share := shareable(c.decls, name)
		if !share {
			return false
		}
		met := first[d.shareKey()]
		if met == nil {
			first[d.shareKey()] = d
		}
		// A tool another value names must be there; a name #Policy does
		// not take is left for CUE to say why.
		if refs[name] || f.Alias != nil || isAlias(f.Label) || !nameOK(c.ctx, name) {
			return false
		}
		if met != nil {
			// Laid out otherwise, its places cannot be moved: CUE
			// evaluates it.
			if !d.alike(met) {
				return false
			}
			e.shared[name] = true
			return true
		}
		if c.opts.prev == nil {
			return false
		}
		if key, spans, ok := c.reuse.key(name, d, e.mode); ok {
			if t := c.reuse.reused(key, spans); t != nil {
				t.ImplPos = d.pos
				e.reused[name] = t
				return true
			}
		}
		return false
	}
	out := make([]*ast.File, len(files))
	for i, f := range files {
		out[i] = f
		var decls []ast.Decl // f's, once one changed
		for j, d := range f.Decls {
			fd, lit := toolsStruct(d)
			var elts []ast.Decl
			if lit != nil {
				for _, el := range lit.Elts {
					if tf, ok := el.(*ast.Field); !ok || !leave(tf) {
						elts = append(elts, el)
					}
				}
			}
			if lit == nil || len(elts) == len(lit.Elts) {
				if decls != nil {
					decls = append(decls, d)
				}
				continue
			}
			if decls == nil {
				decls = append(decls, f.Decls[:j]...)
			}
			l, field := *lit, *fd
			l.Elts, field.Value = elts, &l
			decls = append(decls, &field)
		}
		if decls != nil {
			copied := *f
			copied.Decls = decls
			out[i] = &copied
		}
	}
	if len(e.shared)+len(e.reused) == 0 {
		return files, nil
	}
	return out, e
}

// toolsStruct is d and its struct when d is a top-level tools: {...}.
func toolsStruct(d ast.Decl) (*ast.Field, *ast.StructLit) {
	fd, ok := d.(*ast.Field)
	if !ok {
		return nil, nil
	}
	lit, ok := fd.Value.(*ast.StructLit)
	if name, plain := plainLabel(fd); !ok || !plain || name != "tools" {
		return nil, nil
	}
	return fd, lit
}

func isAlias(l ast.Label) bool {
	_, ok := l.(*ast.Alias)
	return ok
}

// referenced is every name the files may use to reach a field: each
// identifier that is not a label, each selected name and each constant
// index. It is false when they may reach the tools without naming them:
// the tools struct named or aliased, or self (the struct it lies in).
func referenced(files []*ast.File) (map[string]bool, bool) {
	refs := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			// An alias of the tools field would reach them unnamed.
			if fd, _ := toolsStruct(d); fd != nil && (fd.Alias != nil || isAlias(fd.Label)) {
				return nil, false
			}
		}
		walkNames(f, refs)
	}
	return refs, !refs["tools"] && !refs["self"] && !refs["__self"]
}

// walkNames adds to refs the names n uses (see referenced).
func walkNames(n ast.Node, refs map[string]bool) {
	ast.Walk(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			switch l := n.Label.(type) {
			case *ast.Ident, *ast.BasicLit:
			default:
				walkNames(l, refs)
			}
			if n.Alias != nil {
				walkNames(n.Alias, refs)
			}
			if n.Value != nil {
				walkNames(n.Value, refs)
			}
			return false
		case *ast.SelectorExpr:
			walkNames(n.X, refs)
			if name, _, err := ast.LabelName(n.Sel); err == nil {
				refs[name] = true
			}
			return false
		case *ast.IndexExpr:
			if b, ok := n.Index.(*ast.BasicLit); ok && b.Kind == token.STRING {
				if s, err := strconv.Unquote(b.Value); err == nil {
					refs[s] = true
				}
			}
		case *ast.Ident:
			refs[n.Name] = true
		}
		return true
	}, nil)
}

// completeElided gives the tools left out of CUE their compiled forms,
// from the tools written alike (compiled, by declaration) and the reused
// ones; it marks the elision failed when one cannot be completed so.
func (c *compiler) completeElided(g *Generation, compiled map[string]*Tool, from map[string]*toolDecl) {
	e := c.elided
	if e == nil {
		return
	}
	if len(e.reused) > 0 && g.Validation != e.mode {
		e.failed = true // the reuse keys assumed another mode
		return
	}
	for name, t := range e.reused {
		d := c.decls[name]
		g.Tools[name], compiled[d.shareKey()], from[d.shareKey()] = t, t, d
	}
	for name := range e.shared {
		d := c.decls[name]
		r := compiled[d.shareKey()]
		if r == nil || !d.alike(from[d.shareKey()]) {
			e.failed = true // it failed, waits for its implementation, or lies otherwise
			return
		}
		t := d.moved(r, from[d.shareKey()])
		t.Name, t.ImplPos = name, d.pos
		g.Tools[name] = t
	}
}

// toolNameCheck reports whether a name is one #ToolName takes: by its
// pattern, read from the schema once, when it is one (=~"..."), as CUE
// would match it (RE2); by CUE for each name otherwise.
func toolNameCheck(def cue.Value) func(*cue.Context, string) bool {
	pattern := toolNamePattern.Do(def)
	if pattern == nil {
		name := def.LookupPath(cue.MakePath(cue.Def("ToolName")))
		return func(ctx *cue.Context, s string) bool { return name.Unify(ctx.Encode(s)).Err() == nil }
	}
	return func(_ *cue.Context, s string) bool { return pattern.MatchString(s) }
}

var toolNamePattern onceRE

// onceRE is the pattern of #ToolName, read once (nil when it is no
// plain pattern); the schema is the binary's.
type onceRE struct {
	once sync.Once
	re   *regexp.Regexp
}

func (o *onceRE) Do(def cue.Value) *regexp.Regexp {
	o.once.Do(func() {
		op, args := def.LookupPath(cue.MakePath(cue.Def("ToolName"))).Expr()
		if op != cue.RegexMatchOp || len(args) != 1 {
			return
		}
		if s, err := args[0].String(); err == nil {
			o.re, _ = regexp.Compile(s)
		}
	})
	return o.re
}
