package policy

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cuebuild "cuelang.org/go/cue/build"
	"cuelang.org/go/cue/format"

	"aimon.dev/gw/internal/core/rule"
)

// A reload recompiles what changed (issue 32): a tool compiled by the
// previous generation is reused when nothing its value can depend on has
// changed. Its key is what the syntax shows of those dependencies: the
// tool's own declaration, the package's top-level declarations it names
// (and those they name, transitively), the imports of the files they lie
// in, every imported package, the module file and the load's settings.
// Each declaration is hashed with the line, relative to its first, and
// column of every node: laid out alike, a declaration that moved by whole
// lines places every value as before, moved by as many lines, and the
// positions a reused tool holds are moved so. A declaration that names
// tools, or a tool beside it, is never reused: the schema's comprehension
// over servers adds to tools, and toolDecls gives up on whatever else could.

// WithPrevious lets the load reuse the tools prev compiled where their
// keys match, and keep what it compiles for the next load; prev is only
// read, and nil is a load from scratch. A load without it keeps nothing
// (check, vet: no load follows).
func WithPrevious(prev *Generation) Option {
	return func(o *options) { o.prev, o.reuse = prev, true }
}

// reuser is one load's reuse: what it may take and what it offers the next.
type reuser struct {
	prev  map[string]*kept // the previous generation's, read only
	next  map[string]*kept // this load's, for the next
	scope []byte           // the load's settings, module file and imported packages
	top   map[string][]topDecl
	seen  map[string]*topName // by top-level name, filled as tools name them
	rels  map[string]string
	heads map[*ast.File][]byte // each file's preamble fingerprinted, once asked for; nil when it cannot be
}

// kept is a compiled tool, without CUE, and where the declarations its
// key hashes lay when it was compiled, in the key's order.
type kept struct {
	tool  *Tool
	spans []span
}

// span is the lines of a declaration, in a file named as positions name it.
type span struct {
	file       string
	start, end int
}

// rel is file as positions name it, relative once per file.
func (r *reuser) rel(file string) string {
	f, ok := r.rels[file]
	if !ok {
		f = relative(file)
		r.rels[file] = f
	}
	return f
}

// topDecl is one top-level field of the package and the file it is in.
type topDecl struct {
	file *ast.File
	f    *ast.Field
}

// topName is what a top-level name contributes to a key: its
// declarations' fingerprint and the names they use; ok is false when
// they use tools.
type topName struct {
	sum   []byte
	names []string
	files []*ast.File
	spans []span
	ok    bool
}

// newReuser hashes what every tool's key shares; nil when an imported
// file cannot be formatted (no tool is then keyed).
func newReuser(prev *Generation, inst *cuebuild.Instance, root, schemaDir, dir string, src sources) *reuser {
	r := &reuser{next: map[string]*kept{}, top: map[string][]topDecl{}, seen: map[string]*topName{}, rels: map[string]string{}, heads: map[*ast.File][]byte{}}
	if prev != nil {
		r.prev = prev.reuse
	}
	h := sha256.New()
	wd, _ := os.Getwd() // positions are relative to it
	mod, _ := os.ReadFile(filepath.Join(root, "cue.mod", "module.cue"))
	fmt.Fprintf(h, "reuse/1\x00%s\x00%s\x00%s\x00%d\x00%s\x00", dir, schemaDir, wd, len(mod), mod)
	ok := true
	seen := map[*cuebuild.Instance]bool{inst: true}
	var walk func(*cuebuild.Instance)
	walk = func(i *cuebuild.Instance) {
		for _, imp := range i.Imports {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			fmt.Fprintf(h, "import\x00%s\x00", imp.ImportPath)
			for _, f := range imp.Files {
				if b, laid := src[f.Filename]; laid {
					// Its bytes say its syntax and every place in it.
					fmt.Fprintf(h, "bytes\x00%s\x00%d\x00", f.Filename, len(b))
					h.Write(b)
					continue
				}
				_, good := fingerprint(h, f.Filename, f, 0)
				ok = ok && good
			}
			walk(imp)
		}
	}
	walk(inst)
	if !ok {
		return nil
	}
	r.scope = h.Sum(nil)
	for _, f := range inst.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.Field); ok {
				if name, ok := plainLabel(fd); ok {
					r.top[name] = append(r.top[name], topDecl{f, fd})
				}
			}
		}
	}
	return r
}

// key is tool name's key, declared as d, and where the declarations it
// hashes lie; false when the tool cannot be reused.
func (r *reuser) key(name string, d *toolDecl, mode rule.Mode) (string, []span, bool) {
	if r == nil || d.expr == nil {
		return "", nil, false
	}
	names := map[string]bool{}
	var queue []string
	use := func(n string) {
		if !names[n] {
			names[n] = true
			queue = append(queue, n)
		}
	}
	refNames(d.expr, use)
	files := map[*ast.File]bool{d.file: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == "tools" || d.siblings[n] {
			return "", nil, false // a tool's value may depend on another's
		}
		t := r.topName(n)
		if !t.ok {
			return "", nil, false
		}
		for _, f := range t.files {
			files[f] = true
		}
		for _, m := range t.names {
			use(m)
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%x\x00%s\x00%s\x00%s\x00", r.scope, mode, name, d.key)
	line0 := d.expr.Pos().Line()
	end := layout(h, d.expr, line0, 0) // d.key holds its text
	spans := []span{{r.rel(d.file.Filename), line0, end}}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintf(h, "name\x00%s\x00%x\x00", n, r.seen[n].sum)
		spans = append(spans, r.seen[n].spans...)
	}
	// Each file's imports say what a name that is no field resolves to.
	for _, f := range slices.SortedFunc(maps.Keys(files), func(a, b *ast.File) int { return strings.Compare(a.Filename, b.Filename) }) {
		head := r.head(f)
		if head == nil {
			return "", nil, false
		}
		fmt.Fprintf(h, "file\x00%s\x00%x\x00", f.Filename, head)
	}
	return string(h.Sum(nil)), spans, true
}

// head fingerprints f's package clause, imports and attributes, once per
// file rather than once per tool of it; nil when they cannot be formatted.
func (r *reuser) head(f *ast.File) []byte {
	if sum, ok := r.heads[f]; ok {
		return sum
	}
	h := sha256.New()
	var sum []byte
	for _, d := range f.Preamble() {
		if _, ok := fingerprint(h, f.Filename, d, 0); !ok {
			r.heads[f] = nil
			return nil
		}
	}
	sum = h.Sum(nil)
	r.heads[f] = sum
	return sum
}

// topName fingerprints the package's top-level declarations of name n.
func (r *reuser) topName(n string) *topName {
	if t, ok := r.seen[n]; ok {
		return t
	}
	t := &topName{ok: true}
	h := sha256.New()
	uses := map[string]bool{}
	for _, d := range r.top[n] {
		line0 := d.f.Pos().Line()
		end, ok := fingerprint(h, d.file.Filename, d.f, line0)
		t.ok = t.ok && ok
		t.files = append(t.files, d.file)
		t.spans = append(t.spans, span{r.rel(d.file.Filename), line0, end})
		refNames(d.f.Value, func(m string) { uses[m] = true })
	}
	t.ok = t.ok && !uses["tools"]
	t.names = slices.Sorted(maps.Keys(uses))
	t.sum = h.Sum(nil)
	r.seen[n] = t
	return t
}

// reused is the tool the previous generation compiled under key, as a
// copy this generation owns, its positions moved to where spans lie.
func (r *reuser) reused(key string, spans []span) *Tool {
	if r == nil || r.prev == nil {
		return nil
	}
	k, ok := r.prev[key]
	if !ok {
		return nil
	}
	c := *k.tool
	ok = true
	c.subjectPos, ok = k.moved(c.subjectPos, spans, ok)
	c.typeNames = slices.Clone(c.typeNames)
	for i := range c.typeNames {
		c.typeNames[i].pos, ok = k.moved(c.typeNames[i].pos, spans, ok)
	}
	if !ok {
		return nil
	}
	r.next[key] = k
	return &c
}

// moved is p, which lay where k's spans say, where spans lie now. A
// position in no file of a span (the schema, an imported package) stays;
// one in such a file but in none of its spans cannot be placed (false).
func (k *kept) moved(p Position, spans []span, ok bool) (Position, bool) {
	in := false
	for i, s := range k.spans {
		if p.File == s.file && p.Line >= s.start && p.Line <= s.end {
			p.Line += spans[i].start - s.start
			return p, ok
		}
		in = in || p.File == s.file
	}
	return p, ok && !in
}

// keep offers t, compiled under key where spans lie, to the next load: a
// copy without its CUE, which belongs to this generation's context.
func (r *reuser) keep(key string, spans []span, t *Tool) {
	if r == nil || t.Gate == nil || t.Gate.NeedsCUE() {
		return // such a gate holds its whole load's CUE alive
	}
	c := *t
	c.Input, c.value = cue.Value{}, cue.Value{}
	r.next[key] = &kept{&c, spans}
}

// refNames calls use with every identifier n may refer to outside itself:
// all of them but labels and the selected names of selectors. Names bound
// inside n are included too, which can only make a key stricter.
func refNames(n ast.Node, use func(string)) {
	ast.Walk(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			refNames(n.X, use)
			return false
		case *ast.Field:
			switch n.Label.(type) {
			case *ast.Ident, *ast.BasicLit:
				if n.Value != nil {
					refNames(n.Value, use)
				}
				return false
			}
		case *ast.Ident:
			use(n.Name)
		}
		return true
	}, nil)
}

// fingerprint writes n's text and the position of each of its nodes,
// lines counted from line0, and returns layout's last line; false when n
// cannot be formatted (nothing is then keyed by it).
func fingerprint(h hash.Hash, file string, n ast.Node, line0 int) (int, bool) {
	text, err := format.Node(n)
	if err != nil {
		return 0, false
	}
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", file, len(text), text)
	return layout(h, n, line0, 0), true
}

// layout writes the line, counted from line0, and column of each of n's
// nodes: text alike and laid out alike, two declarations place every
// value alike but for the lines between them. With col0 (not 0), the
// columns of line0 are counted from col0: two declarations then place
// their values alike but for the lines between them and, on their first
// line, the columns (a tool named Tool10 and one named Tool9). It returns
// the last line n's nodes lie on (a node made from YAML may have no end).
func layout(h hash.Hash, n ast.Node, line0, col0 int) (end int) {
	end = line0
	var b []byte
	ast.Walk(n, func(n ast.Node) bool {
		p := n.Pos()
		end = max(end, p.Line(), n.End().Line())
		b = strconv.AppendInt(b, int64(p.Line()-line0), 10)
		col := p.Column()
		if col0 != 0 && p.Line() == line0 {
			col -= col0
			b = append(b, '+')
		}
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(col), 10)
		b = append(b, ';')
		return true
	}, nil)
	h.Write(b)
	return end
}
