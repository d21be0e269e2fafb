package allow

import (
	"errors"
	"fmt"
	"regexp"
	"unicode/utf8"
)

// ErrNeedsCUE is returned by Save for an effective list that decides some
// calls through CUE (a constraint no matcher is derived from, or a tool's
// own rule): such a list cannot be kept without its CUE value.
var ErrNeedsCUE = errors.New("the effective list needs CUE to decide some calls")

// SavedEffective is an effective list as data (it marshals to JSON), for
// RestoreEffective.
type SavedEffective struct {
	Unlimited bool
	Names     []string
	Rules     map[string]*savedRule
}

type savedRule struct {
	Field        string         `json:",omitzero"`
	Kind         Kind           `json:",omitzero"`
	Top          bool           `json:",omitzero"`
	Match        *savedMatcher  `json:",omitzero"` // nil only when Top
	Levels       [][]savedEntry `json:",omitzero"`
	RulePatterns []string       `json:",omitzero"`
}

type savedEntry struct {
	Entry
	Err   *string       `json:",omitzero"`
	Idx   int           `json:",omitzero"`
	Match *savedMatcher `json:",omitzero"`
}

// savedMatcher is one matcher: Op is any, all, exactly, re, not or always.
// Fields are left out of the JSON only when zero (omitzero).
type savedMatcher struct {
	Op  string
	S   string          `json:",omitzero"`
	B   bool            `json:",omitzero"`
	Sub []*savedMatcher `json:",omitzero"`
}

// Save returns e as data that RestoreEffective turns back into a list that
// decides, explains and bounds every call as e does, without CUE (the
// hook's cache). It fails with ErrNeedsCUE when some decision of e needs CUE.
func (e *Effective) Save() (*SavedEffective, error) {
	if e.Unlimited() {
		return &SavedEffective{Unlimited: true}, nil
	}
	s := &SavedEffective{Names: e.names, Rules: make(map[string]*savedRule, len(e.rules))}
	for t, r := range e.rules {
		if r.subject.Rule != nil || (r.m == nil && !r.top) {
			return nil, fmt.Errorf("%w: %s", ErrNeedsCUE, t)
		}
		sr := &savedRule{Field: r.subject.Field, Kind: r.subject.Kind, Top: r.top, RulePatterns: r.rulePatterns}
		var err error
		if r.m != nil {
			if sr.Match, err = saveMatcher(r.m); err != nil {
				return nil, err
			}
		}
		for _, lv := range r.levels {
			out := make([]savedEntry, len(lv))
			for i, in := range lv {
				if !utf8.ValidString(in.Raw) {
					// JSON would hold another string.
					return nil, fmt.Errorf("the entry %q is not valid UTF-8, which the saved form cannot hold", in.Raw)
				}
				out[i] = savedEntry{Entry: in.Entry, Idx: in.idx}
				if in.err != nil {
					msg := in.err.Error()
					out[i].Err = &msg
				}
				if in.m != nil {
					if out[i].Match, err = saveMatcher(in.m); err != nil {
						return nil, err
					}
				}
			}
			sr.Levels = append(sr.Levels, out)
		}
		s.Rules[t] = sr
	}
	return s, nil
}

// RestoreEffective makes an effective list of what Save returned, or of its
// JSON read back.
func RestoreEffective(s *SavedEffective) (*Effective, error) {
	if s == nil {
		return nil, errors.New("no saved effective list")
	}
	if s.Unlimited {
		return &Effective{}, nil
	}
	e := &Effective{names: s.Names, rules: make(map[string]*toolRule, len(s.Rules))}
	// The same expression recurs in many matchers (a rule and its
	// entries); each is compiled once.
	res := map[string]*regexp.Regexp{}
	for _, n := range s.Names {
		if s.Rules[n] == nil {
			return nil, fmt.Errorf("the saved effective list names %s but has no rule for it", n)
		}
	}
	for t, sr := range s.Rules {
		if sr == nil {
			return nil, fmt.Errorf("the saved rule of %s is empty", t)
		}
		r := &toolRule{tool: t, subject: Subject{Field: sr.Field, Kind: sr.Kind}, top: sr.Top, rulePatterns: sr.RulePatterns}
		var err error
		switch {
		case sr.Match != nil:
			if r.m, err = sr.Match.matcher(0, res); err != nil {
				return nil, err
			}
		case !sr.Top:
			return nil, fmt.Errorf("the saved rule of %s has no matcher", t)
		}
		for _, lv := range sr.Levels {
			out := make([]entryInfo, len(lv))
			for i, in := range lv {
				out[i] = entryInfo{Entry: in.Entry, idx: in.Idx}
				if in.Err != nil {
					out[i].err = errors.New(*in.Err)
				}
				if in.Match != nil {
					if out[i].m, err = in.Match.matcher(0, res); err != nil {
						return nil, err
					}
				}
			}
			r.levels = append(r.levels, out)
		}
		e.rules[t] = r
	}
	return e, nil
}

func saveMatcher(m matcher) (*savedMatcher, error) {
	switch m := m.(type) {
	case anyOf, allOf:
		s := &savedMatcher{Op: "any"}
		subs := []matcher(nil)
		if a, ok := m.(allOf); ok {
			s.Op, subs = "all", a
		} else {
			subs = m.(anyOf)
		}
		for _, x := range subs {
			sx, err := saveMatcher(x)
			if err != nil {
				return nil, err
			}
			s.Sub = append(s.Sub, sx)
		}
		return s, nil
	case exactly:
		return &savedMatcher{Op: "exactly", S: string(m)}, nil
	case reMatch:
		return &savedMatcher{Op: "re", S: m.re.String()}, nil
	case reNot:
		return &savedMatcher{Op: "not", S: m.re.String()}, nil
	case always:
		return &savedMatcher{Op: "always", B: bool(m)}, nil
	}
	return nil, fmt.Errorf("%w: a matcher of type %T", ErrNeedsCUE, m)
}

// maxMatcherDepth bounds a saved matcher's nesting.
const maxMatcherDepth = 64

func (s *savedMatcher) matcher(depth int, res map[string]*regexp.Regexp) (matcher, error) {
	if s == nil {
		return nil, errors.New("a saved matcher is empty")
	}
	if depth > maxMatcherDepth {
		return nil, errors.New("a saved matcher is nested too deeply")
	}
	switch s.Op {
	case "any", "all":
		ms := make([]matcher, 0, len(s.Sub))
		for _, x := range s.Sub {
			m, err := x.matcher(depth+1, res)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		if s.Op == "all" {
			return allOf(ms), nil
		}
		return anyOf(ms), nil
	case "exactly":
		return exactly(s.S), nil
	case "re", "not":
		re, ok := res[s.S]
		if !ok {
			var err error
			if re, err = regexp.Compile(s.S); err != nil {
				return nil, err
			}
			res[s.S] = re
		}
		if s.Op == "re" {
			return reMatch{re}, nil
		}
		return reNot{re}, nil
	case "always":
		return always(s.B), nil
	}
	return nil, fmt.Errorf("a saved matcher has the unknown form %q", s.Op)
}
