package allow

import (
	"fmt"
	"regexp"
	"strings"
)

// commandMeta is the set of characters that make a command match no pattern
// (rule P3): with any of them a command could chain, substitute or redirect
// past what its pattern names.
const commandMeta = ";|&`$><()\n\r\x00"

// commandMetaRE is the same set as an RE2 class, for the CUE constraint.
const commandMetaRE = "[;|&`$><()\\n\\r\\x00]"

// commandAlt is the CUE constraint of one valid command pattern, without the
// metacharacter guard: the exact command, or a prefix with a word boundary
// when the pattern ends in ":*" (rule P3).
func commandAlt(pattern string) (string, error) {
	if strings.ContainsAny(pattern, commandMeta) {
		return "", fmt.Errorf("the command pattern contains one of ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte, so no command could ever match it")
	}
	prefix, wild := strings.CutSuffix(pattern, ":*")
	if !wild {
		return cueString(pattern), nil
	}
	if strings.TrimSpace(prefix) == "" {
		return "", fmt.Errorf("the command pattern has nothing before ':*'; write the name alone to allow every command")
	}
	return cueString(prefix) + " | =~" + cueString("^"+regexp.QuoteMeta(prefix+" ")), nil
}

// commandConstraint is the CUE constraint of a tool's command patterns.
func commandConstraint(alts []string) string {
	return "!~" + cueString(commandMetaRE) + " & (" + strings.Join(alts, " | ") + ")"
}

// commandSubject is the subject of a command tool: the raw command line, or
// none when it is not a non-blank string (rule P2, P5).
func commandSubject(v any) (string, string) {
	s, ok := v.(string)
	switch {
	case v == nil:
		return "", "is missing"
	case !ok:
		return "", notString(v)
	case strings.TrimSpace(s) == "":
		return "", "is blank"
	case !validUTF8(s):
		return "", "is not valid UTF-8"
	}
	return s, ""
}

// hasCommandMeta reports whether a command matches no pattern whatever the
// patterns are (rule P3). Only used to explain a denial; the decision itself
// comes from the CUE constraint.
func hasCommandMeta(s string) bool { return strings.ContainsAny(s, commandMeta) }
