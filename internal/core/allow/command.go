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

// commandMatcher compiles one command pattern, without the metacharacter
// guard, which applies to the whole list: the exact command, or a prefix
// with a word boundary when the pattern ends in ":*" (rule P3). The second
// result is the same as a CUE alternative.
func commandMatcher(pattern string) (matcher, string, error) {
	if strings.ContainsAny(pattern, commandMeta) {
		return nil, "", fmt.Errorf("the command pattern contains one of ; | & ` $ > < ( ), a newline, a carriage return or a NUL byte, so no command could ever match it")
	}
	prefix, wild := strings.CutSuffix(pattern, ":*")
	if !wild {
		return exactly(pattern), cueString(pattern), nil
	}
	if strings.TrimSpace(prefix) == "" {
		return nil, "", fmt.Errorf("the command pattern has nothing before ':*'; write the name alone to allow every command")
	}
	return wordPrefix(prefix), cueString(prefix) + " | =~" + cueString("^"+regexp.QuoteMeta(prefix+" ")), nil
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
// patterns are (rule P3).
func hasCommandMeta(s string) bool { return strings.ContainsAny(s, commandMeta) }
