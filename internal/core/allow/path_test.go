package allow

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// normalized turns any string into a subject as pathSubject would: absolute
// and lexically normalized.
func normalized(s string) string { return path.Clean("/" + s) }

// TestP4GlobAgreesWithDoublestar checks the translation on hand-picked
// patterns and paths; FuzzP4GlobAgreesWithDoublestar explores further.
func TestP4GlobAgreesWithDoublestar(t *testing.T) {
	patterns := []string{
		"/tmp/**", "/tmp/*", "/tmp/*.log", "/tmp/**/*.log", "/**", "/*", "/", "**", "**/*.go",
		"/a/**/b", "/a/**/b/**", "/a/**b", "/a/b**", "/a/***", "/a/?", "/a/[abc]", "/a/[!abc/]",
		"/a/[^a-c/]x", "/a/[z-a]", "/a/[a-]", "/a/[-a]", "/a/[\\]]", "/a/{b,c}/d", "/a/{b,{c,d}}",
		"/a/\\*", "/a/report(1).csv", "/a/x.{go,cue}", "/a/*/**",
		"/{a,b}/**", "/a/**/**/b", "/a/{**,x}/b", "/é/*", "/a/[é-ü]",
	}
	paths := []string{
		"/", "/tmp", "/tmp/x", "/tmp/x.log", "/tmp/a/b.log", "/tmpevil", "/tmp/evil/x", "/etc/passwd",
		"/a", "/a/b", "/a/c/d", "/a/b/d", "/a/x/b", "/a/x/y/b", "/a/bb", "/a/xb", "/a/*", "/a/]",
		"/a/-", "/a/z", "/a/report(1).csv", "/a/x.go", "/a/x.cue", "/a/b/c", "/b/x", "/é/x", "/a/é",
		"/a/{b,c}", "/a/\n", "/a/x\ny", "/a/b/x/b",
	}
	for _, p := range patterns {
		re, err := globRegexp(p)
		if err != nil {
			t.Errorf("globRegexp(%q): %v", p, err)
			continue
		}
		rx := regexp.MustCompile(re)
		for _, name := range paths {
			want, _ := doublestar.Match(p, name)
			if got := rx.MatchString(name); got != want {
				t.Errorf("pattern %q, path %q: regexp %s says %v, doublestar %v", p, name, re, got, want)
			}
		}
	}
}

func FuzzP4GlobAgreesWithDoublestar(f *testing.F) {
	for _, s := range [][2]string{
		{"/tmp/**", "/tmp/x"}, {"/a/**/b", "/a/x/y/b"}, {"/a/*.{go,cue}", "/a/x.go"},
		{"/a/[!b-d]?", "/a/ex"}, {"**/*.go", "/x/y.go"}, {"/a/**/*b*/c", "/a/xb/yb/c"},
		{"/a/*/**", "/a/b"}, {"/x/\\[a]", "/x/[a]"}, {"/a/[\\-]", "/a/-"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if !utf8.ValidString(name) {
			return // subjects are valid UTF-8 (pathSubject refuses others)
		}
		name = normalized(name)
		re, err := globRegexp(pattern)
		if err != nil {
			return
		}
		rx, err := regexp.Compile(re)
		if err != nil {
			t.Fatalf("globRegexp(%q) = %q, which does not compile: %v", pattern, re, err)
		}
		want, err := doublestar.Match(pattern, name)
		if err != nil {
			t.Fatalf("pattern %q accepted by globRegexp is bad for doublestar: %v", pattern, err)
		}
		if got := rx.MatchString(name); got != want {
			t.Fatalf("pattern %q, path %q: regexp %s says %v, doublestar %v", pattern, name, re, got, want)
		}
	})
}

func TestP7BadPathPatterns(t *testing.T) {
	for _, p := range []string{
		"src/**", "./x", "*.go", "/a/[", "/a/{b", "/a/b}", "/a/[]", "/a/\\", "/tmp/", "/a//b", "/a/{,b}", "/a/\\{b,c}", "/a/[!a]", "/a/[/]b", "/a/[+-0]", "/a/*{b,c}", "**{}",
		"/a/../b", "/a/./b", "/a/{b/,c}", "/a\x00", "~/x",
		strings.Repeat("/{a,b}", 9),
	} {
		if re, err := globRegexp(p); err == nil {
			t.Errorf("globRegexp(%q) = %q, want an error", p, re)
		}
	}
}

func TestP4PathSubject(t *testing.T) {
	for _, c := range []struct {
		in      any
		workdir string
		want    string
		none    bool
	}{
		{in: "/tmp/x", want: "/tmp/x"},
		{in: "/tmp/../etc/passwd", want: "/etc/passwd"},
		{in: "/tmp//x/./y/", want: "/tmp/x/y"},
		{in: "x/y", workdir: "/work", want: "/work/x/y"},
		{in: "../etc/passwd", workdir: "/work", want: "/etc/passwd"},
		{in: "../../../..", workdir: "/work", want: "/"},
		{in: "report(1).csv", workdir: "/w", want: "/w/report(1).csv"},
		{in: "a;b|c$(d)", workdir: "/w", want: "/w/a;b|c$(d)"},
		{in: " /etc/passwd", workdir: "/w", want: "/w/ /etc/passwd"},
		{in: "x", none: true},
		{in: "x", workdir: "relative", none: true},
		{in: "/tmp/x\x00y", none: true},
		{in: "", workdir: "/w", none: true},
		{in: "  ", workdir: "/w", none: true},
		{in: nil, none: true},
		{in: 42, none: true},
		{in: []any{"/tmp/x"}, none: true},
		{in: map[string]any{"p": "/tmp/x"}, none: true},
		{in: "/tmp/\xff", none: true},
	} {
		got, why := pathSubject(c.in, c.workdir)
		if c.none {
			if why == "" {
				t.Errorf("pathSubject(%q, %q) = %q, want no subject", c.in, c.workdir, got)
			}
			continue
		}
		if why != "" || got != c.want {
			t.Errorf("pathSubject(%q, %q) = %q (%s), want %q", c.in, c.workdir, got, why, c.want)
		}
	}
}

// TestP4SymlinksNotResolved: a link under an allowed directory that points
// elsewhere is judged by its own name; isolation is a sandbox's job.
func TestP4SymlinksNotResolved(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Skip("no symlinks here:", err)
	}
	e := chain(t, []string{"Read(" + dir + "/**)"})
	if d := e.Decide("Read", map[string]any{"file_path": link + "/passwd"}, ""); !d.Allowed {
		t.Errorf("path through a symlink was resolved: %+v", d)
	}
	if d := e.Decide("Read", map[string]any{"file_path": "/etc/passwd"}, ""); d.Allowed {
		t.Errorf("/etc/passwd allowed: %+v", d)
	}
}

// FuzzP4GlobTokens builds patterns and paths from glob tokens, so that the
// fuzzer reaches the interesting corners (stars next to separators, classes,
// nested braces) that random strings rarely form.
func FuzzP4GlobTokens(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 3}, []byte{0, 1, 0, 1, 2})
	f.Add([]byte{0, 2, 0, 4, 1, 0, 5}, []byte{0, 1, 1, 0, 2, 0, 3})
	f.Add([]byte{0, 9, 1, 10, 2, 11, 0, 2}, []byte{0, 1, 0, 2, 1})
	f.Fuzz(func(t *testing.T, pb, nb []byte) {
		ptoks := []string{"/", "a", "b", "*", "**", "?", "[ab]", "[!a/]", "{", ",", "}", "[a-b]", ".", "\\*", "[/]", "[b-a]", "é", "[!a]"}
		ntoks := []string{"/", "a", "b", ".", "*", "é", "ab", "-"}
		var p, n strings.Builder
		for _, c := range pb {
			p.WriteString(ptoks[int(c)%len(ptoks)])
		}
		for _, c := range nb {
			n.WriteString(ntoks[int(c)%len(ntoks)])
		}
		pattern, name := p.String(), normalized(n.String())
		re, err := globRegexp(pattern)
		if err != nil {
			return
		}
		want, err := doublestar.Match(pattern, name)
		if err != nil {
			t.Fatalf("pattern %q accepted by globRegexp is bad for doublestar: %v", pattern, err)
		}
		if got := regexp.MustCompile(re).MatchString(name); got != want {
			t.Fatalf("pattern %q, path %q: regexp %s says %v, doublestar %v", pattern, name, re, got, want)
		}
	})
}
