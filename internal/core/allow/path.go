package allow

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// maxAlternatives bounds the brace expansion of one path pattern, so that a
// pattern such as {a,b}{a,b}{a,b}... cannot blow up a policy load.
const maxAlternatives = 64

// globRegexp translates a doublestar path pattern into an RE2 expression
// that matches exactly the lexically normalized absolute paths that
// doublestar.Match accepts (rule P4). A differential fuzz test holds the two
// together. Patterns that are not absolute (or starting with **), that have
// a trailing slash, or empty, "." or ".." segments are refused: they could
// never match a normalized subject, and silently never matching would hide
// the author's mistake.
func globRegexp(pattern string) (string, error) {
	if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "**") {
		return "", fmt.Errorf("the path pattern is relative; write ./%[1]s for under the working directory, an absolute pattern such as /srv/repo/%[1]s, or one starting with ** such as **/%[1]s", pattern)
	}
	if strings.ContainsRune(pattern, 0) {
		return "", fmt.Errorf("the path pattern contains a NUL byte")
	}
	if !doublestar.ValidatePattern(pattern) {
		return "", fmt.Errorf("the path pattern is not a valid glob (an unclosed [ or {, an empty [], or a trailing \\)")
	}
	if starBeforeBrace(pattern) {
		return "", fmt.Errorf("the path pattern has * right before {, which is ambiguous; write the alternatives in full, such as /a/{*.go,*.cue} instead of /a/*{.go,.cue}")
	}
	alts, err := expandBraces(pattern, nil)
	if err != nil {
		return "", err
	}
	res := make([]string, 0, len(alts))
	seen := map[string]bool{}
	for _, a := range alts {
		if a != "/" && (strings.HasSuffix(a, "/") || strings.Contains(a, "//")) {
			return "", fmt.Errorf("the path pattern %q has an empty segment or a trailing slash, which no normalized path has; write /dir/** for a directory's contents", a)
		}
		for _, seg := range strings.Split(a, "/") {
			if seg == "." || seg == ".." {
				return "", fmt.Errorf("the path pattern %q has a %q segment, which no normalized path has; write the path without it", a, seg)
			}
		}
		re, err := braceFreeRegexp(a)
		if err != nil {
			return "", err
		}
		if !seen[re] {
			seen[re] = true
			res = append(res, re)
		}
	}
	return "(?s)^(?:" + strings.Join(res, "|") + ")$", nil
}

// expandBraces expands {a,b} alternatives textually, as doublestar does when
// it matches, and appends the brace-free patterns to out.
func expandBraces(p string, out []string) ([]string, error) {
	open := -1
	for i := 0; i < len(p) && open < 0; i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			i = skipClass(p, i)
		case '{':
			open = i
		}
	}
	if open < 0 {
		if len(out) >= maxAlternatives {
			return nil, fmt.Errorf("the path pattern expands to more than %d alternatives; split it into several entries", maxAlternatives)
		}
		return append(out, p), nil
	}
	closing := matchedClose(p[open+1:])
	if closing < 0 {
		return nil, fmt.Errorf("the path pattern has an unclosed {")
	}
	closing += open + 1
	body, before, after := p[open+1:closing], p[:open], p[closing+1:]
	var err error
	for {
		comma := nextAlt(body)
		if comma < 0 {
			break
		}
		if out, err = expandBraces(before+body[:comma]+after, out); err != nil {
			return nil, err
		}
		body = body[comma+1:]
	}
	return expandBraces(before+body+after, out)
}

// starBeforeBrace reports an unescaped * right before a {. doublestar
// decides what a star is before it expands the braces that follow it, so
// such a pattern would not mean what its expansion says.
func starBeforeBrace(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			i = skipClass(p, i)
		case '*':
			if i+1 < len(p) && p[i+1] == '{' {
				return true
			}
		}
	}
	return false
}

// skipClass is the index of the ']' that closes the character class
// opened at p[i], skipping escapes; len(p) when none does.
func skipClass(p string, i int) int {
	for i++; i < len(p) && p[i] != ']'; i++ {
		if p[i] == '\\' {
			i++
		}
	}
	return i
}

// matchedClose and nextAlt scan like doublestar's indexMatchedClosingAlt and
// indexNextAlt, so that the expansion splits where its matcher does.
func matchedClose(s string) int { return scanAlt(s, false) }

func nextAlt(s string) int { return scanAlt(s, true) }

// scanAlt finds, skipping escapes and classes, the '}' that closes the
// brace s is inside, or with comma the ',' at its own depth.
func scanAlt(s string, comma bool) int {
	depth := 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			i = skipClass(s, i)
		case '{':
			depth++
		case '}':
			if depth--; depth == 0 && !comma {
				return i
			}
		case ',':
			if comma && depth == 1 {
				return i
			}
		}
	}
	return -1
}

// token is one step of doublestar's matcher over a brace-free pattern.
type token struct {
	raw  string // the pattern text it came from
	re   string // what it matches
	reNE string // what it matches when it consumes at least one character
}

// braceFreeRegexp translates a pattern without braces. doublestar walks the
// name and the pattern together; once the name is used up, the rest of the
// pattern matches only if it is one of a few zero-length forms (*, **, /**,
// and so on), even where each of its tokens could match nothing. So the
// expression is a choice over where the name ends: a prefix of the tokens
// whose last one consumes a character, followed by a zero-length rest.
func braceFreeRegexp(p string) (string, error) {
	toks, err := tokenize(p)
	if err != nil {
		return "", err
	}
	var alts []string
	rest := ""
	for k := len(toks); k >= 0; k-- {
		if k < len(toks) {
			rest = toks[k].raw + rest
		}
		if !zeroLength(rest) {
			continue
		}
		if k == 0 {
			alts = append(alts, "") // only the empty name
			continue
		}
		var b strings.Builder
		for _, t := range toks[:k-1] {
			b.WriteString(t.re)
		}
		if last := toks[k-1].reNE; last != "" {
			b.WriteString(last)
			alts = append(alts, b.String())
		}
	}
	if len(alts) == 0 {
		return nothing, nil
	}
	return strings.Join(alts, "|"), nil
}

// zeroLength mirrors doublestar's isZeroLengthPattern for brace-free rests.
func zeroLength(rest string) bool {
	switch rest {
	case "", "*", "**", "/**", "**/", "/**/":
		return true
	}
	return false
}

// tokenize splits a brace-free pattern the way doublestar's matcher steps
// through it.
func tokenize(p string) ([]token, error) {
	var toks []token
	rs := []rune(p)
	startOfSegment := true
	star := token{re: "[^/]*", reNE: "[^/]+"}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch r {
		case '*':
			t := star
			t.raw = "*"
			if i+1 < len(rs) && rs[i+1] == '*' {
				i++
				t.raw = "**"
				if startOfSegment {
					if i+1 == len(rs) {
						// A trailing segment ** takes whatever is left.
						toks = append(toks, token{raw: "**", re: ".*", reNE: ".+"})
						continue
					}
					if rs[i+1] == '/' {
						i++
						toks = append(toks, token{raw: "**/", re: "(?:[^/]*/)*", reNE: "(?:[^/]*/)+"})
						startOfSegment = true
						continue
					}
				}
			}
			toks = append(toks, t)
			startOfSegment = false
		case '?':
			toks = append(toks, token{raw: "?", re: "[^/]", reNE: "[^/]"})
			startOfSegment = false
		case '[':
			n, class, err := classRegexp(rs[i+1:])
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{raw: string(rs[i : i+n+1]), re: class, reNE: class})
			i += n
			startOfSegment = false
		case '\\':
			i++
			if i == len(rs) {
				return nil, fmt.Errorf("the path pattern ends with a lone \\")
			}
			q := regexp.QuoteMeta(string(rs[i]))
			toks = append(toks, token{raw: string(rs[i-1 : i+1]), re: q, reNE: q})
			startOfSegment = rs[i] == '/'
		default:
			q := regexp.QuoteMeta(string(r))
			toks = append(toks, token{raw: string(r), re: q, reNE: q})
			startOfSegment = r == '/'
		}
	}
	return toks, nil
}

// classRegexp translates a character class whose '[' has been consumed; it
// returns how many runes it used, including the closing ']'. Each range is
// written out as \x{..} so that no character is special to RE2, and a
// reversed range matches nothing, as in doublestar.
func classRegexp(rs []rune) (int, string, error) {
	i := 0
	negate := false
	if i < len(rs) && (rs[i] == '!' || rs[i] == '^') {
		negate = true
		i++
	}
	var ranges []string
	last := rune(-1)
	for ; i < len(rs) && rs[i] != ']'; i++ {
		r := rs[i]
		if last >= 0 && r == '-' && i+1 < len(rs) && rs[i+1] != ']' {
			i++
			if rs[i] == '\\' {
				i++
				if i == len(rs) {
					break
				}
			}
			hi := rs[i]
			// The first rune already stands alone, as in doublestar; a
			// reversed range adds nothing to it.
			if last <= hi {
				ranges = append(ranges, fmt.Sprintf(`\x{%x}-\x{%x}`, last, hi))
			}
			last = -1
			continue
		}
		if r == '\\' {
			i++
			if i == len(rs) {
				break
			}
			r = rs[i]
		}
		ranges = append(ranges, fmt.Sprintf(`\x{%x}`, r))
		last = r
	}
	if i >= len(rs) {
		return 0, "", fmt.Errorf("the path pattern has an unclosed [")
	}
	class := "[" + strings.Join(ranges, "") + "]"
	if negate {
		class = "[^" + class[1:]
	}
	// doublestar keeps one backtrack point per kind of star, which misses
	// matches when a class takes a separator (/**[!a]** on /b/a); a class
	// that can match / would make the translation disagree with it.
	if re, err := regexp.Compile(class); err != nil || re.MatchString("/") {
		return 0, "", fmt.Errorf("the character class %q in the path pattern can match /, which a class may not; leave / out, or add it to a negated class as in [!a/]", "["+string(rs[:i+1]))
	}
	return i + 1, class, nil
}

// nothing is an RE2 expression that matches no string.
const nothing = `[^\x{0}-\x{10ffff}]`

// pathSubject is the subject of a path tool: the path made absolute against
// the working directory and lexically normalized, with symbolic links left
// alone (rule P4). The second result says why there is none (rule P5).
func pathSubject(v any, workdir string) (string, string) {
	s, ok := v.(string)
	switch {
	case v == nil:
		return "", "is missing"
	case !ok:
		return "", notString(v)
	case strings.TrimSpace(s) == "":
		return "", "is blank"
	case strings.ContainsRune(s, 0):
		return "", "contains a NUL byte"
	case !validUTF8(s):
		return "", "is not valid UTF-8"
	}
	if !strings.HasPrefix(s, "/") {
		if !strings.HasPrefix(workdir, "/") || strings.ContainsRune(workdir, 0) || !validUTF8(workdir) {
			return "", fmt.Sprintf("is the relative path %q and there is no absolute working directory to resolve it against; give an absolute path", s)
		}
		s = workdir + "/" + s
	}
	return path.Clean(s), ""
}

// pathMatcher compiles one path pattern, and gives it as a CUE alternative.
// A pattern without glob characters is its path; one that is such a path
// followed by /** is that directory's tree; the rest match by their
// regular expression.
func pathMatcher(pattern string) (matcher, string, error) {
	re, err := globRegexp(pattern)
	if err != nil {
		return nil, "", err
	}
	alt := "=~" + cueString(re)
	const globChars = "*?[]{}\\"
	if lit, ok := strings.CutSuffix(pattern, "/**"); ok && !strings.ContainsAny(lit, globChars) {
		return dirTree(lit), alt, nil
	}
	if !strings.ContainsAny(pattern, globChars) {
		return exactly(pattern), alt, nil
	}
	m, err := compileRE(re)
	return m, alt, err
}

// compileRE compiles a translated pattern; it never fails for what the
// translations produce, and an error makes the entry deny (P7).
func compileRE(re string) (matcher, error) {
	c, err := regexp.Compile(re)
	if err != nil {
		return nil, fmt.Errorf("internal error: the pattern translates to %q, which does not compile (%v)", re, err)
	}
	return reMatch{c}, nil
}
