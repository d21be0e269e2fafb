package allow

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// ErrNeedsCUE is returned by Save for an effective list that cannot be
// kept as data: a tool along it has its own rule, which is code.
var ErrNeedsCUE = errors.New("the effective list needs its tools' own rules to decide some calls")

// SavedEffective is an effective list as data (it marshals to JSON), for
// RestoreEffective: the chain's lists as written, and the subjects of the
// tools they name. Restoring compiles them again, which needs no CUE.
type SavedEffective struct {
	Unlimited bool                    `json:",omitzero"`
	Subjects  map[string]savedSubject `json:",omitzero"`
	Lists     []Decl                  `json:",omitzero"`
}

type savedSubject struct {
	Field string `json:",omitzero"`
	Kind  Kind   `json:",omitzero"`
}

// Save returns e as data that RestoreEffective turns back into a list that
// decides, explains and bounds every call as e does (the hook's cache). It
// fails with ErrNeedsCUE when a tool along it has its own rule.
func (e *Effective) Save() (*SavedEffective, error) {
	if e.Unlimited() {
		return &SavedEffective{Unlimited: true}, nil
	}
	s := &SavedEffective{Subjects: map[string]savedSubject{}}
	for _, l := range e.lists {
		d := Decl{Allow: l.entries, AllowNone: l.allowNone, Deny: l.denied, Ask: l.asked}
		for _, raw := range slices.Concat(d.Allow, d.Deny, d.Ask) {
			if !utf8.ValidString(raw) {
				// JSON would hold another string.
				return nil, fmt.Errorf("the entry %q is not valid UTF-8, which the saved form cannot hold", raw)
			}
		}
		for _, m := range []map[string]*toolEntries{l.tools, l.deny, l.ask} {
			for t := range m {
				sub, ok := l.subjects[t]
				if !ok {
					continue
				}
				if sub.Rule != nil {
					return nil, fmt.Errorf("%w: %s", ErrNeedsCUE, t)
				}
				s.Subjects[t] = savedSubject{Field: sub.Field, Kind: sub.Kind}
			}
		}
		s.Lists = append(s.Lists, d)
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
	if len(s.Lists) == 0 {
		return nil, errors.New("the saved effective list has no list")
	}
	subjects := make(map[string]Subject, len(s.Subjects))
	for t, sub := range s.Subjects {
		switch sub.Kind {
		case None, Command, Path, Domain:
		default:
			return nil, fmt.Errorf("the saved subject of %s has the unknown kind %q", t, sub.Kind)
		}
		subjects[t] = Subject{Field: sub.Field, Kind: sub.Kind}
	}
	ls := make([]*List, len(s.Lists))
	for i, d := range s.Lists {
		ls[i], _ = CompileDecl(nil, d, subjects)
	}
	return Chain(ls...)
}
