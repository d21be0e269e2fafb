package allow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"cuelang.org/go/cue"

	"aimon.dev/gw/tools"
	"cuelang.org/go/cue/literal"
)

// List is one declared allowed-tools list compiled to a CUE value: a closed
// struct with one optional field per tool, whose value constrains the
// subject. A nil *List is a surface that declares no list: unlimited (P11).
type List struct {
	ctx      *cue.Context
	value    cue.Value
	src      string
	subjects map[string]Subject
	tools    map[string][]entryInfo // every entry, by tool, in order
	names    []string               // tools with a field, sorted
}

// entryInfo is a parsed entry with what it contributes on its own; the
// matcher only explains decisions, which come from the unified value.
type entryInfo struct {
	Entry
	err error   // the pattern cannot be used: it denies (P7)
	idx int     // its place in the list
	m   matcher // this entry's constraint alone; nil for name-only or bad
}

// Compile compiles one declared list. subjects maps every tool the policy
// defines to its declared subject (Kind None when it has none); a tool not in
// subjects is unknown. The errors are *EntryError, one for each entry that
// cannot be used: an entry without a readable tool name is dropped, and a
// pattern that cannot be used denies every call of its tool (P7). All lists
// of one chain must be compiled with the same ctx.
func Compile(ctx *cue.Context, entries []string, subjects map[string]Subject) (*List, []error) {
	l := &List{ctx: ctx, subjects: subjects, tools: map[string][]entryInfo{}}
	byEntry := make([]error, len(entries)) // errors in the order of the entries
	for i, raw := range entries {
		e, err := ParseEntry(raw)
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
		l.tools[e.Tool] = append(l.tools[e.Tool], entryInfo{Entry: e, err: err, idx: i})
	}
	for t := range l.tools {
		l.names = append(l.names, t)
	}
	slices.Sort(l.names)

	var b strings.Builder
	b.WriteString("close({\n")
	for _, t := range l.names {
		infos := l.tools[t]
		c := l.constrain(t, infos)
		for _, in := range infos {
			byEntry[in.idx] = in.err
		}
		fmt.Fprintf(&b, "\t%s?: %s\n", cueString(t), c)
	}
	b.WriteString("})\n")
	var errs []error
	for _, err := range byEntry {
		if err != nil {
			errs = append(errs, err)
		}
	}
	l.src = b.String()
	l.value = ctx.CompileString(l.src, cue.Filename("allowed-tools"))
	if err := l.value.Err(); err != nil {
		// Every piece is quoted or checked above, so this is a bug; deny
		// everything rather than run unlimited.
		errs = append(errs, fmt.Errorf("internal error: the allowed-tools list does not compile to CUE (%v); every call is denied", err))
		l.value = ctx.CompileString("close({})")
		l.names = nil
		l.tools = map[string][]entryInfo{}
	}
	return l, errs
}

// constrain builds the CUE constraint of one tool's entries and records, in
// infos, the errors of patterns that cannot be used and each entry's own
// matcher.
func (l *List) constrain(tool string, infos []entryInfo) string {
	sub, known := l.subjects[tool]
	var kindAlts, ruleAlts []string
	patterned := false
	for i := range infos {
		in := &infos[i]
		if !in.HasPattern {
			continue
		}
		patterned = true
		if in.err != nil {
			continue
		}
		alt, err := "", error(nil)
		switch sub.Kind {
		case Command:
			alt, err = commandAlt(in.Pattern)
		case Path:
			var re string
			if re, err = globRegexp(in.Pattern); err == nil {
				alt = "=~" + cueString(re)
			}
		case Domain:
			var re string
			if re, err = domainRegexp(in.Pattern); err == nil {
				alt = "=~" + cueString(re)
			}
		default:
			switch {
			case !known:
				err = fmt.Errorf("%s is not a tool this policy defines, so its pattern cannot be checked; check the name", tool)
			case sub.Rule == nil:
				err = fmt.Errorf("%s has neither a permission subject nor its own rule, so a pattern cannot be checked and denies every call; write %s alone or declare subject in the tool's policy", tool, tool)
			}
		}
		if err != nil && sub.Rule != nil {
			// The tool's own rule may still read the pattern; it decides
			// the calls that have no subject.
			alt, err = "", nil
		}
		if err != nil {
			in.err = &EntryError{Entry: in.Raw, Reason: err.Error()}
			continue
		}
		single := ""
		if alt != "" {
			kindAlts = append(kindAlts, alt)
			single = kindConstraint(sub.Kind, []string{alt})
		}
		if sub.Rule != nil {
			ra := "{" + cueString(in.Pattern) + ": true}"
			ruleAlts = append(ruleAlts, ra)
			if single == "" {
				single = ra
			}
		}
		if m, ok := derive(l.ctx.CompileString(single)); ok {
			in.m = m
		}
	}
	switch {
	case !patterned:
		return "_"
	case len(kindAlts) == 0 && len(ruleAlts) == 0:
		return "=~" + cueString(nothing)
	case len(ruleAlts) == 0:
		return kindConstraint(sub.Kind, kindAlts)
	case len(kindAlts) == 0:
		return strings.Join(ruleAlts, " | ")
	}
	// Judged on its subject first: a call with a subject is a string and
	// meets the first branch; one without meets the rule's.
	return "(string & " + kindConstraint(sub.Kind, kindAlts) + ") | " + strings.Join(ruleAlts, " | ")
}

func kindConstraint(k Kind, alts []string) string {
	if k == Command {
		return commandConstraint(alts)
	}
	return "(" + strings.Join(alts, " | ") + ")"
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

// Value is the list as a CUE value.
func (l *List) Value() cue.Value { return l.value }

// Source is the list as CUE source, for logs and debugging.
func (l *List) Source() string { return l.src }

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
