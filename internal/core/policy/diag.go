package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// A Position is a place in a policy's files: a file, and a line and column
// in it (1-based; 0 when the problem is about the whole file or directory).
type Position struct {
	File      string
	Line, Col int
}

// IsValid reports whether p names a place.
func (p Position) IsValid() bool { return p.File != "" || p.Line > 0 }

// String renders p as file:line:col, file alone without a line.
func (p Position) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.File == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Compare orders positions by file, line and column.
func (p Position) Compare(q Position) int {
	if c := strings.Compare(p.File, q.File); c != 0 {
		return c
	}
	if p.Line != q.Line {
		return p.Line - q.Line
	}
	return p.Col - q.Col
}

// A Diagnostic is one problem found in a policy, at a position in its files.
type Diagnostic struct {
	// Pos is where: file:line:col, or the directory alone when the problem
	// has no place in a file.
	Pos Position
	// Code names the rule broken ("P7", "P12", ...) or the kind of problem
	// no one rule governs ("cue", "dir", ...), for tools that sort or filter.
	Code rule.ID
	// Message is a sentence that says what is wrong and what to do.
	Message string
	// Warning marks a problem that does not stop the policy from loading.
	Warning bool
}

func (d Diagnostic) String() string {
	if !d.Pos.IsValid() {
		return d.Message
	}
	return d.Pos.String() + ": " + d.Message
}

// Errors is every problem that stopped a policy from loading.
type Errors []Diagnostic

func (e Errors) Error() string {
	lines := make([]string, len(e))
	for i, d := range e {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// position renders a CUE position as file:line:col, relative to the current
// directory when that is shorter, as cue vet does.
func position(p token.Pos) Position {
	if !p.IsValid() {
		return Position{}
	}
	return Position{File: relative(p.Filename()), Line: p.Line(), Col: p.Column()}
}

// dirPos is the position of a problem with a directory as a whole.
func dirPos(dir string) Position { return Position{File: dir} }

// relative is file relative to the current directory when it lies below it.
func relative(file string) string {
	if wd, err := os.Getwd(); err == nil && filepath.IsAbs(file) {
		if rel, err := filepath.Rel(wd, file); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return file
}

// fromCUE turns a CUE error into diagnostics, each placed at the first
// position that lies in the policy rather than in the shipped schema. CUE
// reports one mistake several times (once per alternative of a disjunction,
// again for every field derived from the wrong one); one line per source
// position is kept, and the alternatives are folded into one sentence.
func fromCUE(err error, schemaDir string) []Diagnostic {
	type group struct {
		path string
		errs []errors.Error
		pos  map[Position]int // policy positions, by how many errors name them
	}
	var groups []*group
	byPath := map[string]*group{}
	for _, e := range errors.Errors(err) {
		format, _ := e.Msg()
		if strings.Contains(format, "errors in empty disjunction") {
			continue // a summary of the errors that follow
		}
		path := cuePath(e.Path())
		g := byPath[path]
		if g == nil {
			g = &group{path: path, pos: map[Position]int{}}
			byPath[path] = g
			groups = append(groups, g)
		}
		g.errs = append(g.errs, e)
		for _, p := range policyPositions(e, schemaDir) {
			g.pos[position(p)]++
		}
	}
	out := make([]Diagnostic, 0, len(groups))
	seen := map[Position]bool{}
	for _, g := range groups {
		// The place every error of the group names is the policy's value.
		pos, n := Position{}, 0
		for p, c := range g.pos {
			if c > n || c == n && p.Compare(pos) > 0 {
				pos, n = p, c
			}
		}
		if pos.IsValid() && seen[pos] {
			continue // derived from an error already reported here
		}
		seen[pos] = true
		msg := message(g.errs)
		if g.path != "" {
			msg = g.path + ": " + msg
		}
		out = append(out, Diagnostic{Pos: pos, Code: rule.CUE, Message: msg})
	}
	return out
}

// policyPositions are the positions of an error that lie in the policy
// rather than in the shipped schema.
func policyPositions(e errors.Error, schemaDir string) []token.Pos {
	var out []token.Pos
	for _, p := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
		if p.IsValid() && !strings.HasPrefix(p.Filename(), schemaDir) && !strings.HasPrefix(p.Filename(), schemaRoot) {
			out = append(out, p)
		}
	}
	return out
}

// message renders the errors CUE gave for one place. Conflicts that share
// the policy's value are the alternatives it failed; they become one sentence.
func message(errs []errors.Error) string {
	// The policy's value is the one argument every conflict shares.
	for _, e := range errs {
		if format, args := e.Msg(); !strings.HasPrefix(format, "conflicting values %s and %s") || len(args) < 2 {
			return text(e) // a bound or a closedness error says more than a conflict
		}
	}
	count := map[string]int{}
	var pairs [][2]string
	for _, e := range errs {
		_, args := e.Msg()
		a, b := fmt.Sprint(args[0]), fmt.Sprint(args[1])
		pairs = append(pairs, [2]string{a, b})
		count[a]++
		if b != a {
			count[b]++
		}
	}
	var value string
	for _, p := range pairs[:1] {
		for _, x := range p {
			if count[x] == len(pairs) {
				value = x
			}
		}
	}
	var alts []string
	for _, p := range pairs {
		if p[0] == value {
			alts = append(alts, p[1])
		} else {
			alts = append(alts, p[0])
		}
	}
	if len(alts) == 1 || value == "" {
		return text(errs[0])
	}
	alts = dropCovered(alts)
	if len(alts) > 2 {
		return fmt.Sprintf("%s is not allowed here: it must be one of %s", value, strings.Join(alts, ", "))
	}
	return fmt.Sprintf("%s is not allowed here: it must be %s", value, strings.Join(alts, " or "))
}

// suggestFields adds to each "field not allowed" the schema's field the
// policy's key is closest to, among those the schema allows where it is
// written, so that a misspelt key (rule P8) says what to write instead.
func suggestFields(errs []Diagnostic, v cue.Value) []Diagnostic {
	for i, d := range errs {
		path, ok := strings.CutSuffix(d.Message, ": field not allowed")
		if !ok {
			continue
		}
		p := cue.ParsePath(path)
		sels := p.Selectors()
		if p.Err() != nil || len(sels) == 0 || sels[len(sels)-1].LabelType() != cue.StringLabel {
			continue
		}
		bad := sels[len(sels)-1].Unquoted()
		it, err := v.LookupPath(cue.MakePath(sels[:len(sels)-1]...)).Fields(cue.Optional(true))
		if err != nil {
			continue
		}
		var names []string
		for it.Next() {
			if s := it.Selector(); s.LabelType() == cue.StringLabel && s.Unquoted() != bad {
				names = append(names, s.Unquoted())
			}
		}
		if near := tools.Closest(bad, names); near != "" {
			errs[i].Message += fmt.Sprintf("; did you mean %q?", near)
		}
	}
	return errs
}

var posRE = regexp.MustCompile(`\S+:\d+:\d+: `)

// forFileRE is the file CUE's JSON and YAML decoders name in their message
// (`invalid JSON for file "/abs/p.json"`), which the diagnostic's position
// names already.
var forFileRE = regexp.MustCompile(` for file "[^"]*"`)

// text is an error's message without its path and positions. Some errors
// (a failed import, a module file without a language version) keep their
// detail out of Msg, so the full text is used when it says more.
func text(e errors.Error) string {
	format, args := e.Msg()
	msg := fmt.Sprintf(format, args...)
	full := posRE.ReplaceAllString(e.Error(), "")
	full = strings.TrimPrefix(full, strings.Join(e.Path(), ".")+": ")
	full, msg = forFileRE.ReplaceAllString(full, ""), forFileRE.ReplaceAllString(msg, "")
	if strings.Contains(msg, "%!") || len(full) > len(msg) {
		return full
	}
	return msg
}

// dropCovered drops a default such as 4 from "4 or int": the type covers it.
func dropCovered(alts []string) []string {
	has := map[string]bool{}
	for _, a := range alts {
		has[a] = true
	}
	var out []string
	for _, a := range alts {
		switch {
		case strings.HasPrefix(a, `"`) && has["string"]:
		case len(a) > 0 && (a[0] >= '0' && a[0] <= '9' || a[0] == '-') && (has["int"] || has["number"]):
		case (a == "true" || a == "false") && has["bool"]:
		default:
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// cuePath renders an error's path without the #Policy the loader unified with.
func cuePath(sel []string) string {
	if len(sel) > 0 && sel[0] == "#Policy" {
		sel = sel[1:]
	}
	return strings.Join(sel, ".")
}

// sortDiagnostics orders diagnostics by file, line and column.
func sortDiagnostics(ds []Diagnostic) {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int { return a.Pos.Compare(b.Pos) })
}
