package builtin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"aimon.dev/gw/tools"
)

// grepTree is a small tree to search.
func grepTree(t *testing.T) *tools.Env {
	t.Helper()
	env := session(t)
	write(t, env.Workdir, "a.go", "package a\nfunc Alpha() {}\n// alpha again\n")
	write(t, env.Workdir, "b.txt", "nothing here\nALPHA loud\n")
	write(t, env.Workdir, "sub/c.go", "package sub\n")
	write(t, env.Workdir, "sub/deep/d.go", "var alpha = 1\n")
	write(t, env.Workdir, "bin.dat", "alpha\x00binary")
	write(t, env.Workdir, ".git/config", "alpha in git\n")
	write(t, env.Workdir, "ctx.txt", "1\n2\nhit one\n4\n5\n6\n7\nhit two\n9\nhit three\n11\n")
	return env
}

func TestGrep(t *testing.T) {
	env := grepTree(t)
	w := env.Workdir
	p := func(name string) string { return filepath.Join(w, name) }
	tests := []struct {
		name  string
		in    string
		isErr bool
		want  string
		frags []string
	}{
		{name: "files by default", in: `{"pattern":"alpha"}`, want: p("a.go") + "\n" + p("sub/deep/d.go")},
		{name: "ignore case", in: `{"pattern":"alpha","-i":true}`, want: p("a.go") + "\n" + p("b.txt") + "\n" + p("sub/deep/d.go")},
		{name: "glob on name", in: `{"pattern":"alpha","-i":true,"glob":"*.txt"}`, want: p("b.txt")},
		{name: "glob with a slash", in: `{"pattern":"package","glob":"sub/**/*.go"}`, want: p("sub/c.go")},
		{name: "glob alternatives", in: `{"pattern":"(?i)alpha","glob":"*.{txt,dat}"}`, want: p("b.txt")},
		{name: "path is a directory", in: `{"pattern":"package","path":"sub"}`, want: p("sub/c.go")},
		{name: "content", in: `{"pattern":"alpha","output_mode":"content"}`,
			want: p("a.go") + ":// alpha again\n" + p("sub/deep/d.go") + ":var alpha = 1"},
		{name: "content with line numbers", in: `{"pattern":"alpha","output_mode":"content","-n":true,"path":"a.go"}`, want: "3:// alpha again"},
		{name: "single file has no prefix", in: `{"pattern":"Alpha","output_mode":"content","path":"a.go"}`, want: "func Alpha() {}"},
		{name: "count", in: `{"pattern":"(?i)alpha","output_mode":"count"}`,
			want: p("a.go") + ":2\n" + p("b.txt") + ":1\n" + p("sub/deep/d.go") + ":1"},
		{name: "count one file", in: `{"pattern":"hit","output_mode":"count","path":"ctx.txt"}`, want: p("ctx.txt") + ":3"},
		{name: "after context", in: `{"pattern":"hit","output_mode":"content","path":"ctx.txt","-A":1,"-n":true}`,
			want: "3:hit one\n4-4\n--\n8:hit two\n9-9\n10:hit three\n11-11"},
		{name: "before context", in: `{"pattern":"hit","output_mode":"content","path":"ctx.txt","-B":2}`,
			want: "1\n2\nhit one\n--\n6\n7\nhit two\n9\nhit three"},
		{name: "context both sides", in: `{"pattern":"two","output_mode":"content","path":"ctx.txt","-C":1,"-n":true}`,
			want: "7-7\n8:hit two\n9-9"},
		{name: "explicit -A beats -C", in: `{"pattern":"two","output_mode":"content","path":"ctx.txt","-C":2,"-A":0}`,
			want: "6\n7\nhit two"},
		{name: "context across files", in: `{"pattern":"package","output_mode":"content","-A":1,"glob":"*.go"}`,
			want: p("a.go") + ":package a\n" + p("a.go") + "-func Alpha() {}\n--\n" + p("sub/c.go") + ":package sub"},
		{name: "context ignored outside content", in: `{"pattern":"hit","path":"ctx.txt","-C":3}`, want: p("ctx.txt")},
		{name: "head limit lines", in: `{"pattern":"hit","output_mode":"content","path":"ctx.txt","head_limit":2}`,
			want: "hit one\nhit two\n[Results cut at head_limit 2; there are more.]"},
		{name: "head limit exact", in: `{"pattern":"hit","output_mode":"content","path":"ctx.txt","head_limit":3}`,
			want: "hit one\nhit two\nhit three"},
		{name: "head limit files", in: `{"pattern":"(?i)alpha","head_limit":1}`, want: p("a.go") + "\n[Results cut at head_limit 1; there are more.]"},
		{name: "no match", in: `{"pattern":"zebra"}`, frags: []string{`No matches found for "zebra" in ` + w}},
		{name: "binary and .git skipped", in: `{"pattern":"binary|in git"}`, frags: []string{"No matches found"}},
		{name: "explicit binary file skipped", in: `{"pattern":"alpha","path":"bin.dat"}`, frags: []string{"No matches found"}},

		{name: "bad regex", in: `{"pattern":"a(b"}`, isErr: true, frags: []string{`'pattern' "a(b" is not a valid RE2 regular expression`, "missing closing )"}},
		{name: "perl lookahead", in: `{"pattern":"a(?=b)"}`, isErr: true, frags: []string{"not a valid RE2"}},
		{name: "bad mode", in: `{"pattern":"a","output_mode":"lines"}`, isErr: true, frags: []string{`'output_mode'`, `got "lines"`}},
		{name: "negative -A", in: `{"pattern":"a","-A":-1}`, isErr: true, frags: []string{"'-A'", "got -1."}},
		{name: "negative -B", in: `{"pattern":"a","-B":-2}`, isErr: true, frags: []string{"'-B'", "got -2."}},
		{name: "negative -C", in: `{"pattern":"a","-C":-3}`, isErr: true, frags: []string{"'-C'", "got -3."}},
		{name: "zero head limit", in: `{"pattern":"a","head_limit":0}`, isErr: true, frags: []string{"'head_limit'", "got 0."}},
		{name: "bad glob", in: `{"pattern":"a","glob":"[x"}`, isErr: true, frags: []string{`'glob' "[x" is not a valid glob`}},
		{name: "empty glob", in: `{"pattern":"a","glob":""}`, isErr: true, frags: []string{"'glob'"}},
		{name: "missing path", in: `{"pattern":"a","path":"nope"}`, isErr: true, frags: []string{p("nope"), "does not exist"}},
		{name: "missing pattern", in: `{"path":"."}`, isErr: true, frags: []string{"Missing required parameter 'pattern'."}},
		{name: "-i not a bool", in: `{"pattern":"a","-i":"yes"}`, isErr: true, frags: []string{`Parameter '-i' must be a boolean, got string "yes".`}},
		{name: "-A not an integer", in: `{"pattern":"a","-A":1.5}`, isErr: true, frags: []string{"Parameter '-A' must be an integer, got number 1.5."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "Grep", tt.in)
			wantResult(t, r, tt.isErr, tt.frags...)
			if tt.want != "" && r.Text != tt.want {
				t.Errorf("text =\n%s\nwant\n%s", r.Text, tt.want)
			}
		})
	}
}

func TestGrepLongLinesAndOutputCap(t *testing.T) {
	env := session(t)
	write(t, env.Workdir, "long", strings.Repeat("q", 5000)+"needle\n")
	r := call(t, env, "Grep", `{"pattern":"needle","output_mode":"content","path":"long"}`)
	wantResult(t, r, false)
	if r.Text != strings.Repeat("q", MaxLineChars)+"..." {
		t.Errorf("long match line rendered as %d bytes, want it cut at %d characters", len(r.Text), MaxLineChars)
	}
	write(t, env.Workdir, "ctxlong", strings.Repeat("é", 3000)+"\nneedle\n"+strings.Repeat("z", 2001)+"\n")
	r = call(t, env, "Grep", `{"pattern":"needle","output_mode":"content","path":"ctxlong","-C":1}`)
	if want := strings.Repeat("é", MaxLineChars) + "...\nneedle\n" + strings.Repeat("z", MaxLineChars) + "..."; r.Text != want {
		t.Errorf("context lines not cut at %d characters: %d bytes", MaxLineChars, len(r.Text))
	}
	var b strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&b, "match line %d\n", i)
	}
	write(t, env.Workdir, "many", b.String())
	r = call(t, env, "Grep", `{"pattern":"match","output_mode":"content","path":"many"}`)
	wantResult(t, r, false, "[Output cut at 30000 bytes")
	if len(r.Text) > MaxOutput+200 {
		t.Errorf("output is %d bytes", len(r.Text))
	}
}

func TestGrepWithoutWorkdir(t *testing.T) {
	r := Grep{}.Run(context.Background(), &tools.Env{}, input(t, `{"pattern":"a"}`))
	wantResult(t, r, true, "no working directory")
	r = Grep{}.Run(context.Background(), nil, input(t, `{"pattern":"a","path":"rel"}`))
	wantResult(t, r, true, `"rel"`, "no working directory")
}

func TestGrepCancelled(t *testing.T) {
	env := grepTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Grep{}.Run(ctx, env, input(t, `{"pattern":"alpha"}`))
	wantResult(t, r, true, "cancelled")
}

// FuzzGrepOptions runs Grep with arbitrary options over a fixed tree: it must
// never panic, and every error must be a sentence.
func FuzzGrepOptions(f *testing.F) {
	f.Add("alpha", "content", "", true, true, 1, 0, 2, 3)
	f.Add("a(b", "count", "*.go", false, false, -1, -1, -1, 0)
	f.Add("", "files_with_matches", "{a,b", false, true, 0, 5, 0, 1)
	f.Add(`\pL+`, "x", "**/*", true, false, 100, 100, 100, 100000)
	env := &tools.Env{Workdir: f.TempDir(), Files: tools.NewFileSet()}
	write(f, env.Workdir, "a.go", "package a\nfunc Alpha() {}\n// alpha again\n")
	write(f, env.Workdir, "sub/b.txt", "1\n2\nhit\n4\n\xff\xfe\n")
	f.Fuzz(func(t *testing.T, pattern, mode, glob string, i, n bool, a, b, c, head int) {
		in := tools.Input{"pattern": pattern, "output_mode": mode, "-i": i, "-n": n,
			"-A": float64(a), "-B": float64(b), "-C": float64(c), "head_limit": float64(head)}
		if glob != "" {
			in["glob"] = glob
		}
		r := Grep{}.Run(context.Background(), env, in)
		if r.IsError && !strings.HasSuffix(r.Text, ".") {
			t.Fatalf("error is not a sentence: %q", r.Text)
		}
		if r.Text == "" && !r.IsError {
			t.Fatalf("empty success")
		}
	})
}

func TestGrepSymlinkedRoot(t *testing.T) {
	env := grepTree(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Join(env.Workdir, "sub"), link); err != nil {
		t.Skip(err)
	}
	r := call(t, env, "Grep", `{"pattern":"alpha","path":`+js(link)+`}`)
	wantResult(t, r, false)
	if want := filepath.Join(link, "deep/d.go"); r.Text != want {
		t.Errorf("text = %q, want %q", r.Text, want)
	}
	r = call(t, env, "Grep", `{"pattern":"alpha","path":`+js(link)+`,"glob":"deep/*.go"}`)
	if want := filepath.Join(link, "deep/d.go"); r.Text != want {
		t.Errorf("with a glob: text = %q, want %q", r.Text, want)
	}
}

// A huge -B is bounded by the output, not taken as a count of lines to keep.
func TestGrepHugeContext(t *testing.T) {
	env := grepTree(t)
	r := call(t, env, "Grep", `{"pattern":"two","output_mode":"content","path":"ctx.txt","-B":1000000000000}`)
	wantResult(t, r, false)
	if want := "1\n2\nhit one\n4\n5\n6\n7\nhit two"; r.Text != want {
		t.Errorf("text = %q, want %q", r.Text, want)
	}
}

// TestGrepFastPathsMatchLineByLine holds Grep with files held whole, a
// literal every match holds skipping lines (with or without regard to
// case, the Kelvin sign and the long s included) and literals found by
// byte search (issue 32) to Grep reading every line and matching it with
// the regular expression, on lines that end oddly, anchors, a line past
// maxGrepLine and a file too large to hold.
func TestGrepFastPathsMatchLineByLine(t *testing.T) {
	// The bounds at a size the race detector walks in seconds: the paths
	// compared are the same at any size.
	line, held := maxGrepLine, maxHeld
	maxGrepLine, maxHeld = 4<<10, 256<<10
	t.Cleanup(func() { maxGrepLine, maxHeld = line, held })
	env := session(t)
	w := env.Workdir
	write(t, w, "crlf.txt", "abc\r\nxabc\r\nneedle\r\nabc")
	write(t, w, "anchors.txt", "abc\nxabcx\n abc\nabc\nabcabc\n")
	write(t, w, "long.txt", strings.Repeat("x", maxGrepLine+10)+"needle\nneedle after a long line\n")
	write(t, w, "empty.txt", "")
	write(t, w, "nonl.txt", "a needle")
	write(t, w, "uni.txt", "Grüße needle 世界\nGRÜSSE\n")
	write(t, w, "latebin.txt", strings.Repeat("y\n", 5000)+"needle\x00\n")
	write(t, w, "fold.txt", "ERRCLOSED here\nErrClosed\n\u212aelvin and \u017fask\nkelvin\nmask MASK\nsss\n")
	write(t, w, "conn.go", "func (c *UDPConn) ReadFrom(b []byte)\nx UDPConn) Read\nConn) Read\n")
	patterns := []string{"needle", "abc", "^abc$", "^abc", "abc$", "x?abc", "need+le", `e\b`, "zzz", `abc\z`, "abcabc|needle", "Grüße",
		// Literals inside (issue 32's prefilter), some without regard to case.
		`\w+Conn\) Read\w*`, `(?i)errclosed`, `(?i)kelvin`, `(?i)ask`, `(?i)s+`, `a(bc)+`, `(?:zz)?needle`, `[a-z]+ needle`,
		`x{2,}needle`, `(?i)grüsse`, `needle\nabc`, `(?i)Conn\) read`, `e(rr|RR)closed`, `(?s).needle`}
	modes := []struct{ note, opts string }{
		{"files", ``},
		{"content with numbers", `,"output_mode":"content","-n":true`},
		{"count", `,"output_mode":"count"`},
		{"content with context", `,"output_mode":"content","-n":true,"-C":1`},
		{"content with lines before", `,"output_mode":"content","-B":2`},
		{"content with lines after", `,"output_mode":"content","-n":true,"-A":1,"head_limit":7}`},
		{"ignoring case", `,"output_mode":"content","-i":true`},
	}
	same := func(env *tools.Env, patterns []string, modes []struct{ note, opts string }) {
		for _, pat := range patterns {
			for _, m := range modes {
				in := `{"pattern":` + js(pat) + strings.TrimSuffix(m.opts, "}") + `}`
				fast := call(t, env, "Grep", in)
				grepFast = false
				slow := call(t, env, "Grep", in)
				grepFast = true
				if fast.Text != slow.Text || fast.IsError != slow.IsError {
					t.Errorf("%s, %s: held whole and skipping:\n%.2000s\nline by line:\n%.2000s", pat, m.note, fast.Text, slow.Text)
				}
			}
		}
	}
	same(env, patterns, modes)
	// A file too large to hold is read line by line either way.
	large := session(t)
	var big strings.Builder
	for i := range maxHeld/40 + 1000 {
		if i%997 == 0 {
			fmt.Fprintf(&big, "%08d a needle and abc in a large file\n", i)
		} else {
			fmt.Fprintf(&big, "%08d an ordinary line of a large file....\n", i)
		}
	}
	write(t, large.Workdir, "big.txt", big.String())
	same(large, []string{"needle", "^0000", "zzz"}, modes[:3])
	if r := call(t, env, "Grep", `{"pattern":"^abc$","output_mode":"count"}`); !strings.Contains(r.Text, "anchors.txt:2") {
		t.Errorf("an anchored literal is not a literal anywhere in the line:\n%s", r.Text)
	}
}

// FuzzGrepPrefilterNeverSkipsAMatch: the prefilter never skips past the
// first line the expression matches, whatever the expression and text.
func FuzzGrepPrefilterNeverSkipsAMatch(f *testing.F) {
	for _, s := range [][2]string{
		{`(?i)errclosed`, "x\nErrClosed\n"}, {`(?i)kelvin`, "\u212aelvin\n"}, {`(?i)ask`, "\u017fask\nASK"},
		{`\w+Conn\) Read`, "a UDPConn) Read"}, {`a(bc)+d`, "abcbcd"}, {`(?:x)?lit`, "lit"}, {`x{0}y`, "y"},
		{`(?i)s`, "\u017f"}, {`needle\nabc`, "needle\nabc"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		prefix, _ := re.LiteralPrefix()
		find := prefilter(expr, []byte(prefix))
		if find == nil {
			return
		}
		buf := []byte(text)
		end := 0
		for line := range bytes.Lines(buf) {
			end += len(line)
			if re.Match(bytes.TrimSuffix(line, []byte("\n"))) {
				if at := find(buf); at < 0 || at >= end {
					t.Fatalf("%q on %q: the line ending at %d matches, the prefilter gave %d", expr, text, end, at)
				}
				return
			}
		}
	})
}
