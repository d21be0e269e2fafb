package allow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"aimon.dev/gw/internal/core/rule"
)

// ErrNoTool is wrapped by Chain's error when the lists along a chain leave
// no tool: the run is refused, never given an empty, unlimited list (P11).
var ErrNoTool = errors.New("no tool is left")

// Effective is the effective allowed-tools list of a surface chain: the
// meet of its lists (P10), kept as the lists themselves. A call is allowed
// when every list that narrows its tool has an entry that admits it, which
// is what the unification of the lists' CUE values means; a differential
// test holds the two equal. It is immutable and safe for concurrent use. A
// nil *Effective, or one from a chain without lists, is unlimited.
type Effective struct {
	rules map[string]*toolRule // listed tools only; nil when no allow list limits the chain
	names []string             // listed known tools, sorted
	lists []*List              // the chain's lists, the caller first
	// deny and ask are the denied-tools and ask-tools entries of every
	// list along the chain, by tool: they accumulate (P14).
	deny, ask map[string][]*toolEntries
	subjects  map[string]Subject
	// entries are Entries by tool, gathered once.
	gathered sync.Once
	entries  map[string][]string
	// whole is what the deny and ask entries say of a tool before its
	// input is read, gathered once: every call asks.
	wholeOnce sync.Once
	whole     wholes
	// unlimitedReasons are the P11 reasons by tool, when no list limits.
	unlimitedReasons sync.Map
	unlimitedCount   atomic.Int64
}

// wholes are, by tool, the name-only deny and ask entries and the
// programs the sandbox knows by their files (ExecNames).
type wholes struct {
	denied, asked, exec map[string][]string
}

// toolRule is what the chain says about one tool.
type toolRule struct {
	tool         string
	subject      Subject
	top          bool           // name-only everywhere: every call (P6)
	byName       Decision       // a top tool's decision
	levels       []*toolEntries // the tool's entries in each list, the caller first
	rulePatterns []string       // every pattern a Ruler must answer for
}

// Chain is the effective list of a surface chain, the main agent first.
// Nil lists (surfaces without a list) are skipped; with none left the
// result is unlimited. It is an error, wrapping ErrNoTool, when the lists
// have no known tool in common (P11). Its cost is linear in the number of
// tools and lists, whatever the number of entries.
func Chain(lists ...*List) (*Effective, error) {
	// The meet is idempotent: a list met twice along a chain (a skill
	// that calls itself) binds once.
	var ls []*List
	for _, l := range lists {
		if l != nil && !slices.Contains(ls, l) {
			ls = append(ls, l)
		}
	}
	if len(ls) == 0 {
		return &Effective{}, nil
	}
	for _, l := range ls[1:] {
		if l.ctx != ls[0].ctx {
			return nil, fmt.Errorf("the allowed-tools lists of one chain were compiled with different CUE contexts; compile a policy's lists with one context")
		}
	}
	subjects := ls[len(ls)-1].subjects
	e := &Effective{lists: ls, subjects: subjects}
	e.deny, e.ask = accumulate(ls, func(l *List) map[string]*toolEntries { return l.deny }), accumulate(ls, func(l *List) map[string]*toolEntries { return l.ask })
	ls = slices.DeleteFunc(slices.Clone(ls), func(l *List) bool { return l.allowNone })
	if len(ls) == 0 {
		return e, nil // no allow list: only deny and ask entries bind
	}
	e.rules = map[string]*toolRule{}
	for _, t := range ls[0].names {
		r := &toolRule{tool: t, subject: subjects[t], top: true}
		for _, l := range ls {
			te := l.tools[t]
			if te == nil {
				r = nil // a closed list leaves the tool out (P10)
				break
			}
			r.levels = append(r.levels, te)
			r.top = r.top && !te.patterned
			for _, i := range te.rules {
				if p := te.infos[i].Pattern; !slices.Contains(r.rulePatterns, p) {
					r.rulePatterns = append(r.rulePatterns, p)
				}
			}
		}
		if r == nil {
			continue
		}
		if r.top {
			// Made once: every call of the tool is decided so (issue 49).
			// Clipped, so that an append to a decision's entries copies.
			r.byName = Decision{Allowed: true, Rule: rule.P6, Reason: t + " is allowed by name.", Entries: slices.Clip(r.raws(func(in entryInfo) bool { return !in.HasPattern }))}
		}
		e.rules[t] = r
		if _, known := subjects[t]; known {
			e.names = append(e.names, t)
		}
	}
	// An MCP entry (mcp__github) names tools of the client's, which its
	// front end decides by name: a list of them leaves tools (P11).
	if len(e.names) == 0 && !slices.ContainsFunc(slices.Collect(maps.Keys(e.rules)), IsMCPName) {
		return nil, fmt.Errorf("%w: the allowed-tools lists along this surface chain have no tool in common (%s); give each surface entries that its callers also allow", ErrNoTool, describeLists(ls))
	}
	return e, nil
}

// IsMCPName reports whether a tool name is Claude Code's name of an MCP
// server or of one of its tools (mcp__github, mcp__github__create_issue).
func IsMCPName(name string) bool {
	rest, ok := strings.CutPrefix(name, "mcp__")
	return ok && rest != "" && !strings.HasPrefix(rest, "_")
}

// describeLists shows the lists of a chain, each cut to its first entries.
func describeLists(ls []*List) string {
	var parts []string
	for _, l := range ls {
		var es []string
		n := 0
		for _, t := range l.names {
			for _, in := range l.tools[t].infos {
				if n++; n <= maxShown {
					es = append(es, in.Raw)
				}
			}
		}
		if n > maxShown {
			es = append(es, fmt.Sprintf("and %d more", n-maxShown))
		}
		parts = append(parts, "["+strings.Join(es, ", ")+"]")
	}
	return strings.Join(parts, " within ")
}

// Unlimited reports whether no list limits the chain: no allow list, and
// no deny or ask entry.
func (e *Effective) Unlimited() bool {
	return e.allowAll() && (e == nil || len(e.deny) == 0 && len(e.ask) == 0)
}

// allowAll reports whether no allow list limits the chain (P11).
func (e *Effective) allowAll() bool { return e == nil || e.rules == nil }

// Tools returns the known tools that have an entry, sorted; nil when the
// chain is unlimited (P9).
func (e *Effective) Tools() []string {
	if e.allowAll() {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(e.names), func(t string) bool { return e.deniedWhole(t) != nil })
}

// Listed reports whether the tool has an entry in the effective list, so
// that its definition is sent to the model (P9). An entry with a pattern
// keeps its tool listed. Every tool is listed when the chain is unlimited.
// A tool that a name-only deny entry denies is not listed (P14).
func (e *Effective) Listed(tool string) bool {
	if e.deniedWhole(tool) != nil {
		return false
	}
	if e.allowAll() {
		return true
	}
	_, ok := e.rules[tool]
	return ok
}

// Unlisted decides a call of a tool Listed says the chain does not offer,
// before its input is read: denied whole by a name-only deny entry (P14),
// or not in the lists (P9). Deny and ask patterns are not asked, since
// with no input they could only say the subject is missing.
func (e *Effective) Unlisted(tool string) Decision {
	if e.deniedWhole(tool) != nil {
		d, _ := e.denies(tool, nil, nil, "")
		return d
	}
	return e.decideAllow(tool, nil, nil, "")
}

// Decision is the outcome of one call: the lattice fills Allowed, Reason
// (a sentence naming the tool and subject), Rule and Entries.
type Decision = rule.Decision

// Decide decides a call of tool with the raw decoded input in, relative
// paths resolving against workdir. It never fails and never panics: what
// cannot be decided is denied with a reason. A deny entry that admits the
// call denies it; else the allow lists decide; a call they allow that an
// ask entry admits needs approval (Ask, P14).
func (e *Effective) Decide(tool string, in map[string]any, workdir string) Decision {
	return e.DecideAsWritten(tool, in, nil, workdir)
}

// DecideAsWritten is Decide of an input the caller made canonical (rule
// R7): written is the subject as the call wrote it, nil when in holds it
// as written. Where the two differ, the sentence quotes both, as Decide's
// does for a path it resolves itself: "~/x" (resolved to "/home/u/x").
func (e *Effective) DecideAsWritten(tool string, in map[string]any, written any, workdir string) Decision {
	if d, ok := e.denies(tool, in, written, workdir); ok {
		return d
	}
	d := e.decideAllow(tool, in, written, workdir)
	if !d.Allowed {
		return d
	}
	return e.asks(tool, in, written, workdir, d)
}

// Approved decides a call whose ask was approved: as DecideAsWritten,
// without the ask entries; deny entries and the allow lists still bind
// (P15).
func (e *Effective) Approved(tool string, in map[string]any, written any, workdir string) Decision {
	if d, ok := e.denies(tool, in, written, workdir); ok {
		return d
	}
	return e.decideAllow(tool, in, written, workdir)
}

// unlimited is the reason of a call no allow list limits (P11), made
// once per tool: it was a string of every call (issue 49).
func (e *Effective) unlimited(tool string) string {
	if e == nil {
		return tool + unlimitedReason
	}
	if r, ok := e.unlimitedReasons.Load(tool); ok {
		return r.(string)
	}
	r := tool + unlimitedReason
	// Bounded: the names are the policy's tools, but nothing here knows
	// them.
	if e.unlimitedCount.Add(1) <= maxUnlimitedReasons {
		e.unlimitedReasons.Store(tool, r)
	}
	return r
}

const maxUnlimitedReasons = 4096

const unlimitedReason = " is allowed: no allowed-tools list limits this surface."

// decideAllow decides a call by the allow lists alone.
func (e *Effective) decideAllow(tool string, in map[string]any, written any, workdir string) Decision {
	if e.allowAll() {
		return Decision{Allowed: true, Rule: rule.P11, Reason: e.unlimited(tool)}
	}
	r, ok := e.rules[tool]
	if !ok {
		return Decision{Rule: rule.P9, Reason: fmt.Sprintf("%s is not allowed on this surface: it has no entry in allowed-tools. Allowed tools are %s.", tool, e.toolList())}
	}
	if r.top {
		return r.byName
	}
	if bad := r.deniesAll(); bad != nil {
		_, shown := r.allowedText("")
		if len(bad) > maxShown {
			bad = append(bad[:maxShown:maxShown], fmt.Sprintf("and %d more", len(bad)-maxShown))
		}
		return Decision{Rule: rule.P7, Reason: fmt.Sprintf("%s is not allowed on this surface: its only patterns cannot be used, so every call is denied (%s).", tool, strings.Join(bad, "; ")), Entries: shown}
	}
	switch r.subject.Kind {
	case Command, Path, Domain:
		return r.decideSubject(e, in, written, workdir)
	}
	if r.subject.Rule != nil {
		return r.decideRule(e, in, workdir, "")
	}
	// Unreachable: a pattern for a tool without subject or rule is bad, so
	// deniesAll answered. Deny anyway.
	return Decision{Rule: rule.P7, Reason: fmt.Sprintf("%s is not allowed on this surface: it has patterns but neither a subject nor its own rule.", tool), Entries: r.raws(nil)}
}

// subjectOf is the call's subject as the tool's kind reads it from raw,
// the field's value, or why there is none. Allow, deny and ask entries are
// all matched against it.
func subjectOf(k Kind, raw any, workdir string) (subj, why string) {
	switch k {
	case Command:
		return commandSubject(raw)
	case Domain:
		return domainSubject(raw)
	}
	return pathSubject(raw, workdir)
}

func (r *toolRule) decideSubject(e *Effective, in map[string]any, written any, workdir string) Decision {
	field, kind := r.subject.Field, r.subject.Kind
	raw := in[field]
	subj, why := subjectOf(kind, raw, workdir)
	if written != nil {
		raw = written
	}
	if why != "" {
		if r.subject.Rule != nil {
			return r.decideRule(e, in, workdir, why)
		}
		text, shown := r.allowedText("")
		return Decision{Rule: rule.P5, Entries: shown,
			Reason: fmt.Sprintf("%s is not allowed: its %s field %s %s, and on this surface %s is limited to %s. Call it with %s set to a %s those patterns allow.", r.tool, kind, field, why, r.tool, text, field, kind)}
	}
	if by, ok := r.match(subj); ok {
		return Decision{Allowed: true, Rule: ruleOf(kind), Entries: by,
			Reason: r.tool + " " + string(kind) + " " + quoteSubject(raw, subj) + " is allowed by " + strings.Join(by, " and ") + "."}
	}
	text, shown := r.allowedText(subj)
	d := Decision{Rule: ruleOf(kind), Entries: shown}
	// Joined, not formatted: fmt was a tenth of a refusal (issue 49).
	why = " is not allowed on this surface: allowed are " + text + "."
	if kind == Command && hasCommandMeta(subj) {
		why = " is not allowed on this surface: a command with ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte matches no pattern; run one simple command at a time. Allowed are " + text + "."
	}
	d.Reason = r.tool + " " + string(kind) + " " + quoteSubject(raw, subj) + why
	return d
}

// match decides a subject in one pass over the chain: at every level that
// narrows the tool, some entry must admit it (the meet, P10). It returns
// the entries that let it through: the admitting patterns, and the
// name-only entries of the levels without patterns.
func (r *toolRule) match(subj string) ([]string, bool) {
	var by []string
	for _, lv := range r.levels {
		var ok bool
		if by, ok = lv.matches(subj, by); !ok {
			return nil, false
		}
	}
	return by, true
}

// decideRule asks the tool's own rule about every pattern of the chain: a
// level admits the call when the rule admits it under one of the level's
// patterns.
func (r *toolRule) decideRule(e *Effective, in map[string]any, workdir, why string) Decision {
	answers := make(map[string]bool, len(r.rulePatterns))
	var errs []string
	for _, p := range r.rulePatterns {
		ok, err := safeAllow(r.subject.Rule, p, in, workdir)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s(%s): %v", r.tool, p, err))
		}
		answers[p] = ok && err == nil
	}
	var by []string
	allowed := true
	for _, lv := range r.levels {
		n := len(by)
		if !lv.patterned {
			continue // name-only: the level does not narrow
		}
		for _, i := range lv.rules {
			if in := lv.infos[i]; answers[in.Pattern] {
				by = append(by, in.Raw)
			}
		}
		allowed = allowed && len(by) > n
	}
	if allowed {
		return Decision{Allowed: true, Rule: rule.P2, Entries: by, Reason: fmt.Sprintf("%s call is allowed by its own rule under %s.", r.tool, strings.Join(by, " and "))}
	}
	text, shown := r.allowedText("")
	reason := fmt.Sprintf("%s call is not allowed on this surface: its own rule admits it under none of %s", r.tool, text)
	if why != "" {
		reason = fmt.Sprintf("%s call is not allowed on this surface: its %s field %s %s, and its own rule admits it under none of %s", r.tool, r.subject.Kind, r.subject.Field, why, text)
	}
	if len(errs) > 0 {
		reason += " (" + strings.Join(errs, "; ") + ")"
	}
	return Decision{Rule: rule.P2, Entries: shown, Reason: reason + "."}
}

// safeAllow calls a Ruler, turning a panic into a denial (C2).
func safeAllow(rule Ruler, p string, in map[string]any, workdir string) (ok bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			ok, err = false, fmt.Errorf("the rule failed: %v", v)
		}
	}()
	return rule.Allow(p, in, workdir)
}

// deniesAll returns the errors of a level whose patterns all cannot be used:
// such a level lets no call through (P7).
func (r *toolRule) deniesAll() []string {
	for _, lv := range r.levels {
		if len(lv.bad) > 0 && !lv.valid {
			return lv.bad
		}
	}
	return nil
}

func (r *toolRule) raws(keep func(entryInfo) bool) []string {
	var out []string
	for _, lv := range r.levels {
		for _, in := range lv.infos {
			if keep == nil || keep(in) {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}

// maxShown bounds how many entries a sentence names.
const maxShown = 10

// allowedText lists the tool's patterns: the surface's own, within those of
// its callers when they narrow it too. Of a level with more than its share
// of maxShown, it names those closest to subj (the longest common prefix;
// the first ones when subj is "") and says how many more there are. It
// returns the entries it names too.
func (r *toolRule) allowedText(subj string) (string, []string) {
	// The caller's level first, as Entries are ordered; a chain is rarely
	// deeper than a few levels, so the bookkeeping lives on the stack.
	var lvBuf [4]*toolEntries
	levels := lvBuf[:0]
	room := 0
	for _, lv := range r.levels {
		if lv.patterned {
			levels = append(levels, lv)
		}
	}
	share := max(maxShown/max(len(levels), 1), 1)
	for _, lv := range levels {
		room += min(lv.npatterns, share)
	}
	var endBuf, moreBuf [4]int
	ends, more := endBuf[:0], moreBuf[:0]
	shown := make([]string, 0, room)
	for _, lv := range levels {
		var m int
		shown, m = lv.closest(subj, share, shown)
		ends, more = append(ends, len(shown)), append(more, m)
	}
	size := 0
	for _, n := range shown {
		size += len(n) + 2
	}
	// The sentence names the surface's own level first, within its callers'.
	var b strings.Builder
	b.Grow(size + 32*len(levels))
	for i := len(levels) - 1; i >= 0; i-- {
		if i < len(levels)-1 {
			b.WriteString(" within the caller's ")
		}
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		for j, n := range shown[start:ends[i]] {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(n)
		}
		if more[i] > 0 {
			if ends[i] > start {
				b.WriteString(", ")
			}
			var digits [20]byte
			b.WriteString("and ")
			b.Write(strconv.AppendInt(digits[:0], int64(more[i]), 10))
			b.WriteString(" more")
		}
	}
	return b.String(), shown
}

func (e *Effective) toolList() string {
	if len(e.names) > 20 {
		return strings.Join(e.names[:20], ", ") + fmt.Sprintf(" and %d more", len(e.names)-20)
	}
	return strings.Join(e.names, ", ")
}

func ruleOf(k Kind) rule.ID {
	switch k {
	case Command:
		return rule.P3
	case Domain:
		return rule.P2
	}
	return rule.P4
}

// quoteSubject shows the subject as written and, when it differs, as
// resolved.
func quoteSubject(raw any, subj string) string {
	if s, ok := raw.(string); ok && s != subj {
		return strconv.Quote(s) + " (resolved to " + strconv.Quote(subj) + ")"
	}
	return strconv.Quote(subj)
}

// maxChains bounds a Chains cache: chains come from callers, and a chain
// can be made arbitrarily deep. Past the bound, chains are computed per call.
var maxChains = 4096

// Chains caches the effective list of each surface chain of one policy
// generation, computed once and reused (P10). Safe for concurrent use; the
// zero value is ready.
type Chains struct {
	mu sync.Mutex
	m  map[string]chainResult
	// root is the main agent's own chain, which nearly every call asks
	// for: once made, read without the lock, the key or the lists.
	rootOnce sync.Once
	root     chainResult
}

// Root returns the main agent's effective list, made by build the first
// time.
func (c *Chains) Root(build func() (*Effective, error)) (*Effective, error) {
	c.rootOnce.Do(func() { c.root.e, c.root.err = build() })
	return c.root.e, c.root.err
}

type chainResult struct {
	e   *Effective
	err error
}

// Get returns the effective list of the chain named key, computing it from
// lists the first time. key must identify the chain (for example its
// surfaces joined with a separator that no surface name contains).
func (c *Chains) Get(key string, lists ...*List) (*Effective, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[key]; ok {
		return r.e, r.err
	}
	e, err := Chain(lists...)
	if c.m == nil {
		c.m = map[string]chainResult{}
	}
	if len(c.m) < maxChains {
		c.m[key] = chainResult{e, err}
	}
	return e, err
}

// With is e with the deny and ask entries of more added (rule P14), as
// when more's lists were along e's chain: a session's flows (rule P18),
// whose lists declare no allowed-tools, bind the sandbox and the programs
// of a call as they bind the call. It is e when more adds nothing.
func (e *Effective) With(more *Effective) (*Effective, error) {
	if more == nil || len(more.lists) == 0 {
		return e, nil
	}
	if e == nil {
		return more, nil
	}
	return Chain(append(slices.Clip(e.lists), more.lists...)...)
}
