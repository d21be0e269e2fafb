package allow

import "strings"

// Deny and ask entries read a command as the shell will run it (rule
// P14): `git 'push'`, `git p\ush` and `git {push,x}` run git push, so
// they meet Bash(git push:*) as git push does. Allow entries are not
// widened by this: they still match the command as written (P3).

// shellWord is one word of a command after the shell's quote removal;
// wild when an unquoted expansion (a glob, a brace) or a quote left open
// makes it unknowable: it may become any words, or none.
type shellWord struct {
	text string
	wild bool
	any  bool // wild by more than a glob (a brace, an open quote): any words at all
}

// shellChars are the characters that can make the shell's words differ
// from the command's space-separated fields.
const shellChars = `'"\*?[{`

// shellWords splits a command without metacharacters (P3) into the words
// the shell will pass; nil when none of shellChars is in it, so that its
// fields are its words.
func shellWords(s string) []shellWord {
	if !strings.ContainsAny(s, shellChars) {
		return nil
	}
	var (
		words []shellWord
		cur   strings.Builder
		w     shellWord
		inW   bool
		quote byte
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case quote == '"':
			switch {
			case ch == '"':
				quote = 0
			case ch == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(ch)
			}
		case ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f':
			if inW {
				w.text = cur.String()
				words, w, inW = append(words, w), shellWord{}, false
				cur.Reset()
			}
			continue
		case ch == '\\':
			if i+1 == len(s) {
				w.wild, w.any = true, true
			} else {
				i++
				cur.WriteByte(s[i])
			}
		case ch == '\'' || ch == '"':
			quote = ch
		default:
			w.wild = w.wild || strings.IndexByte("*?[{", ch) >= 0
			w.any = w.any || ch == '{'
			cur.WriteByte(ch)
		}
		inW = true
	}
	if inW {
		w.text, w.wild, w.any = cur.String(), w.wild || quote != 0, w.any || quote != 0
		words = append(words, w)
	}
	return words
}

// cmdPattern is a command pattern's words, and whether it ends in :*.
type cmdPattern struct {
	words []string
	wild  bool
}

func cmdPatternOf(pattern string) cmdPattern {
	prefix, wild := strings.CutSuffix(pattern, ":*")
	return cmdPattern{strings.Fields(prefix), wild}
}

// mayRun reports whether words, as the shell passes them, may be a
// command that the command pattern (P3) admits: each of the pattern's
// words equal, until a wild word that may stand for the rest.
func mayRun(words []shellWord, c cmdPattern) bool {
	for i, p := range c.words {
		switch {
		case i >= len(words):
			return false
		case words[i].wild:
			return true
		case words[i].text != p:
			return false
		}
	}
	return c.wild || mayVanish(words[len(c.words):]) // an exact pattern: another word makes another command
}
