package allow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/rule"
)

// ErrNoTool is wrapped by Chain's error when the lists along a chain leave
// no tool: the run is refused, never given an empty, unlimited list (P11).
var ErrNoTool = errors.New("no tool is left")

// Effective is the effective allowed-tools list of a surface chain: the
// unification of its lists (P10). It is immutable and safe for concurrent
// use. A nil *Effective, or one from a chain without lists, is unlimited.
type Effective struct {
	ctx   *cue.Context
	value cue.Value
	rules map[string]*toolRule // listed tools only
	names []string             // listed known tools, sorted
}

// toolRule is what the effective value says about one tool, prepared once.
type toolRule struct {
	tool         string
	subject      Subject
	field        cue.Value // the unified constraint on the subject
	top          bool      // name-only everywhere: every call (P6)
	m            matcher   // derived from field; nil: ask CUE
	levels       [][]entryInfo
	rulePatterns []string // every pattern a Ruler must answer for
}

// Chain unifies the lists along a surface chain, the main agent first. Nil
// lists (surfaces without a list) are skipped; with none left the result is
// unlimited. It is an error, wrapping ErrNoTool, when the lists have no
// known tool in common (P11), and when they come from different contexts.
func Chain(lists ...*List) (*Effective, error) {
	// Unification is idempotent: a list met twice along a chain (a skill
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
	e := &Effective{ctx: ls[0].ctx, value: ls[0].value, rules: map[string]*toolRule{}}
	for _, l := range ls[1:] {
		if l.ctx != e.ctx {
			return nil, fmt.Errorf("the allowed-tools lists of one chain were compiled with different CUE contexts; compile a policy's lists with one context")
		}
		e.value = e.value.Unify(l.value)
	}
	subjects := ls[len(ls)-1].subjects
	for _, t := range ls[0].names {
		field := e.value.LookupPath(cue.MakePath(cue.Str(t).Optional()))
		// Allows says yes to a field the intersection closed off; the
		// field's own error tells.
		if !field.Exists() || field.Err() != nil {
			continue
		}
		r := &toolRule{tool: t, subject: subjects[t], field: field, top: field.IncompleteKind() == cue.TopKind}
		if m, ok := derive(field); ok && !r.top {
			r.m = m
		}
		for _, l := range ls {
			infos := l.tools[t]
			r.levels = append(r.levels, infos)
			for _, in := range infos {
				if in.HasPattern && in.err == nil && !slices.Contains(r.rulePatterns, in.Pattern) {
					r.rulePatterns = append(r.rulePatterns, in.Pattern)
				}
			}
		}
		e.rules[t] = r
		if _, known := subjects[t]; known {
			e.names = append(e.names, t)
		}
	}
	if len(e.names) == 0 {
		return nil, fmt.Errorf("%w: the allowed-tools lists along this surface chain have no tool in common (%s); give each surface entries that its callers also allow", ErrNoTool, describeLists(ls))
	}
	return e, nil
}

func describeLists(ls []*List) string {
	var parts []string
	for _, l := range ls {
		var es []string
		for _, t := range l.names {
			for _, in := range l.tools[t] {
				es = append(es, in.Raw)
			}
		}
		parts = append(parts, "["+strings.Join(es, ", ")+"]")
	}
	return strings.Join(parts, " within ")
}

// Unlimited reports whether no list limits the chain.
func (e *Effective) Unlimited() bool { return e == nil || e.rules == nil }

// Tools returns the known tools that have an entry, sorted; nil when the
// chain is unlimited (P9).
func (e *Effective) Tools() []string {
	if e.Unlimited() {
		return nil
	}
	return slices.Clone(e.names)
}

// Listed reports whether the tool has an entry in the effective list, so
// that its definition is sent to the model (P9). An entry with a pattern
// keeps its tool listed. Every tool is listed when the chain is unlimited.
func (e *Effective) Listed(tool string) bool {
	if e.Unlimited() {
		return true
	}
	_, ok := e.rules[tool]
	return ok
}

// Value is the effective list as a CUE value; not meaningful when Unlimited.
func (e *Effective) Value() cue.Value {
	if e == nil {
		return cue.Value{}
	}
	return e.value
}

// Decision is the outcome of one call: the lattice fills Allowed, Reason
// (a sentence naming the tool and subject), Rule and Entries.
type Decision = rule.Decision

// Decide decides a call of tool with the raw decoded input in, relative
// paths resolving against workdir. It never fails and never panics: what
// cannot be decided is denied with a reason.
func (e *Effective) Decide(tool string, in map[string]any, workdir string) Decision {
	if e.Unlimited() {
		return Decision{Allowed: true, Rule: rule.P11, Reason: fmt.Sprintf("%s is allowed: no allowed-tools list limits this surface.", tool)}
	}
	r, ok := e.rules[tool]
	if !ok {
		return Decision{Rule: rule.P9, Reason: fmt.Sprintf("%s is not allowed on this surface: it has no entry in allowed-tools. Allowed tools are %s.", tool, e.toolList())}
	}
	if r.top {
		return Decision{Allowed: true, Rule: rule.P6, Reason: fmt.Sprintf("%s is allowed by name.", tool), Entries: r.raws(func(in entryInfo) bool { return !in.HasPattern })}
	}
	if bad := r.deniesAll(); bad != nil {
		return Decision{Rule: rule.P7, Reason: fmt.Sprintf("%s is not allowed on this surface: its only patterns cannot be used, so every call is denied (%s).", tool, strings.Join(bad, "; ")), Entries: r.raws(nil)}
	}
	switch r.subject.Kind {
	case Command, Path, Domain:
		return r.decideSubject(e, in, workdir)
	}
	if r.subject.Rule != nil {
		return r.decideRule(e, in, workdir, "")
	}
	// Unreachable: a pattern for a tool without subject or rule is bad, so
	// deniesAll answered. Deny anyway.
	return Decision{Rule: rule.P7, Reason: fmt.Sprintf("%s is not allowed on this surface: it has patterns but neither a subject nor its own rule.", tool), Entries: r.raws(nil)}
}

func (r *toolRule) decideSubject(e *Effective, in map[string]any, workdir string) Decision {
	field, kind := r.subject.Field, r.subject.Kind
	raw := in[field]
	var subj, why string
	switch kind {
	case Command:
		subj, why = commandSubject(raw)
	case Domain:
		subj, why = domainSubject(raw)
	default:
		subj, why = pathSubject(raw, workdir)
	}
	if why != "" {
		if r.subject.Rule != nil {
			return r.decideRule(e, in, workdir, why)
		}
		return Decision{Rule: rule.P5, Entries: r.raws(func(in entryInfo) bool { return in.HasPattern }),
			Reason: fmt.Sprintf("%s is not allowed: its %s field %s %s, and on this surface %s is limited to %s. Call it with %s set to a %s those patterns allow.", r.tool, kind, field, why, r.tool, r.allowedText(), field, kind)}
	}
	if r.allows(e, subj) {
		by := r.matching(subj)
		return Decision{Allowed: true, Rule: ruleOf(kind), Entries: by,
			Reason: fmt.Sprintf("%s %s %s is allowed by %s.", r.tool, kind, quoteSubject(raw, subj), strings.Join(by, " and "))}
	}
	d := Decision{Rule: ruleOf(kind), Entries: r.raws(func(in entryInfo) bool { return in.HasPattern })}
	d.Reason = fmt.Sprintf("%s %s %s is not allowed on this surface: allowed are %s.", r.tool, kind, quoteSubject(raw, subj), r.allowedText())
	if kind == Command && hasCommandMeta(subj) {
		d.Reason = fmt.Sprintf("%s %s %s is not allowed on this surface: a command with ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte matches no pattern; run one simple command at a time. Allowed are %s.", r.tool, kind, quoteSubject(raw, subj), r.allowedText())
	}
	return d
}

// allows decides a subject against the unified constraint: through the
// matcher derived from it, or through CUE when there is none.
func (r *toolRule) allows(e *Effective, subj string) bool {
	if r.m != nil {
		return r.m.match(subj)
	}
	return r.field.Unify(e.ctx.Encode(subj)).Validate(cue.Concrete(true)) == nil
}

// decideRule asks the tool's own rule about every pattern of the chain and
// unifies the answers with the effective constraint.
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
	entries := r.raws(func(in entryInfo) bool { return in.HasPattern })
	if r.field.Unify(e.ctx.Encode(answers)).Validate(cue.Concrete(true)) == nil {
		var by []string
		for _, lv := range r.levels {
			for _, in := range lv {
				if in.HasPattern && answers[in.Pattern] {
					by = append(by, in.Raw)
				}
			}
		}
		return Decision{Allowed: true, Rule: rule.P2, Entries: by, Reason: fmt.Sprintf("%s call is allowed by its own rule under %s.", r.tool, strings.Join(by, " and "))}
	}
	reason := fmt.Sprintf("%s call is not allowed on this surface: its own rule admits it under none of %s", r.tool, r.allowedText())
	if why != "" {
		reason = fmt.Sprintf("%s call is not allowed on this surface: its %s field %s %s, and its own rule admits it under none of %s", r.tool, r.subject.Kind, r.subject.Field, why, r.allowedText())
	}
	if len(errs) > 0 {
		reason += " (" + strings.Join(errs, "; ") + ")"
	}
	return Decision{Rule: rule.P2, Entries: entries, Reason: reason + "."}
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
		var bad []string
		valid := false
		for _, in := range lv {
			if !in.HasPattern {
				continue
			}
			if in.err != nil {
				bad = append(bad, in.err.Error())
			} else {
				valid = true
			}
		}
		if len(bad) > 0 && !valid {
			return bad
		}
	}
	return nil
}

// matching returns the pattern entries, at every level, whose own
// constraint admits subj, and the name-only entries of levels without
// patterns: the entries that let the call through.
func (r *toolRule) matching(subj string) []string {
	var out []string
	for _, lv := range r.levels {
		patterned := slices.ContainsFunc(lv, func(in entryInfo) bool { return in.HasPattern })
		for _, in := range lv {
			if (!patterned && !in.HasPattern) || (in.m != nil && in.m.match(subj)) {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}

func (r *toolRule) raws(keep func(entryInfo) bool) []string {
	var out []string
	for _, lv := range r.levels {
		for _, in := range lv {
			if keep == nil || keep(in) {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}

// allowedText lists the tool's patterns: the surface's own, within those of
// its callers when they narrow it too.
func (r *toolRule) allowedText() string {
	var parts []string
	for i := len(r.levels) - 1; i >= 0; i-- {
		var ps []string
		for _, in := range r.levels[i] {
			if in.HasPattern {
				ps = append(ps, in.Raw)
			}
		}
		if len(ps) > 0 {
			parts = append(parts, strings.Join(ps, ", "))
		}
	}
	return strings.Join(parts, " within the caller's ")
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

// quoteSubject shows the subject as given and, when it differs, as resolved.
func quoteSubject(raw any, subj string) string {
	if s, ok := raw.(string); ok && s != subj {
		return fmt.Sprintf("%q (resolved to %q)", s, subj)
	}
	return fmt.Sprintf("%q", subj)
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
