// Package rule names the rules of the gateway's specification (docs/RULES.md)
// and holds the one value a call's decision is made into, so that code
// which decides by a rule says which, and `grep -w P6` finds every use.
package rule

import (
	"slices"

	"aimon.dev/gw/tools"
)

// An ID is a rule's id, such as P6.
type ID string

// The rules (docs/RULES.md): C the tool contract, S schemas and the gate, P
// permissions, K concurrent execution, R running.
const (
	C1 ID = "C1"
	C2 ID = "C2"
	C3 ID = "C3"
	C4 ID = "C4"
	C5 ID = "C5"
	C6 ID = "C6"
	C7 ID = "C7"

	S1  ID = "S1"
	S2  ID = "S2"
	S3  ID = "S3"
	S4  ID = "S4"
	S5  ID = "S5"
	S6  ID = "S6"
	S7  ID = "S7"
	S8  ID = "S8"
	S9  ID = "S9"
	S10 ID = "S10"
	S11 ID = "S11"
	S12 ID = "S12"

	P1  ID = "P1"
	P2  ID = "P2"
	P3  ID = "P3"
	P4  ID = "P4"
	P5  ID = "P5"
	P6  ID = "P6"
	P7  ID = "P7"
	P8  ID = "P8"
	P9  ID = "P9"
	P10 ID = "P10"
	P11 ID = "P11"
	P12 ID = "P12"
	P13 ID = "P13"
	P14 ID = "P14"
	P15 ID = "P15"
	P16 ID = "P16"
	P17 ID = "P17"
	P18 ID = "P18"
	P19 ID = "P19"

	K1 ID = "K1"
	K2 ID = "K2"
	K3 ID = "K3"
	K4 ID = "K4"

	R1  ID = "R1"
	R2  ID = "R2"
	R3  ID = "R3"
	R4  ID = "R4"
	R5  ID = "R5"
	R6  ID = "R6"
	R7  ID = "R7"
	R8  ID = "R8"
	R9  ID = "R9"
	R10 ID = "R10"
)

// The codes of a policy's problems that no one rule governs. They are IDs
// too, so that a diagnostic's code, like a decision's rule, is one type
// (vet --format json prints both in "code"); IsRule tells them apart.
const (
	CUE    ID = "cue"    // the policy's CUE does not parse or unify
	Dir    ID = "dir"    // the policy directory cannot be used
	Schema ID = "schema" // the shipped schema, or a file's use of it
	Input  ID = "input"  // a tool's input admits less than its author meant
	Test   ID = "test"   // a test case of the policy cannot run as written
)

// rules are the ids of docs/RULES.md; problems the codes above.
var (
	rules = []ID{C1, C2, C3, C4, C5, C6, C7,
		S1, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12,
		P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15, P16, P17, P18, P19,
		K1, K2, K3, K4,
		R1, R2, R3, R4, R5, R6, R7, R8, R9, R10}
	problems = []ID{CUE, Dir, Schema, Input, Test}
)

// Rules returns every rule id of docs/RULES.md, in its order.
func Rules() []ID { return slices.Clone(rules) }

// IsRule reports whether id is a rule of docs/RULES.md.
func (id ID) IsRule() bool { return slices.Contains(rules, id) }

// Valid reports whether id is a code the gateway may emit: a rule, or one
// of the problem codes no one rule governs.
func (id ID) Valid() bool { return id.IsRule() || slices.Contains(problems, id) }

// A Mode is what the gate does with an input that breaks its schema (S9).
type Mode string

// The validation modes.
const (
	Off     Mode = "off"
	Warn    Mode = "warn"
	Enforce Mode = "enforce"
)

// A Decision is what the gateway decides about one call before it runs:
// made once per call, by the gate and the permission lattice together, and
// turned into a wire type (a tool_result, an MCP result, a hook answer) only
// at the edge.
type Decision struct {
	Allowed bool `json:"allowed"`
	// Ask is a refusal that a person's approval can turn into an allow
	// (rules P14, P15); Allowed is false with it.
	Ask bool `json:"ask,omitempty"`
	// Approval is the sealed token that approves an ask in the line
	// protocol (rule P15): the harness sends it back with the same call.
	Approval string `json:"approval,omitempty"`
	// Reason is the sentence a model or operator reads.
	Reason string `json:"reason"`
	// Rule is the rule that decided.
	Rule ID `json:"rule,omitempty"`
	// Entries are the entries that decided: allowed-tools entries, or the
	// denied-tools or ask-tools entries of a P14 decision.
	Entries []string `json:"entries,omitempty"`
	// EntryAt is where each deciding entry is written (file:line:col: a
	// policy file, or the markdown file a list came from); check only.
	EntryAt []string `json:"entry_at,omitempty"`
	// Effective is every entry along the chain that bears on the tool;
	// absent when no list limits the chain.
	Effective []string `json:"effective,omitempty"`
	// Violations are the gate's sentences, whatever the validation mode.
	Violations []string `json:"violations,omitempty"`
	// Mode is the tool's validation mode (S9).
	Mode Mode `json:"validation,omitempty"`
	// Ceiling is the chain's side-effect ceiling (P13); "" for none.
	Ceiling string `json:"max_effect,omitempty"`
	// Sandbox is where the call's commands may write (R6), for a tool that
	// runs in one.
	Sandbox *tools.Sandbox `json:"sandbox,omitempty"`
	// Input is the canonical call the decision was made on, which is what
	// runs (rule R7): path subjects absolute and cleaned, null members gone.
	Input tools.Input `json:"-"`
	// RetryAfter is when a call a limit refused may be tried again, in
	// seconds (rule P19); 0 for another decision.
	RetryAfter float64 `json:"retry_after_seconds,omitempty"`
}

// Refused is a decision that refuses, by rule r, with the sentence reason.
func Refused(r ID, reason string) Decision { return Decision{Rule: r, Reason: reason} }
