package allow

import "strings"

// Words splits a command line without metacharacters into the words the
// shell passes, quotes and backslashes read as the shell reads them; ok is
// false where it cannot tell them (an open quote, a trailing backslash, a
// brace). Importers read a runtime's shlex-split examples with it.
func Words(s string) (words []string, ok bool) {
	if !strings.ContainsAny(s, shellChars) {
		return strings.Fields(s), true
	}
	for _, w := range shellWords(s) {
		if w.any {
			return nil, false
		}
		words = append(words, w.text)
	}
	return words, true
}
