package allow

import (
	"fmt"
	"slices"
	"strings"

	"aimon.dev/gw/internal/core/rule"
)

// Deny and ask entries (rule P14). They are constraints like allow entries,
// with the same grammar, matchers and subjects, but they accumulate along a
// chain instead of meeting: a child inherits its callers' and adds its own.
// A deny entry that admits a call denies it; a call the allow lists allow
// that an ask entry admits needs approval. Where a deny or ask entry cannot
// tell (its pattern cannot be used, the call has no subject, a command
// chains others), the call is denied: such an entry only ever narrows.

// accumulate gathers one kind of entry of every list, by tool.
func accumulate(ls []*List, of func(*List) map[string]*toolEntries) map[string][]*toolEntries {
	var out map[string][]*toolEntries
	for _, l := range ls {
		for t, te := range of(l) {
			if out == nil {
				out = map[string][]*toolEntries{}
			}
			out[t] = append(out[t], te)
		}
	}
	return out
}

// deniedWhole returns the name-only deny entries of tool: each denies
// every call of it. nil when there is none.
func (e *Effective) deniedWhole(tool string) []string {
	if e == nil {
		return nil
	}
	return e.wholes().denied[tool]
}

// wholes gathers, once, the name-only deny and ask entries of every tool
// and the command names its deny and ask entries start with. The slices
// are clipped: a caller that appends to one copies it.
func (e *Effective) wholes() *wholes {
	e.wholeOnce.Do(func() {
		w := wholes{denied: map[string][]string{}, asked: map[string][]string{}, exec: map[string][]string{}}
		nameOnly := func(lvs []*toolEntries) []string {
			var out []string
			for _, lv := range lvs {
				for _, in := range lv.infos {
					if !in.HasPattern {
						out = append(out, in.Raw)
					}
				}
			}
			return slices.Clip(out)
		}
		for tool, lvs := range e.deny {
			if by := nameOnly(lvs); by != nil {
				w.denied[tool] = by
			}
			w.exec[tool] = nil
		}
		for tool, lvs := range e.ask {
			if by := nameOnly(lvs); by != nil {
				w.asked[tool] = by
			}
			w.exec[tool] = nil
		}
		for tool := range w.exec {
			var names []string
			for _, lvs := range [][]*toolEntries{e.deny[tool], e.ask[tool]} {
				for _, lv := range lvs {
					for _, in := range lv.infos {
						if w := in.cmd.words; len(w) > 0 && !strings.ContainsAny(w[0], "*?[") {
							names = append(names, w[0])
						}
					}
				}
			}
			slices.Sort(names)
			w.exec[tool] = slices.Clip(slices.Compact(names))
		}
		e.whole = w
	})
	return &e.whole
}

// denies decides the deny entries of a call, and what ask entries cannot
// tell; ok is false when they leave the call to the allow lists.
func (e *Effective) denies(tool string, in map[string]any, written any, workdir string) (Decision, bool) {
	if e == nil || (e.deny[tool] == nil && e.ask[tool] == nil) {
		return Decision{}, false
	}
	if whole := e.deniedWhole(tool); whole != nil {
		return Decision{Rule: rule.P14, Entries: whole, Reason: fmt.Sprintf("%s is denied on this surface by %s.", tool, strings.Join(whole, " and "))}, true
	}
	for _, lvs := range [][]*toolEntries{e.deny[tool], e.ask[tool]} {
		for _, lv := range lvs {
			if len(lv.bad) > 0 {
				shown, _ := named(patterned(lvs), "")
				return Decision{Rule: rule.P7, Entries: shown, Reason: fmt.Sprintf("%s is not allowed on this surface: %s; until it is fixed it denies every call.", tool, lv.bad[0])}, true
			}
		}
	}
	m := e.matcherOf(tool, in, written, workdir)
	if m.why != "" { // listing the entries costs a walk of them all
		if judging := e.judging(tool); len(judging) > 0 {
			shown, text := named(judging, ", ")
			return Decision{Rule: rule.P5, Entries: shown,
				Reason: fmt.Sprintf("%s is not allowed: %s, and on this surface %s is limited by %s. Call it with a subject those entries can judge.", tool, m.why, tool, text)}, true
		}
	}
	if by := m.matching(e.deny[tool]); len(by) > 0 {
		shown, text := named(by, " and ")
		return Decision{Rule: rule.P14, Entries: shown, Reason: fmt.Sprintf("%s %s is denied on this surface by %s.", tool, m.describe(), text)}, true
	}
	if m.chained && len(e.deny[tool]) > 0 {
		shown, text := named(patterned(e.deny[tool]), ", ")
		return Decision{Rule: rule.P14, Entries: shown, Reason: fmt.Sprintf("%s %s is denied on this surface: a command with ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte could run what %s denies; run one simple command at a time.", tool, m.describe(), text)}, true
	}
	return Decision{}, false
}

// judging returns the deny and ask entries of tool that need the call's
// subject to tell: the pattern entries, less the ask entries when a
// name-only ask entry asks for every call anyway. With none, a call without
// a subject is left to the allow lists and the name-only entries (an ask
// entry of a tool without a subject asks, P14).
func (e *Effective) judging(tool string) []string {
	if e.askedWhole(tool) {
		return patterned(e.deny[tool])
	}
	return patterned(append(slices.Clip(e.deny[tool]), e.ask[tool]...))
}

// askedWhole reports whether a name-only ask entry asks for every call of
// tool.
func (e *Effective) askedWhole(tool string) bool {
	return len(e.wholes().asked[tool]) > 0
}

// asks turns an allowed call that an ask entry admits into one that needs
// approval (P14).
func (e *Effective) asks(tool string, in map[string]any, written any, workdir string, d Decision) Decision {
	if e == nil || len(e.ask[tool]) == 0 {
		return d
	}
	lvs := e.ask[tool]
	by := e.wholes().asked[tool]
	what := ""
	if by == nil {
		m := e.matcherOf(tool, in, written, workdir)
		what = " " + m.describe()
		if by = m.matching(lvs); by == nil && m.chained {
			by = patterned(lvs) // a chained command: a person reads it whole
		}
	}
	if by == nil {
		return d
	}
	shown, text := named(by, " and ")
	rest := d.Reason
	if !strings.HasPrefix(rest, tool) { // a tool's name keeps its case
		rest = lowerFirst(rest)
	}
	return Decision{Ask: true, Rule: rule.P14, Entries: shown,
		Reason: fmt.Sprintf("%s%s needs approval on this surface: %s asks for it, and %s", tool, what, text, strings.TrimSuffix(rest, ".")) + "."}
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// named bounds the entries a sentence names (maxShown): it returns those
// it names and the text naming them, sep between them, with how many more
// there are.
func named(es []string, sep string) ([]string, string) {
	if len(es) <= maxShown {
		return es, strings.Join(es, sep)
	}
	shown := es[:maxShown:maxShown]
	return shown, strings.Join(shown, sep) + fmt.Sprintf(", and %d more", len(es)-maxShown)
}

// Named is named for front ends' sentences: the entries a sentence names,
// at most maxShown, and the text naming them.
func Named(es []string, sep string) ([]string, string) { return named(es, sep) }

// patterned returns the pattern entries of the levels.
func patterned(lvs []*toolEntries) []string {
	var out []string
	for _, lv := range lvs {
		for _, in := range lv.infos {
			if in.HasPattern {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}

// callSubject is what deny and ask entries are matched against: the
// subject as the allow lists read it, or the tool's own rule's answers.
type callSubject struct {
	subj     string // for a tool with a subject kind
	what     string // the subject for sentences, such as command "ls"; see describe
	kind     Kind   // with written and spelt, what describe says when what is ""
	written  any
	spelt    string
	why      string        // why there is no subject, when patterns need one
	chained  bool          // a command with metacharacters (P3)
	quoted   bool          // a command whose words as the shell passes them differ from its fields
	readings [][]shellWord // a command's words as the shell passes them, and what they may run (P14)
	rule     Ruler
	in       map[string]any
	workdir  string
}

// describe is the subject for sentences, such as command "ls".
func (c callSubject) describe() string {
	if c.what != "" {
		return c.what
	}
	return fmt.Sprintf("%s %s", c.kind, quoteSubject(c.written, c.spelt))
}

func (e *Effective) matcherOf(tool string, in map[string]any, written any, workdir string) callSubject {
	sub := e.subjects[tool]
	c := callSubject{rule: sub.Rule, in: in, workdir: workdir, what: "call"}
	if sub.Kind == None {
		if sub.Rule == nil {
			c.why = fmt.Sprintf("%s has neither a subject nor its own rule", tool)
		}
		return c
	}
	raw := in[sub.Field]
	subj, why := subjectOf(sub.Kind, raw, workdir)
	if why != "" {
		if sub.Rule == nil {
			c.why = fmt.Sprintf("its %s field %s %s", sub.Kind, sub.Field, why)
		}
		return c
	}
	c.rule = nil // judged on its subject first (P2)
	if written != nil {
		raw = written
	}
	// Its sentence is made only when one is said: most calls are allowed.
	c.what, c.kind, c.written, c.spelt = "", sub.Kind, raw, subj
	if sub.Kind == Command {
		// Deny and ask read a command as a person would: spaces and
		// tabs between words do not hide it.
		c.chained = hasCommandMeta(subj)
		subj = strings.Join(strings.Fields(subj), " ")
		words := commandWords(subj)
		c.quoted = strings.ContainsAny(subj, shellChars)
		c.readings = commandReadings(words)
	}
	c.subj = subj
	return c
}

// matching returns the pattern entries of the levels that admit the call.
func (c callSubject) matching(lvs []*toolEntries) []string {
	var out []string
	for _, lv := range lvs {
		if c.rule != nil {
			for _, i := range lv.rules {
				p := lv.infos[i]
				if ok, err := safeAllow(c.rule, p.Pattern, c.in, c.workdir); ok || err != nil {
					out = append(out, p.Raw) // an error cannot clear the call
				}
			}
			continue
		}
		var buf [16]int
		for _, i := range lv.candidates(c.subj, buf[:0]) {
			if in := &lv.infos[i]; in.m.match(c.subj) {
				out = append(out, in.Raw)
			}
		}
		if lv.kind == Command {
			out = c.readingsMatching(lv, out)
		}
	}
	return out
}

// Covers reports whether the deny entry denies every call the allow entry
// allows, for a tool whose subject is of kind k (rule P14): the same tool
// and a name-only deny, an equal pattern, a command prefix that holds the
// allowed command, or a directory tree that holds the allowed pattern's
// literal directory. It answers false where it cannot tell.
func Covers(k Kind, deny, allowed Entry) bool {
	switch {
	case deny.Tool != allowed.Tool:
		return false
	case !deny.HasPattern:
		return true
	case !allowed.HasPattern:
		return false
	case deny.Pattern == allowed.Pattern:
		return true
	}
	switch k {
	case Command:
		dp, wild := strings.CutSuffix(deny.Pattern, ":*")
		ap, _ := strings.CutSuffix(allowed.Pattern, ":*")
		return wild && wordPrefix(dp).match(ap)
	case Path:
		tree, ok := strings.CutSuffix(deny.Pattern, "/**")
		if !ok || strings.ContainsAny(tree, "*?[]{}\\") || !strings.HasPrefix(allowed.Pattern, "/") {
			return false
		}
		return dirTree(tree).match(LiteralDir(allowed.Pattern))
	}
	return false
}

// readingsMatching appends the command entries of lv that a reading of the
// command admits, and that out does not hold yet: the command as the
// shell passes it, through wrappers and -c strings, with options before
// a subcommand (P14).
func (c callSubject) readingsMatching(lv *toolEntries, out []string) []string {
	var buf [16]int
	for ri, r := range c.readings {
		for _, i := range lv.commandCandidates(r, buf[:0]) {
			in := &lv.infos[i]
			if in.m == nil || slices.Contains(out, in.Raw) {
				continue
			}
			// The first reading without quotes is the command as written,
			// which the matchers have read already.
			if (ri > 0 || c.quoted) && mayRun(r, in.cmd) || mayRunAfterOptions(r, in.cmd) {
				out = append(out, in.Raw)
			}
		}
	}
	return out
}
