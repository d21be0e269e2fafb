package policy

import (
	"strings"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/front/policyref"
)

// A Position is a place in a policy's files: a file, and a line and column
// in it (1-based; 0 when the problem is about the whole file or directory).
type Position struct {
	File      string
	Line, Col int
}

// IsValid reports whether p names a place.
func (p Position) IsValid() bool { return p.internal().IsValid() }

// String renders p as file:line:col, the file alone without a line.
func (p Position) String() string { return p.internal().String() }

func (p Position) internal() ipolicy.Position {
	return ipolicy.Position{File: p.File, Line: p.Line, Col: p.Col}
}

// A Diagnostic is one problem of a policy, at its place in the files.
type Diagnostic struct {
	// Pos is where: file:line:col, or the directory alone when the problem
	// has no place in a file.
	Pos Position
	// Code is the rule broken ("P7", "S4", ...) or the kind of problem no
	// one rule governs ("cue", "dir", ...), for tools that sort or filter.
	Code string
	// Message is a sentence that says what is wrong and what to do.
	Message string
	// Warning marks a problem that does not stop the policy from loading
	// or serving, though not as its authors meant.
	Warning bool
}

// String is the diagnostic as aimon-gw vet prints it: file:line:col: message.
func (d Diagnostic) String() string { return d.internal().String() }

func (d Diagnostic) internal() ipolicy.Diagnostic {
	return ipolicy.Diagnostic{Pos: d.Pos.internal(), Code: rule.ID(d.Code), Message: d.Message, Warning: d.Warning}
}

// Errors is every problem that stopped a policy from loading: the error of
// Load and LoadFS when the policy's files are at fault.
type Errors []Diagnostic

func (e Errors) Error() string {
	in := make(ipolicy.Errors, len(e))
	for i, d := range e {
		in[i] = d.internal()
	}
	return in.Error()
}

// diagnostics converts the internal problems; nil for none.
func diagnostics(ds []ipolicy.Diagnostic) Errors {
	if len(ds) == 0 {
		return nil
	}
	out := make(Errors, len(ds))
	for i, d := range ds {
		out[i] = Diagnostic{Pos: Position{File: strings.TrimPrefix(d.Pos.File, policyref.FSRoot), Line: d.Pos.Line, Col: d.Pos.Col}, Code: string(d.Code), Message: d.Message, Warning: d.Warning}
	}
	return out
}
