package allow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/literal"

	"aimon.dev/gw/tools"
)

// List is one declared allowed-tools list: per tool, its entries with a
// matcher each and an index over them. A nil *List is a surface that
// declares no list: unlimited (P11). Its CUE value, the lattice's meaning
// of the list, is built only when asked for (Value): decisions come from
// the matchers, which a differential test holds to it.
type List struct {
	ctx      *cue.Context
	subjects map[string]Subject
	tools    map[string]*toolEntries // by tool
	names    []string                // tools with an entry, sorted
	entries  []string                // as written
	// allowNone is a list that declares no allowed-tools, only deny or
	// ask entries: its allow part does not narrow (P11).
	allowNone bool
	deny, ask map[string]*toolEntries // denied-tools and ask-tools, by tool (P14)
	denied    []string                // denied-tools as written
	asked     []string                // ask-tools as written

	cueOnce sync.Once
	src     string
	value   cue.Value
}

// entryInfo is a parsed entry with what it contributes on its own.
type entryInfo struct {
	Entry
	err  error      // the pattern cannot be used: it denies (P7)
	idx  int        // its place in the list
	m    matcher    // its constraint on the subject; nil for name-only, bad or rule-only
	rule bool       // the tool's own rule reads its pattern (P2)
	alt  string     // its CUE alternative on the subject, for the reference value
	cmd  cmdPattern // a command pattern's words, for deny and ask (P14)
}

// Compile compiles one declared list. subjects maps every tool the policy
// defines to its declared subject (Kind None when it has none); a tool not in
// subjects is unknown. The errors are *EntryError, one for each entry that
// cannot be used: an entry without a readable tool name is dropped, and a
// pattern that cannot be used denies every call of its tool (P7). All lists
// of one chain must be compiled with the same ctx, which is used only for
// their CUE values (Value).
func Compile(ctx *cue.Context, entries []string, subjects map[string]Subject) (*List, []error) {
	return CompileDecl(ctx, Decl{Allow: entries}, subjects)
}

// Decl is what one source of a surface declares: its allowed-tools, or
// none (AllowNone: unlimited, P11), and its denied-tools and ask-tools
// (P14), each with the entry grammar of P1.
type Decl struct {
	Allow     []string
	AllowNone bool
	Deny, Ask []string
	// Readers says, of a tool that reads files (Read), the other tools
	// that read them (Grep, Glob): its deny and ask entries bind those too,
	// as written (rule P17), so that what Read may not show no search shows.
	Readers *Readers
}

// Readers are a policy's tools that read the file their subject names and
// those that search a tree, for Decl. Each reader's others are made when
// an entry asks for them: a list of them per reader grew with the square
// of the tools (issue 49: a 1,000-tool load spent a sixteenth of its time
// on it).
type Readers struct {
	files map[string]bool // the tools that read a file
	all   []string        // those and the tools that search a tree, sorted
}

// NewReaders is the Readers of files (tools that read the file their
// subject names) among all (those and the tools that search a tree,
// sorted); nil when there are not two of them.
func NewReaders(files map[string]bool, all []string) *Readers {
	if len(all) < 2 || len(files) == 0 {
		return nil
	}
	return &Readers{files: files, all: all}
}

// Of is the other tools that a deny or ask entry of tool binds: nil when
// tool reads no file.
func (r *Readers) Of(tool string) []string {
	if r == nil || !r.files[tool] {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(r.all), func(o string) bool { return o == tool })
}

// CompileDecl compiles what one source declares, as Compile does; the
// errors of deny and ask entries say which list they are in.
func CompileDecl(ctx *cue.Context, d Decl, subjects map[string]Subject) (*List, []error) {
	l := &List{ctx: ctx, subjects: subjects, allowNone: d.AllowNone, denied: d.Deny, asked: d.Ask}
	var errs, more []error
	if !d.AllowNone {
		l.entries = d.Allow
		l.tools, errs = compileEntries(d.Allow, subjects, "", nil)
	}
	for t := range l.tools {
		l.names = append(l.names, t)
	}
	slices.Sort(l.names)
	l.deny, more = compileEntries(d.Deny, subjects, DeniedTools, d.Readers)
	errs = append(errs, more...)
	l.ask, more = compileEntries(d.Ask, subjects, AskTools, d.Readers)
	return l, append(errs, more...)
}

// compileEntries parses entries by tool and compiles each one's matcher;
// the errors are in the order of the entries.
// mcpTools is what an entry's tool name means: Claude Code's name of an
// upstream server's tools, mcp__SERVER (every tool of the server) or
// mcp__SERVER__TOOL, names the gateway's SERVER__TOOL tools, so that an
// entry means the same under serve, mcp and the hook; any other name, or an
// MCP name no tool answers to (a server Claude Code runs itself), is itself,
// and mcp__SERVER names too the server's tools the policy declares.
func mcpTools(name string, subjects map[string]Subject) []string {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok || rest == "" {
		return []string{name}
	}
	if server, tool, one := strings.Cut(rest, "__"); one {
		if _, known := subjects[server+"__"+tool]; known {
			return []string{server + "__" + tool}
		}
		return []string{name}
	}
	var out []string
	declared := false
	for t := range subjects {
		switch {
		case strings.HasPrefix(t, rest+"__"):
			out = append(out, t)
		case strings.HasPrefix(t, name+"__"):
			// A tool of the client's server the policy declares
			// (mcp__fs__read_text_file, to give it a subject) is one of
			// the server's; the rest are still decided by name.
			out, declared = append(out, t), true
		}
	}
	if out == nil {
		return []string{name}
	}
	if declared {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// readers, for deny and ask entries, adds the tools an entry of a reader
// binds too (P17); each keeps the entry as written.
func compileEntries(entries []string, subjects map[string]Subject, key string, readers *Readers) (map[string]*toolEntries, []error) {
	byTool := map[string]*toolEntries{}
	byEntry := make([]error, len(entries))
	for i, raw := range entries {
		e, err := ParseEntry(raw)
		if ee, ok := err.(*EntryError); ok {
			ee.List = key
		}
		if e.Tool == "" {
			// An entry that cannot be read but names a tool ("Read (/tmp/**)")
			// is an unusable pattern of that tool: it denies (P7), and a
			// name-only entry beside it is no longer unlimited (P6).
			name, _, _ := strings.Cut(raw, "(")
			if name = strings.TrimSpace(name); tools.ValidName(name) {
				e = Entry{Raw: raw, Tool: name, HasPattern: true}
			} else {
				byEntry[i] = err
				continue
			}
		}
		bound := mcpTools(e.Tool, subjects)
		if e.HasPattern {
			bound = append(bound, readers.Of(e.Tool)...)
		}
		for _, t := range bound {
			te := byTool[t]
			if te == nil {
				te = &toolEntries{}
				byTool[t] = te
			}
			e := e
			e.Tool = t
			te.infos = append(te.infos, entryInfo{Entry: e, err: err, idx: i})
		}
	}
	for t, te := range byTool {
		sub, known := subjects[t]
		for j := range te.infos {
			in := &te.infos[j]
			if in.HasPattern && in.err == nil {
				in.compile(t, sub, known, key)
			}
			byEntry[in.idx] = in.err
		}
		te.index(sub.Kind)
	}
	var errs []error
	for _, err := range byEntry {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return byTool, errs
}

// compile sets the entry's matcher and CUE alternative, or its error.
func (in *entryInfo) compile(tool string, sub Subject, known bool, key string) {
	var err error
	switch sub.Kind {
	case Command:
		in.m, in.alt, err = commandMatcher(in.Pattern)
	case Path:
		in.m, in.alt, err = pathMatcher(in.Pattern)
	case Domain:
		in.m, in.alt, err = domainMatcher(in.Pattern)
	default:
		switch {
		case !known:
			err = fmt.Errorf("%s is not a tool this policy defines, so its pattern cannot be checked; check the name", tool)
		case sub.Rule == nil:
			err = fmt.Errorf("%s has neither a permission subject nor its own rule, so a pattern cannot be checked and denies every call; write %s alone or declare subject in the tool's policy", tool, tool)
		}
	}
	if sub.Rule != nil {
		// The tool's own rule may still read the pattern; it decides
		// the calls that have no subject.
		in.rule, err = true, nil
	}
	if err != nil {
		in.m, in.alt = nil, ""
		in.err = &EntryError{Entry: in.Raw, Reason: err.Error(), List: key}
	}
}

// Tools returns the known tools the list has an entry for, sorted. An
// empty result is a list that leaves no tool at all (P12).
func (l *List) Tools() []string {
	if l == nil {
		return nil
	}
	var out []string
	for _, t := range l.names {
		if _, ok := l.subjects[t]; ok {
			out = append(out, t)
		}
	}
	return out
}

// Unknown returns the tools the list names that the policy does not define
// (a typo, say), sorted; vet reports them (P12).
func (l *List) Unknown() []string {
	if l == nil {
		return nil
	}
	var out []string
	for _, t := range l.names {
		if _, ok := l.subjects[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

// Value is the list as a CUE value: a closed struct with one optional field
// per tool, whose value constrains the subject (see the package comment).
// The effective list of a chain means the unification of these values
// (P10); it is built on demand, as the reference of tests and for
// debugging, never to decide a call.
func (l *List) Value() cue.Value {
	l.cueOnce.Do(func() {
		if l.ctx == nil { // compiled without a context
			l.ctx = cuecontext.New()
		}
		l.src = l.cueSource()
		l.value = l.ctx.CompileString(l.src, cue.Filename("allowed-tools"))
	})
	return l.value
}

// Source is the list as CUE source, for logs and debugging.
func (l *List) Source() string {
	l.Value()
	return l.src
}

func (l *List) cueSource() string {
	var b strings.Builder
	b.WriteString("close({\n")
	for _, t := range l.names {
		fmt.Fprintf(&b, "\t%s?: %s\n", cueString(t), l.tools[t].constraint(l.subjects[t].Kind))
	}
	b.WriteString("})\n")
	return b.String()
}

// constraint is the CUE constraint of one tool's entries in one list.
func (te *toolEntries) constraint(k Kind) string {
	var kindAlts, ruleAlts []string
	for _, in := range te.infos {
		if !in.HasPattern || in.err != nil {
			continue
		}
		if in.alt != "" {
			kindAlts = append(kindAlts, in.alt)
		}
		if in.rule {
			ruleAlts = append(ruleAlts, "{"+cueString(in.Pattern)+": true}")
		}
	}
	switch {
	case !te.patterned:
		return "_"
	case len(kindAlts) == 0 && len(ruleAlts) == 0:
		return "=~" + cueString(nothing)
	case len(ruleAlts) == 0:
		return kindConstraint(k, kindAlts)
	case len(kindAlts) == 0:
		return strings.Join(ruleAlts, " | ")
	}
	// Judged on its subject first: a call with a subject is a string and
	// meets the first branch; one without meets the rule's.
	return "(string & " + kindConstraint(k, kindAlts) + ") | " + strings.Join(ruleAlts, " | ")
}

func kindConstraint(k Kind, alts []string) string {
	if k == Command {
		return commandConstraint(alts)
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

func cueString(s string) string { return literal.String.Quote(s) }

func validUTF8(s string) bool { return utf8.ValidString(s) }

// jsonType names the JSON type of a decoded value, for sentences.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number, float64, float32, int, int64, int32, uint, uint64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// notString says what a subject field holds instead of a string: "is an
// array, not a string".
func notString(v any) string {
	t := jsonType(v)
	article := "a"
	if strings.ContainsRune("aeiou", rune(t[0])) {
		article = "an"
	}
	return fmt.Sprintf("is %s %s, not a string", article, t)
}
