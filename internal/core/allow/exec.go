package allow

import (
	"fmt"
	"strings"

	"aimon.dev/gw/internal/core/rule"
)

// Programs started inside a command's sandbox are judged where they start
// (rule P16): the sandbox reads each exec's program and argument vector
// and asks ExecDecide. These are the same deny and ask entries and the
// same reader (P3, wrappers, -c strings) as the command line's.

// ExecDecide decides one program a command of tool starts, words being
// the program's name and its real arguments: by the deny and ask entries
// alone (what a command starts need not be on the allow lists, which
// decided the command). Allowed when neither withholds it; Ask when an
// ask entry does.
func (e *Effective) ExecDecide(tool string, words []string, workdir string) Decision {
	return e.ExecDecideCarrying(tool, words, workdir, false)
}

// ExecDecideCarrying is ExecDecide for a call whose approval covers a
// push (Pushes) when carrying: the programs git starts to carry it (git
// receive-pack for a local remote, git send-pack --stateless-rpc under
// the HTTP helper) are not read as git push, so that the approved push
// runs; every other program is judged as ExecDecide judges it.
func (e *Effective) ExecDecideCarrying(tool string, words []string, workdir string, carrying bool) Decision {
	ok := Decision{Allowed: true}
	if e == nil || len(words) == 0 || e.deny[tool] == nil && e.ask[tool] == nil {
		return ok
	}
	what := fmt.Sprintf("program %s", quoteWords(words))
	if whole := e.deniedWhole(tool); whole != nil {
		return Decision{Rule: rule.P16, Entries: whole, Reason: fmt.Sprintf("%s %s is denied on this surface by %s.", tool, what, strings.Join(whole, " and "))}
	}
	subj := strings.Join(words, " ")
	lit := make([]shellWord, len(words))
	for i, w := range words {
		lit[i] = shellWord{text: w}
	}
	c := callSubject{subj: subj, what: what, quoted: true, readings: commandReadingsCarrying(lit, carrying), workdir: workdir}
	if by := c.matching(e.deny[tool]); len(by) > 0 {
		shown, text := named(by, " and ")
		return Decision{Rule: rule.P16, Entries: shown, Reason: fmt.Sprintf("%s %s is denied on this surface by %s.", tool, what, text)}
	}
	by := e.wholes().asked[tool]
	if by == nil {
		by = c.matching(e.ask[tool])
	}
	if len(by) > 0 {
		shown, text := named(by, " and ")
		return Decision{Ask: true, Rule: rule.P16, Entries: shown, Reason: fmt.Sprintf("%s %s needs approval on this surface: %s asks for it.", tool, what, text)}
	}
	return ok
}

// ExecNames are the command names the deny and ask entries of tool
// start with: the programs the sandbox identifies by what they are.
func (e *Effective) ExecNames(tool string) []string {
	if e == nil {
		return nil
	}
	return e.wholes().exec[tool] // gathered once; the caller must not change it
}

// SimpleCommands are the word lists a command line may run as the shell
// passes them, as the deny and ask entries read it: the simple commands an
// approval of the line approves (rule P16). Words the reader cannot fix
// (a glob, an expansion) are left out with their command.
func SimpleCommands(command string) [][]string {
	var out [][]string
	for _, r := range commandReadings(commandWords(strings.Join(strings.Fields(command), " "))) {
		ws := make([]string, 0, len(r))
		for _, w := range r {
			if w.wild || w.any {
				ws = nil
				break
			}
			ws = append(ws, w.text)
		}
		if len(ws) > 0 {
			out = append(out, ws)
		}
	}
	return out
}

// QuoteWords is words as a shell would read them back: a command line
// that runs them.
func QuoteWords(words []string) string { return quoteWords(words) }

// quoteWords is words as a shell would read them back, for sentences.
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]{}~#!") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		q[i] = w
	}
	return strings.Join(q, " ")
}
