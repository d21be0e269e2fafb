package geminiimport

import (
	"testing"

	"aimon.dev/gw/internal/testkit/importcase"
)

var cases = importcase.Import{Files: Files, Import: Import}

// TestP14GeminiImportGolden imports each case of testdata as aimon-gw
// import gemini-cli does and compares the policy, and the rules it cannot
// keep, with the case's golden file: rules of each decision on Gemini's
// tools and MCP servers, the settings Gemini turns into rules (tools.core,
// exclude, allowed, confirmationRequired, an MCP server's trust,
// includeTools and excludeTools, mcp.excluded), priorities where Gemini's
// first match and aimon-gw's deny-first agree or can be made to (a rule
// that never decides, a deny left out), and rules it must not keep as
// they are (a regular expression, an MCP tool of any server, a tool the
// schema does not declare, a mode-bound deny, a deny a higher allow
// opens that a lower allow would reopen, a prefix with two spaces).
func TestP14GeminiImportGolden(t *testing.T) { cases.Golden(t) }

// TestP14GeminiImportBadInput: a file Gemini CLI would ignore (so that
// its rules would silently not hold) is refused with a sentence naming
// the file and rule, and no policy.
func TestP14GeminiImportBadInput(t *testing.T) {
	rule := func(body string) string { return "\n[[rule]]\n" + body + "\n" }
	cases.Refused(t, [][3]string{
		{"syntax.toml", "[[rule]\ntoolName = 1\n", "syntax.toml:1"},
		{"decision.toml", rule(`toolName = "read_file"` + "\ndecision = \"block\"\npriority = 1"), `decision.toml:2: decision "block" is not one Gemini CLI knows`},
		{"priority.toml", rule(`toolName = "read_file"` + "\ndecision = \"deny\"\npriority = 1000"), "priority.toml:2: priority must be an integer from 0 to 999"},
		{"nopriority.toml", rule(`toolName = "read_file"` + "\ndecision = \"deny\""), "nopriority.toml:2: priority must be"},
		{"notool.toml", rule("decision = \"deny\"\npriority = 1"), "notool.toml:2: toolName must be"},
		{"prefix.toml", rule(`toolName = "read_file"` + "\ncommandPrefix = \"x\"\ndecision = \"deny\"\npriority = 1"), "commandPrefix and commandRegex go only with"},
		{"both.toml", rule(`toolName = "run_shell_command"` + "\ncommandPrefix = \"x\"\ncommandRegex = \"y\"\ndecision = \"deny\"\npriority = 1"), "cannot both be given"},
		{"regex.toml", rule(`toolName = "run_shell_command"` + "\ncommandRegex = \"(\"\ndecision = \"deny\"\npriority = 1"), "is not a regular expression"},
		{"dunder.toml", rule(`toolName = "mcp__s__t"` + "\ndecision = \"deny\"\npriority = 1"), "uses the __ syntax"},
		{"settings.json", "{", "not Gemini CLI's settings.json"},
		{"notes.txt", "x", "neither a Gemini CLI policy file"},
	})
}
