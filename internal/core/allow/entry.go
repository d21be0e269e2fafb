// Package allow decides whether a tool call may run under the allowed-tools
// lists of a surface chain (rules P1–P7, P10, P11).
//
// The meaning of a declared list is a CUE value: a closed struct with one
// optional field per tool, whose value constrains the call's permission
// subject. The effective list of a chain is the unification of its lists, so
// a child can never be wider than its caller. Unifying long lists costs
// their cross product, so calls are decided by what that unification means,
// computed from each entry's compiled matcher: a call is allowed when every
// list that narrows its tool has an entry that admits it. Each list indexes
// its command entries by first word and its path entries by literal
// directory, so a decision looks at the entries that can match only; a
// chain costs its number of lists and tools, whatever the entries. A
// differential test (table, generated lists, fuzz) holds the decisions to
// the unification of the lists' CUE values (List.Value).
//
// The field values:
//
//	Bash(git:*), Bash(ls)  !~"[;|&`$><()\n\r\x00]" & ("git" | =~"^git " | "ls")
//	Read(/tmp/**)          =~"(?s)^(?:/tmp/.+|/tmp/|/tmp)$"
//	Read                   _ (only when no Read entry has a pattern: P6)
//	Browser(click:)        {"click:": true} (a Ruler's answer per pattern)
//
// Choices where the rules are silent:
//
//   - A path pattern must be absolute or start with **; a relative pattern,
//     or one with an empty, "." or ".." segment or a trailing slash, could
//     never match a normalized subject and is a bad pattern (P7). So is a *
//     right before a {, which doublestar reads differently from its
//     expansion.
//   - A subject field that is absent, null, blank or not a string is no
//     subject (P5), also for Grep and Glob whose path defaults to the working
//     directory: under path patterns the model must name the path.
//   - A command or path that is not valid UTF-8 is no subject.
//   - A pattern whose tool is unknown to the policy denies, like a pattern
//     for a tool without subject or rule (P7).
//   - A tool with a subject and its own Ruler is judged on its subject; the
//     Ruler decides only calls without one, over the same patterns.
package allow

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"aimon.dev/gw/tools"
)

// Kind is the kind of a tool's permission subject (rule P2).
type Kind string

// Subject kinds. None means the tool has no subject.
const (
	None    Kind = ""
	Command Kind = "command"
	Path    Kind = "path"
	// Domain is a URL's host (WebFetch): patterns are domain:HOST, where *
	// in HOST stands for any characters (Claude Code's WebFetch(domain:…)).
	Domain Kind = "domain"
)

// Subject is what a policy declares about a tool's permission subject: the
// input field that holds it and its kind. Rule, when set, is the tool's own
// rule for decisions that need several fields (rule P2).
type Subject struct {
	Field string
	Kind  Kind
	Rule  Ruler
}

// Ruler is a tool's own permission rule, for tools whose decision needs more
// than one input field (a browser's action:url). Allow reports whether the
// pattern admits the call; an error denies it and is shown to the model.
// A tool that also declares a subject is judged on its subject first; its
// Ruler decides only a call that has no subject.
type Ruler interface {
	Allow(pattern string, in map[string]any, workdir string) (bool, error)
}

// Entry is one parsed allowed-tools entry: Name or Name(pattern) (rule P1).
type Entry struct {
	Tool       string
	Pattern    string
	HasPattern bool
	Raw        string
}

func (e Entry) String() string { return e.Raw }

// EntryError is an entry that cannot be used as written. Its pattern, if it
// has one, denies every call (rule P7); vet reports it.
type EntryError struct {
	Entry  string // the entry as written
	Reason string // why, as a sentence
	List   string // DeniedTools or AskTools; "" for allowed-tools
}

// The keys of the lists beside allowed-tools (P14).
const (
	DeniedTools = "denied-tools"
	AskTools    = "ask-tools"
)

func (e *EntryError) Error() string {
	key := e.List
	if key == "" {
		key = "allowed-tools"
	}
	return fmt.Sprintf("%s entry %q cannot be used: %s", key, e.Entry, e.Reason)
}

// ParseEntry parses an entry (rule P1). On error the returned Entry still
// names the tool when the name part is readable, and HasPattern is true when
// the entry tried to give a pattern, so that a malformed pattern narrows its
// tool to nothing instead of leaving it unlimited (rule P7).
func ParseEntry(s string) (Entry, error) {
	e := Entry{Raw: s}
	name, rest, paren := strings.Cut(s, "(")
	if !tools.ValidName(name) {
		return e, &EntryError{Entry: s, Reason: fmt.Sprintf("the tool name %q is not a valid tool name (1 to 64 of a-z, A-Z, 0-9, _ and -); write Name or Name(pattern)", name)}
	}
	e.Tool = name
	if !paren {
		return e, nil
	}
	e.HasPattern = true
	if !strings.HasSuffix(rest, ")") {
		return e, &EntryError{Entry: s, Reason: "the pattern is not closed with ')' at the end; write Name(pattern)"}
	}
	e.Pattern = rest[:len(rest)-1]
	if strings.TrimSpace(e.Pattern) == "" {
		return e, &EntryError{Entry: s, Reason: "the pattern is empty; write the name alone to allow every call of the tool"}
	}
	if !utf8.ValidString(e.Pattern) {
		return e, &EntryError{Entry: s, Reason: "the pattern is not valid UTF-8"}
	}
	return e, nil
}
