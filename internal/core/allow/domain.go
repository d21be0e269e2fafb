package allow

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// domainSubject is the host of a URL field, lower case and without its
// port; a field that is no http(s) URL with a host has no subject (P5).
func domainSubject(v any) (string, string) {
	s, ok := v.(string)
	switch {
	case v == nil:
		return "", "is missing"
	case !ok:
		return "", notString(v)
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", "is not an http or https URL with a host"
	}
	return strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), ""
}

var hostChars = regexp.MustCompile(`^[a-z0-9*.-]+$`)

// domainRegexp reads a domain pattern, domain:HOST, as a regular expression
// over hosts: * stands for any host characters, dots included.
func domainRegexp(p string) (string, error) {
	host, ok := strings.CutPrefix(p, "domain:")
	host = strings.ToLower(host)
	switch {
	case !ok:
		return "", errors.New("a URL tool's pattern is domain:HOST, such as domain:example.com or domain:*.example.com")
	case host == "" || !hostChars.MatchString(host):
		return "", errors.New("the host of domain:HOST may hold only letters, digits, '.', '-' and '*'")
	}
	return "^" + strings.ReplaceAll(regexp.QuoteMeta(host), `\*`, `[a-z0-9.-]*`) + "$", nil
}

// domainMatcher compiles one domain pattern, and gives it as a CUE
// alternative.
func domainMatcher(pattern string) (matcher, string, error) {
	re, err := domainRegexp(pattern)
	if err != nil {
		return nil, "", err
	}
	m, err := compileRE(re)
	return m, "=~" + cueString(re), err
}
