package policy

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// Sessions is what a policy says of sessions (rule P18), as written: the
// labels results give a session, and the flows, the deny and ask entries
// of a surface that bind once its session holds a label. It is part of
// the plan, so a restored generation decides flows as a loaded one does;
// what it compiles to is kept beside it, compiled once.
type Sessions struct {
	Labels []*Label // sorted by name
	Flows  []*Flow  // by surface, then label
	// compiled is what Labels and Flows compile to (sessionLists).
	once     sync.Once
	compiled *sessionLists
}

// A Label is given to a session by the results of the calls it names.
type Label struct {
	Name string
	Pos  Position
	// Tools label every call of theirs; Entries the calls they admit as
	// a denied-tools entry does (any part of a command); Servers every
	// tool of an upstream server.
	Tools    []string
	ToolPos  []Position
	Entries  []string
	EntryPos []Position
	Servers  []string
	// Trusted are entries, with the grammar of allowed-tools, whose calls
	// do not give the label: a source the policy trusts.
	Trusted    []string
	TrustedPos []Position
	// Content are the shapes of secrets whose match in any result's text
	// gives the label, whatever tool returned it; with Redact each match
	// is replaced before the model sees the result (content.go).
	Content []Shape `json:",omitempty"`
	Redact  bool    `json:",omitempty"`
}

// A Flow is what a surface denies and asks for while its session holds a label.
type Flow struct {
	Surface, Label string
	Pos            Position
	Denied         []string
	DeniedPos      []Position
	Asked          []string
	AskedPos       []Position
}

// sessionLists is Sessions compiled: for each label the list whose deny
// entries match the calls that give it and the list that admits the
// trusted ones; for each surface and label the flow's list; and the
// flows' effective lists along chains, made when a chain first needs one.
type sessionLists struct {
	match, trusted map[string]*allow.Effective
	// matchAll is every label's match at once: a call it leaves alone
	// gives no label, and a call is looked at label by label only when
	// it matches.
	matchAll *allow.Effective
	flows    map[string]*allow.List // by surface \x00 label
	// bound are the tools some flow's entry binds: a call of another
	// tool looks at no label.
	bound map[string]bool
	// marks are the tools some label's tools or entries name, with the
	// searches a Read entry binds, and servers the servers labels name:
	// a result of another tool gives no label.
	marks, servers map[string]bool
	// content are the labels' shapes of secrets, compiled (content.go).
	content []contentShape
	// reads are, by label, what of it a command could read (commandReads).
	reads  map[string]labelReads
	chains sync.Map // chain → *sync.Map of label → *allow.Effective, nil for none
}

// sessions reads labels and the surfaces' when (rule P18), reporting what
// cannot be used: an entry that cannot label or deny anything, a flow on a
// label the policy does not define, a label no flow uses.
func (c *compiler) sessions(g *Generation, v cue.Value) {
	s := &Sessions{}
	iter, _ := v.LookupPath(cue.ParsePath("labels")).Fields()
	for iter.Next() {
		lv := iter.Value()
		l := &Label{Name: iter.Selector().Unquoted(), Pos: c.pos(lv, 0)}
		l.Tools, l.ToolPos = c.stringsAt(lv.LookupPath(cue.ParsePath("tools")))
		l.Entries, l.EntryPos = c.stringsAt(lv.LookupPath(cue.ParsePath("entries")))
		l.Servers, _ = c.stringsAt(lv.LookupPath(cue.ParsePath("servers")))
		l.Trusted, l.TrustedPos = c.stringsAt(lv.LookupPath(cue.ParsePath("trusted")))
		c.contentOf(l, lv)
		if len(l.Tools)+len(l.Entries)+len(l.Servers) == 0 && !lv.LookupPath(cue.ParsePath("content")).Exists() {
			c.errs = append(c.errs, Diagnostic{Pos: l.Pos, Code: rule.P18, Message: fmt.Sprintf("label %s names no tool, entry, server or content whose results give it, so it labels nothing; give it tools, entries, servers or content, or remove it.", l.Name)})
		}
		for i, t := range l.Tools {
			c.labelNames(g, l, "tools", t, l.ToolPos[i])
		}
		for i, e := range l.Entries {
			c.labelNames(g, l, "entries", e, l.EntryPos[i])
		}
		for i, e := range l.Trusted {
			c.labelNames(g, l, "trusted", e, l.TrustedPos[i])
		}
		_, serverPos := c.stringsAt(lv.LookupPath(cue.ParsePath("servers")))
		for i, srv := range l.Servers {
			if !c.root.LookupPath(cue.MakePath(cue.Str("servers"), cue.Str(srv))).Exists() {
				c.errs = append(c.errs, Diagnostic{Pos: serverPos[i], Code: rule.P18, Message: fmt.Sprintf("label %s names the server %q, which the policy does not define under servers, so it would label nothing; correct the name or remove it.", l.Name, srv)})
			}
		}
		s.Labels = append(s.Labels, l)
	}
	slices.SortFunc(s.Labels, func(a, b *Label) int { return strings.Compare(a.Name, b.Name) })
	names := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		names[i] = l.Name
	}
	used := map[string]bool{}
	for _, ref := range g.SurfaceRefs() {
		iter, _ := c.surfaceValue(v, ref).LookupPath(cue.ParsePath("when")).Fields()
		for iter.Next() {
			fv := iter.Value()
			f := &Flow{Surface: ref, Label: iter.Selector().Unquoted(), Pos: c.pos(fv, 0)}
			f.Denied, f.DeniedPos = c.stringsAt(fv.LookupPath(cue.MakePath(cue.Str(allow.DeniedTools))))
			f.Asked, f.AskedPos = c.stringsAt(fv.LookupPath(cue.MakePath(cue.Str(allow.AskTools))))
			if !slices.Contains(names, f.Label) {
				msg := fmt.Sprintf("%s when %s names a label the policy does not define, so its entries would never bind", ref, f.Label)
				if near := tools.Closest(f.Label, names); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				} else if len(names) > 0 {
					msg += "; the labels are " + joinNames(names) + "."
				} else {
					msg += "; define it under labels."
				}
				c.errs = append(c.errs, Diagnostic{Pos: f.Pos, Code: rule.P18, Message: msg})
			}
			used[f.Label] = true
			pseudo := &Surface{Ref: ref + " when " + f.Label}
			c.namesTools(g, pseudo, allow.DeniedTools, f.Denied, f.DeniedPos, rule.P14)
			c.namesTools(g, pseudo, allow.AskTools, f.Asked, f.AskedPos, rule.P14)
			s.Flows = append(s.Flows, f)
		}
	}
	// A label decides provenance too when a result that gave no label is
	// a trusted source (provenance.go).
	trustedSource := slices.ContainsFunc(g.Provenance, func(p *Provenance) bool { return p.Allows(FromTrusted) })
	for _, l := range s.Labels {
		if !used[l.Name] && !trustedSource {
			c.warn(l.Pos, rule.P18, "label %s is used by no surface's when, nor by a provenance that trusts unlabelled results, so it decides nothing; add a flow such as agent: when: %s: {\"denied-tools\": [...]}, or remove the label.", l.Name, l.Name)
		}
	}
	if len(s.Labels) == 0 && len(s.Flows) == 0 {
		return
	}
	g.Session = s
	s.once.Do(func() { s.compiled = c.sessionLists(g, s, true) })
}

// labelNames reports an entry of a label that names no tool the policy
// defines: it would label nothing, which must never pass silently.
func (c *compiler) labelNames(g *Generation, l *Label, key, e string, pos Position) {
	name := strings.TrimSpace(entryName(e))
	if _, _, wild := c.wildcardTool(name); defines(g, name) || wild {
		return
	}
	msg := fmt.Sprintf("label %s %s entry %q names no tool the policy defines, so it would label nothing", l.Name, key, e)
	if key == "trusted" {
		msg = fmt.Sprintf("label %s trusted entry %q names no tool the policy defines, so it trusts nothing", l.Name, e)
	}
	if near := tools.Closest(name, g.Names()); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	} else {
		msg += "; " + theTools(g.Names())
	}
	c.errs = append(c.errs, Diagnostic{Pos: pos, Code: rule.P18, Message: msg + " Correct the name or remove the entry."})
}

// surfaceValue is the policy's value of the surface ref.
func (c *compiler) surfaceValue(v cue.Value, ref string) cue.Value {
	if ref == "agent" {
		return v.LookupPath(cue.ParsePath("agent"))
	}
	kind, name, _ := strings.Cut(ref, ":")
	return v.LookupPath(cue.MakePath(cue.Str(kind+"s"), cue.Str(name)))
}

// stringsAt is a list of strings and where each is written.
func (c *compiler) stringsAt(v cue.Value) ([]string, []Position) {
	var out []string
	var pos []Position
	iter, err := v.List()
	for err == nil && iter.Next() {
		out = append(out, str(iter.Value()))
		pos = append(pos, c.pos(iter.Value(), 0))
	}
	return out, pos
}

// sessionLists compiles s; report says whether an entry that cannot be
// used is reported (a load) or only denies (a restored plan, whose load
// reported it).
func (c *compiler) sessionLists(g *Generation, s *Sessions, report bool) *sessionLists {
	subjects, readers := listSubjects(g), readers(g)
	out := &sessionLists{match: map[string]*allow.Effective{}, trusted: map[string]*allow.Effective{}, flows: map[string]*allow.List{}, bound: map[string]bool{}, marks: map[string]bool{}, servers: map[string]bool{}, content: compileContent(s), reads: map[string]labelReads{}}
	fail := func(what string, entries []string, pos []Position, err error) {
		if !report {
			return
		}
		at := Position{}
		var ee *allow.EntryError
		if errors.As(err, &ee) {
			if i := slices.Index(entries, ee.Entry); i >= 0 && i < len(pos) {
				at = pos[i]
			}
		}
		msg := err.Error()
		if strings.HasPrefix(what, "label ") { // a label's entries are no denied-tools
			msg = strings.Replace(msg, allow.DeniedTools+" entry", "entry", 1)
		}
		c.errs = append(c.errs, Diagnostic{Pos: at, Code: rule.P18, Message: fmt.Sprintf("%s: %s; correct the entry or remove it.", what, msg)})
	}
	for _, l := range s.Labels {
		// The calls that give the label are those a deny list of its
		// tools and entries would deny: any part of a command that
		// matches is enough.
		deny := append(slices.Clone(l.Tools), c.resolveEntries(l.Entries, subjects)...)
		pos := append(slices.Clone(l.ToolPos), l.EntryPos...)
		deny = slices.DeleteFunc(deny, func(e string) bool { return !defines(g, strings.TrimSpace(entryName(e))) })
		for _, e := range deny {
			name := strings.TrimSpace(entryName(e))
			out.marks[name] = true
			for _, r := range readers.Of(name) {
				out.marks[r] = true
			}
		}
		for _, srv := range l.Servers {
			out.servers[srv] = true
		}
		if r := commandReads(g, deny); r.anywhere || r.network || len(r.paths) > 0 {
			out.reads[l.Name] = r
		}
		if len(deny) > 0 {
			lst, errs := allow.CompileDecl(c.lists, allow.Decl{AllowNone: true, Deny: deny, Readers: readers}, subjects)
			for _, err := range errs {
				fail("label "+l.Name, deny, pos, err)
			}
			out.match[l.Name], _ = allow.Chain(lst)
		}
		if trusted := c.resolveEntries(l.Trusted, subjects); len(trusted) > 0 {
			trusted = slices.DeleteFunc(trusted, func(e string) bool { return !defines(g, strings.TrimSpace(entryName(e))) })
			lst, errs := allow.CompileDecl(c.lists, allow.Decl{Allow: trusted}, subjects)
			for _, err := range errs {
				fail("label "+l.Name+" trusted", trusted, l.TrustedPos, err)
			}
			if e, err := allow.Chain(lst); err == nil {
				out.trusted[l.Name] = e
			}
		}
	}
	var all []string
	for _, l := range s.Labels {
		all = append(all, l.Tools...)
		all = append(all, c.resolveEntries(l.Entries, subjects)...)
	}
	if all = slices.DeleteFunc(all, func(e string) bool { return !defines(g, strings.TrimSpace(entryName(e))) }); len(all) > 0 {
		lst, _ := allow.CompileDecl(c.lists, allow.Decl{AllowNone: true, Deny: all, Readers: readers}, subjects) // reported label by label
		out.matchAll, _ = allow.Chain(lst)
	}
	for _, f := range s.Flows {
		d := allow.Decl{AllowNone: true, Deny: c.resolveEntries(f.Denied, subjects), Ask: c.resolveEntries(f.Asked, subjects), Readers: readers}
		lst, errs := allow.CompileDecl(c.lists, d, subjects)
		for _, err := range errs {
			entries, pos := d.Deny, f.DeniedPos
			var ee *allow.EntryError
			if errors.As(err, &ee) && ee.List == allow.AskTools {
				entries, pos = d.Ask, f.AskedPos
			}
			fail(f.Surface+" when "+f.Label, entries, pos, err)
		}
		out.flows[f.Surface+"\x00"+f.Label] = lst
		for _, e := range append(slices.Clone(f.Denied), f.Asked...) {
			name := strings.TrimSpace(entryName(e))
			out.bound[name] = true
			for _, r := range readers.Of(name) { // a Read entry binds the searches (P17)
				out.bound[r] = true
			}
		}
	}
	return out
}

// lists is s compiled, with g's compiler (a restored generation's first
// call compiles it).
func (s *Sessions) lists(g *Generation) *sessionLists {
	s.once.Do(func() { s.compiled = g.comp.sessionLists(g, s, false) })
	return s.compiled
}

// LabelsOf is the labels that the result of a call of t, with the
// canonical input in, gives its session (rule P18); nil for none. A path
// subject is judged as written and, with landsAt (where a path leads once
// its links are followed; nil for as written only), where it leads, as
// the deny entries judge it (P14): a link to a labelled page reads the
// page. A search of a tree (reads "tree": Grep, Glob) labels the session
// when what it may read below its directory holds a labelled path, as a
// Read deny withholds a search of the directory above it (P17).
func (g *Generation) LabelsOf(t *Tool, in map[string]any, workdir string, landsAt func(string) string) []string {
	s := g.Session
	if s == nil || t == nil {
		return nil
	}
	ls := s.lists(g)
	var cmd []string
	if t.Subject != nil && t.Subject.Kind == "command" && len(ls.reads) > 0 {
		// What its programs read, besides what its command line names.
		cmd = g.commandLabels(t, workdir)
	}
	server := t.Upstream != nil && ls.servers[t.Upstream.Server]
	if !ls.marks[t.Name] && !server {
		return cmd
	}
	ins, dirs := labelInputs(t, in, workdir, landsAt)
	hits := func(m *allow.Effective) bool {
		for _, in := range ins {
			if !m.Decide(t.Name, in, workdir).Allowed {
				return true
			}
		}
		for _, d := range dirs {
			if by, _, _ := m.TreeWithheld(t.Name, d); len(by) > 0 {
				return true
			}
		}
		return false
	}
	// A call that no label's entry matches is looked at no further.
	matched := ls.matchAll != nil && ls.marks[t.Name] && hits(ls.matchAll)
	if !matched && !server {
		return cmd
	}
	var out []string
	for _, l := range s.Labels {
		if slices.Contains(cmd, l.Name) {
			out = append(out, l.Name)
			continue
		}
		labelled := t.Upstream != nil && slices.Contains(l.Servers, t.Upstream.Server)
		if m := ls.match[l.Name]; matched && !labelled && m != nil && len(m.Entries(t.Name)) > 0 {
			labelled = hits(m)
		}
		if labelled {
			if tr := ls.trusted[l.Name]; tr != nil && tr.Listed(t.Name) && trusts(tr, t.Name, ins, workdir) {
				continue
			}
			out = append(out, l.Name)
		}
	}
	return out
}

// ProgramLabelNames are the command names that the labels' entries on
// the command tool give start with (rule P18 read with P16): a program a
// command starts that is one of them, by its file, is judged by
// ProgramLabels. Nil when no label names a command of tool.
func (g *Generation) ProgramLabelNames(tool string) []string {
	if g.Session == nil {
		return nil
	}
	return g.Session.lists(g).matchAll.ExecNames(tool)
}

// ProgramLabels is the labels that a program a command of tool started,
// with its name and real arguments words, gives the command's session
// (rule P18): a label's entry on the command judged at every program
// start, as its deny and ask entries are (P16), so that a script or an
// interpreter that runs the labelled command labels the session as the
// command line itself would. A trusted entry admits the program as the
// command line of its words. Nil for none.
func (g *Generation) ProgramLabels(tool string, words []string, workdir string) []string {
	if g.Session == nil {
		return nil
	}
	ls := g.Session.lists(g)
	if ls.matchAll == nil || ls.matchAll.ExecDecide(tool, words, workdir).Allowed {
		return nil
	}
	var out []string
	for _, l := range g.Session.Labels {
		m := ls.match[l.Name]
		if m == nil || m.ExecDecide(tool, words, workdir).Allowed {
			continue
		}
		if tr, t := ls.trusted[l.Name], g.Tools[tool]; tr != nil && t != nil && t.Subject != nil && tr.Listed(tool) &&
			tr.Decide(tool, map[string]any{t.Subject.Field: allow.QuoteWords(words)}, workdir).Allowed {
			continue
		}
		out = append(out, l.Name)
	}
	return out
}

// trusts reports whether a label's trusted list tr admits the call of
// tool on every one of its inputs ins (labelInputs): as written and where
// its path leads, as an allow list admits a path (P14, P17), so that a
// link under a trusted directory to an untrusted file is not trusted.
func trusts(tr *allow.Effective, tool string, ins []map[string]any, workdir string) bool {
	for _, in := range ins {
		if !tr.Decide(tool, in, workdir).Allowed {
			return false
		}
	}
	return true
}

// labelInputs are the inputs a call's labels are judged on: in, and in
// with its path where it leads when that differs; and, for a search of a
// tree, the directories it searches below (as written and where it
// leads, absolute).
func labelInputs(t *Tool, in map[string]any, workdir string, landsAt func(string) string) (ins []map[string]any, dirs []string) {
	ins = []map[string]any{in}
	sub := t.Subject
	if sub == nil || sub.Kind != "path" {
		return ins, nil
	}
	at, ok := in[sub.Field].(string)
	if !ok {
		at = sub.Default
	}
	if at == "" {
		return ins, nil
	}
	if !filepath.IsAbs(at) {
		at = filepath.Join(workdir, at)
	}
	at = filepath.Clean(at)
	paths := []string{at}
	if landsAt != nil {
		if real := landsAt(at); real != "" && real != at {
			there := maps.Clone(in)
			there[sub.Field] = real
			ins, paths = append(ins, there), append(paths, real)
		}
	}
	if t.ReadsAs() == "tree" {
		dirs = paths
	}
	return ins, dirs
}

// Flows is the effective flow of every label of labels along chain at
// once, accumulated; key names the set of labels: "\x00" and the sorted
// labels joined by "\x00" (a session keeps key beside them, so that a call
// builds none). Nil when no surface of the chain has a flow on them.
func (g *Generation) Flows(chain, labels []string, key string) *allow.Effective {
	return g.flowOf(chain, labels, key)
}

// FlowBinds reports whether some flow's entry binds tool: whether a call
// of it can depend on the session's labels at all.
func (g *Generation) FlowBinds(tool string) bool {
	return g.Session != nil && g.Session.lists(g).bound[tool]
}

// Flow is the effective flow of label along chain: the deny and ask entries
// that every surface of the chain gives the label, accumulated (rule P14);
// nil when no surface of the chain has one.
func (g *Generation) Flow(chain []string, label string) *allow.Effective {
	return g.flowOf(chain, []string{label}, label)
}

// flowOf is Flow of several labels, cached under key.
func (g *Generation) flowOf(chain, labels []string, key string) *allow.Effective {
	s := g.Session
	if s == nil {
		return nil
	}
	ls := s.lists(g)
	// Two levels, so that a call's look-up builds no key.
	byLabel, ok := ls.chains.Load(chainKey(chain))
	if !ok {
		byLabel, _ = ls.chains.LoadOrStore(chainKey(chain), &sync.Map{})
	}
	if e, ok := byLabel.(*sync.Map).Load(key); ok {
		return e.(*allow.Effective)
	}
	chain = Rooted(chain)
	var lists []*allow.List
	for _, ref := range chain {
		for _, label := range labels {
			if l := ls.flows[ref+"\x00"+label]; l != nil {
				lists = append(lists, l)
			}
		}
	}
	var e *allow.Effective
	if len(lists) > 0 {
		e, _ = allow.Chain(lists...) // lists without allow entries leave no tool out
	}
	byLabel.(*sync.Map).Store(key, e)
	return e
}

// labelReads is what of a label a command could read for itself: the
// literal paths of its entries on tools that read files (as written:
// relative to the working directory when not absolute), whether one of
// them names files anywhere (a tool-wide entry, a pattern without a
// literal directory), and whether one names a tool that fetches from the
// network (a domain subject).
type labelReads struct {
	paths    []string
	anywhere bool
	network  bool
}

// commandReads is what a command could read of the calls the label's
// resolved tools and entries match (rule P18 read with P17: a Read entry
// binds every reader, a command's programs too).
func commandReads(g *Generation, entries []string) labelReads {
	var r labelReads
	for _, raw := range entries {
		e, err := allow.ParseEntry(raw)
		if err != nil {
			r.anywhere = true // fail closed
			continue
		}
		t := g.Tools[e.Tool]
		if t == nil || t.Subject == nil {
			continue
		}
		switch {
		case t.Subject.Kind == "domain":
			r.network = true
		case t.Subject.Kind != "path" || t.WritesFiles():
		case !e.HasPattern:
			r.anywhere = true
		default:
			if d := allow.LiteralDir(e.Pattern); d == "/" || d == "." || d == "" {
				r.anywhere = true
			} else {
				r.paths = append(r.paths, d)
			}
		}
	}
	return r
}

// Hideable reports whether a command's sandbox can hide the path d whole
// (rules P14, P17): an absolute path other than "/" that is neither the
// working directory wd nor above it, in which the command runs.
func Hideable(d, wd string) bool {
	return d != "/" && filepath.IsAbs(d) && wd != d && !strings.HasPrefix(wd, d+"/")
}

// LabelHidden is what a command of a session holding the labels held must
// not read (rule P18): the paths of the other labels' entries on tools
// that read files, which its sandbox hides where it can (Hideable), so
// that a command reads a labelled file only once its session carries the
// label; what cannot be hidden labels the command's result (LabelsOf).
func (g *Generation) LabelHidden(held []string, workdir string) []string {
	if g.Session == nil {
		return nil
	}
	ls := g.Session.lists(g)
	var out []string
	for _, l := range g.Session.Labels {
		r, ok := ls.reads[l.Name]
		if !ok || slices.Contains(held, l.Name) {
			continue
		}
		for _, p := range r.paths {
			if p = labelPath(p, workdir); Hideable(p, workdir) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// labelPath is a label entry's literal path p where a command of the
// working directory wd sees it.
func labelPath(p, wd string) string {
	if !filepath.IsAbs(p) {
		return filepath.Join(wd, p)
	}
	return p
}

// commandLabels is the labels a command's result gives its session (rule
// P18): a command reads whatever its sandbox lets it, so every label it
// could have read a labelled file of for itself, where its sandbox cannot
// hide the label's paths (a sandbox that is off, an entry with no
// directory of its own, one that holds the working directory), or
// fetched a labelled page over a network its sandbox reaches.
func (g *Generation) commandLabels(t *Tool, workdir string) []string {
	ls := g.Session.lists(g)
	off := t.Sandbox == nil || t.Sandbox.Off
	network := off || t.Sandbox.Network || len(t.Sandbox.Hosts) > 0
	var out []string
	for _, l := range g.Session.Labels {
		r, ok := ls.reads[l.Name]
		if !ok {
			continue
		}
		labelled := r.anywhere || r.network && network || off && len(r.paths) > 0
		for _, p := range r.paths {
			labelled = labelled || !Hideable(labelPath(p, workdir), workdir)
		}
		if labelled && !slices.Contains(out, l.Name) {
			out = append(out, l.Name)
		}
	}
	return out
}
