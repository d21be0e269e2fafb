package policy

import (
	"fmt"
	"strings"

	"cuelang.org/go/cue"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// The schema's tools, surfaces, tests and sandboxes have no disjunctions:
// CUE evaluates every alternative of one for every tool, which was half
// the load of a 1,000-tool policy (issue 32). The values a field may take
// and its default, which the schema's comments state, are here.

// enum is a string field with a closed set of values.
type enum struct {
	field  string // as the policy writes it, below the tool or surface
	path   string // where it is looked up, when not the field itself
	code   rule.ID
	values []string
	dflt   string // what leaving the field out means; "" for no default
}

var (
	effectField      = enum{"effect", "", rule.P13, []string{"none", "read", "write", "destructive"}, "destructive"}
	maxEffectField   = enum{"max-effect", "", rule.P13, effectField.values, ""}
	concurrencyField = enum{"concurrency", "", rule.K2, []string{"sequential", "concurrent_safe"}, "sequential"}
	interruptField   = enum{"interrupt", "", rule.K1, []string{"non_interruptible", "cooperative", "thread_interrupt", "externally_terminated"}, "non_interruptible"}
	kindField        = enum{"subject.kind", "subject.kind", rule.P2, []string{"command", "path", "domain"}, ""}
	builtinField     = enum{"builtin", "", rule.C1, []string{"Read", "Write", "Edit", "Bash", "Grep", "Glob", "Echo"}, ""}
	validationField  = enum{"validation", "", rule.S9, []string{"off", "warn", "enforce"}, ""}
	modeField        = enum{"sandbox.mode", "mode", rule.R6, []string{"required", "off"}, "required"}
	readsField       = enum{"reads", "", rule.P17, []string{"file", "tree"}, ""}
)

// The defaults of the other fields the schema leaves open.
const (
	// defaultMaxFileBytes bounds what Write and Edit produce (16 MiB).
	defaultMaxFileBytes = 16 << 20
	defaultOpenWorld    = true
)

// oneOf returns the value of the string field e of v, or e's default when
// v leaves it out; a value e does not allow is reported at its place, for
// owner ("tool Echo", "agent"), and ok is false.
func (c *compiler) oneOf(owner string, v cue.Value, e enum) (string, bool) {
	path := cue.MakePath(cue.Str(e.field))
	if e.path != "" {
		path = cue.ParsePath(e.path)
	}
	f := v.LookupPath(path)
	if !f.Exists() {
		return e.dflt, true
	}
	got, err := f.String()
	if err == nil {
		for _, a := range e.values {
			if got == a {
				return got, true
			}
		}
	}
	c.fail(f, e.code, "%s", e.sentence(owner, f, got, err))
	return "", false
}

// sentence says what is wrong with the value got (or its error) and what
// to write instead.
func (e enum) sentence(owner string, f cue.Value, got string, err error) string {
	quoted := make([]string, len(e.values))
	for i, a := range e.values {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	what := fmt.Sprintf("%q", got)
	if err != nil {
		what = fmt.Sprint(f) // not a concrete string: a number, a struct, a type
	}
	msg := fmt.Sprintf("%s: %s must be %s or %s, not %s; write one of them", owner, e.field,
		strings.Join(quoted[:len(quoted)-1], ", "), quoted[len(quoted)-1], what)
	if near := tools.Closest(got, e.values); err == nil && near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	if e.dflt != "" {
		msg += fmt.Sprintf(", or leave it out for %q", e.dflt)
	}
	return msg + "."
}
