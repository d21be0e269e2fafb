package builtin

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"aimon.dev/gw/tools"
)

func TestRead(t *testing.T) {
	env := session(t)
	dir := env.Workdir
	five := write(t, dir, "five.txt", "one\ntwo\nthree\nfour\nfive\n")
	write(t, dir, "noeol.txt", "a\nb")
	write(t, dir, "crlf.txt", "a\r\nb\r\n")
	write(t, dir, "empty.txt", "")
	write(t, dir, "long.txt", strings.Repeat("x", 2001)+"\n"+strings.Repeat("é", 2000)+"\n")
	write(t, dir, "bin.dat", "ab\x00cd")
	write(t, dir, "latebin.dat", strings.Repeat("a", 7990)+"\x00x")
	write(t, dir, "oneline.txt", strings.Repeat("y", 1500))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)

	tests := []struct {
		name  string
		in    string
		isErr bool
		want  string // exact text when not ""
		frags []string
	}{
		{name: "whole file", in: `{"file_path":"five.txt"}`,
			want: "     1→one\n     2→two\n     3→three\n     4→four\n     5→five\n"},
		{name: "absolute path", in: `{"file_path":` + js(five) + `,"limit":1}`, want: "     1→one\n"},
		{name: "offset and limit", in: `{"file_path":"five.txt","offset":2,"limit":2}`, want: "     2→two\n     3→three\n"},
		{name: "offset last line", in: `{"file_path":"five.txt","offset":5}`, want: "     5→five\n"},
		{name: "limit past end", in: `{"file_path":"five.txt","offset":4,"limit":100}`, want: "     4→four\n     5→five\n"},
		{name: "integral float offset", in: `{"file_path":"five.txt","offset":3.0,"limit":1}`, want: "     3→three\n"},
		{name: "offset past end", in: `{"file_path":"five.txt","offset":6}`, frags: []string{"offset 6 is past the end", "5 lines"}},
		{name: "no final newline", in: `{"file_path":"noeol.txt"}`, want: "     1→a\n     2→b\n"},
		{name: "crlf", in: `{"file_path":"crlf.txt"}`, want: "     1→a\n     2→b\n"},
		{name: "empty", in: `{"file_path":"empty.txt"}`, want: EmptyFile},
		{name: "empty with offset", in: `{"file_path":"empty.txt","offset":3}`, want: EmptyFile},
		{name: "long lines", in: `{"file_path":"long.txt"}`,
			want: "     1→" + strings.Repeat("x", 2000) + "...\n     2→" + strings.Repeat("é", 2000) + "\n"},
		{name: "directory", in: `{"file_path":"sub"}`, isErr: true, frags: []string{filepath.Join(dir, "sub"), "directory", "Glob"}},
		{name: "missing", in: `{"file_path":"nope.txt"}`, isErr: true, frags: []string{filepath.Join(dir, "nope.txt"), "does not exist"}},
		{name: "binary", in: `{"file_path":"bin.dat"}`, isErr: true, frags: []string{"binary"}},
		{name: "NUL at the end of a small file's sniff", in: `{"file_path":"latebin.dat"}`, isErr: true, frags: []string{"binary"}},
		{name: "one line filling a buffer sized to the file", in: `{"file_path":"oneline.txt"}`, want: "     1→" + strings.Repeat("y", 1500) + "\n"},
		{name: "offset zero", in: `{"file_path":"five.txt","offset":0}`, isErr: true, frags: []string{"'offset'", "got 0."}},
		{name: "negative limit", in: `{"file_path":"five.txt","limit":-3}`, isErr: true, frags: []string{"'limit'", "got -3."}},
		{name: "limit zero", in: `{"file_path":"five.txt","limit":0}`, isErr: true, frags: []string{"'limit'", "got 0."}},
		{name: "fractional offset", in: `{"file_path":"five.txt","offset":1.5}`, isErr: true, frags: []string{"Parameter 'offset' must be an integer, got number 1.5.", tools.NotExecuted}},
		{name: "missing path", in: `{}`, isErr: true, frags: []string{"Missing required parameter 'file_path'."}},
		{name: "null path", in: `{"file_path":null}`, isErr: true, frags: []string{"Missing required parameter 'file_path'."}},
		{name: "wrong type", in: `{"file_path":7}`, isErr: true, frags: []string{"Parameter 'file_path' must be a string, got number 7."}},
		{name: "empty path", in: `{"file_path":""}`, isErr: true, frags: []string{"'file_path' must not be empty"}},
		{name: "nul in path", in: `{"file_path":"a\u0000b"}`, isErr: true, frags: []string{"NUL"}},
		{name: "string offset coerced", in: `{"file_path":"five.txt","offset":"2","limit":"1"}`, want: "     2→two\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "Read", tt.in)
			wantResult(t, r, tt.isErr, tt.frags...)
			if tt.want != "" && r.Text != tt.want {
				t.Errorf("text =\n%q\nwant\n%q", r.Text, tt.want)
			}
		})
	}
}

func TestC6ReadRecordsTheFile(t *testing.T) {
	env := session(t)
	p := write(t, env.Workdir, "a/b.txt", "x\n")
	if r := call(t, env, "Read", `{"file_path":"a/../a/./b.txt"}`); r.IsError {
		t.Fatal(r.Text)
	}
	if !env.Files.Has(p) {
		t.Errorf("Read did not record %s as read", p)
	}
	empty := write(t, env.Workdir, "empty", "")
	call(t, env, "Read", `{"file_path":"empty"}`)
	if !env.Files.Has(empty) {
		t.Errorf("Read did not record the empty file %s", empty)
	}
	call(t, env, "Read", `{"file_path":"missing"}`)
	if env.Files.Has(filepath.Join(env.Workdir, "missing")) {
		t.Error("Read recorded a file it could not read")
	}
}

func TestReadRelativePathWithoutWorkdir(t *testing.T) {
	for _, env := range []*tools.Env{nil, {Files: tools.NewFileSet()}} {
		r := Read{}.Run(context.Background(), env, input(t, `{"file_path":"x.txt"}`))
		wantResult(t, r, true, `"x.txt"`, "no working directory")
	}
}

func TestReadCancelled(t *testing.T) {
	env := session(t)
	write(t, env.Workdir, "f", "a\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Read{}.Run(ctx, env, input(t, `{"file_path":"f"}`))
	wantResult(t, r, true, "cancelled")
	if env.Files.Has(filepath.Join(env.Workdir, "f")) {
		t.Error("a cancelled Read recorded the file")
	}
}

// A line far longer than anything kept is cut, and the next line still read.
func TestReadHugeLine(t *testing.T) {
	env := session(t)
	write(t, env.Workdir, "huge", strings.Repeat("y", 1<<20)+"\nnext\n")
	r := call(t, env, "Read", `{"file_path":"huge"}`)
	want := "     1→" + strings.Repeat("y", 2000) + "...\n     2→next\n"
	if r.Text != want {
		t.Errorf("got %d bytes starting %.40q, want the cut line then next", len(r.Text), r.Text)
	}
}

func FuzzRenderLines(f *testing.F) {
	f.Add("a\nb\nc\n", 1, 2)
	f.Add("", 1, 1)
	f.Add("\r\n\r\n", 2, 5)
	f.Add(strings.Repeat("z", 2500), 1, 1)
	f.Add("\xff\xfe\n\x80", 1, 10)
	f.Fuzz(func(t *testing.T, content string, offset, limit int) {
		if offset < 1 || limit < 1 || offset > 1<<20 || limit > 1<<20 {
			t.Skip()
		}
		text, n, err := renderLines(context.Background(), bufio.NewReader(strings.NewReader(content)), offset, limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		if whole, m, err := renderBytes(context.Background(), []byte(content), offset, limit); whole != text || m != n || err != nil {
			t.Fatalf("read whole: %d lines %q (%v); as a stream: %d lines %q", m, whole, err, n, text)
		}
		if content == "" && n != 0 {
			t.Fatalf("empty content has %d lines", n)
		}
		if text == "" {
			return
		}
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		if len(lines) > limit {
			t.Fatalf("%d lines, limit %d", len(lines), limit)
		}
		for i, l := range lines {
			prefix := fmt.Sprintf("%6d→", offset+i)
			if !strings.HasPrefix(l, prefix) {
				t.Fatalf("line %d = %q, want prefix %q", i, l, prefix)
			}
			if c := utf8.RuneCountInString(strings.TrimPrefix(l, prefix)); c > MaxLineChars+3 {
				t.Fatalf("line %d has %d characters", i, c)
			}
		}
	})
}

// A FIFO would block an open and a device may never end: the file tools
// refuse what is not a regular file, and Grep's walk passes it by.
func TestNonRegularFilesRefused(t *testing.T) {
	env := session(t)
	fifo := filepath.Join(env.Workdir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFO:", err)
	}
	env.Files.Add(fifo)
	for _, tc := range []struct{ tool, in string }{
		{"Read", `{"file_path":"fifo"}`},
		{"Read", `{"file_path":"/dev/zero"}`},
		{"Write", `{"file_path":"fifo","content":"x"}`},
		{"Edit", `{"file_path":"fifo","old_string":"a","new_string":"b"}`},
		{"Grep", `{"pattern":"x","path":"fifo"}`},
	} {
		r := call(t, env, tc.tool, tc.in)
		wantResult(t, r, true, "not a regular file")
	}
	write(t, env.Workdir, "plain", "x\n")
	wantResult(t, call(t, env, "Grep", `{"pattern":"x"}`), false, filepath.Join(env.Workdir, "plain"))
}

// TestReadBufSize: Read's buffer is sized to the file, with the full buffer
// for a file that states no size (issue 32).
func TestReadBufSize(t *testing.T) {
	tests := []struct {
		note string
		size int64
		want int
	}{
		{note: "size 0 is what kernel interfaces state: full buffer", size: 0, want: maxReadBuf},
		{note: "bad input: a negative size gets the full buffer", size: -1, want: maxReadBuf},
		{note: "tiny file gets the floor", size: 10, want: 512},
		{note: "small file gets its size and one byte for the end", size: 4096, want: 4097},
		{note: "just past the sniff length", size: sniffLen, want: sniffLen + 1},
		{note: "large file is bounded", size: 1 << 30, want: maxReadBuf},
	}
	for _, tt := range tests {
		if got := readBufSize(tt.size); got != tt.want {
			t.Errorf("%s: readBufSize(%d) = %d, want %d", tt.note, tt.size, got, tt.want)
		}
	}
}

// TestR6ReadWholeOnlyWithoutLinks: Read's one-call open of a small file
// (readWhole) takes only a regular file of 1 to maxReadBuf-1 bytes inside
// the anchor and reached through no link, the file the root's way opens;
// for everything else it declines, and Read takes the way that says what
// is wrong (issue 32).
func TestR6ReadWholeOnlyWithoutLinks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("readWhole needs openat2")
	}
	base, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(base, "anchor")
	write(t, dir, "a.txt", "a\n")
	write(t, dir, "sub/deep/b.txt", "b\r\nc")
	write(t, dir, "empty.txt", "")
	write(t, dir, "big.txt", strings.Repeat("x", maxReadBuf))
	write(t, dir, "under.txt", strings.Repeat("x", maxReadBuf-1))
	write(t, out, "secret.txt", "secret\n")
	links := map[string]string{
		"rel-in":      "sub/deep/b.txt",
		"abs-in":      filepath.Join(dir, "a.txt"),
		"abs-dir-in":  filepath.Join(dir, "sub"),
		"abs-out":     filepath.Join(out, "secret.txt"),
		"abs-dir-out": out,
	}
	for link, to := range links {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(dir, filepath.Join(base, "via")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		note, anchor, path string
		whole              bool
	}{
		{note: "a file", path: filepath.Join(dir, "a.txt"), whole: true},
		{note: "a file three down", path: filepath.Join(dir, "sub/deep/b.txt"), whole: true},
		{note: "one byte under the bound", path: filepath.Join(dir, "under.txt"), whole: true},
		{note: "under the anchor /", anchor: "/", path: filepath.Join(dir, "a.txt"), whole: true},
		{note: "the bound itself", path: filepath.Join(dir, "big.txt")},
		{note: "an empty file: it may be a kernel interface", path: filepath.Join(dir, "empty.txt")},
		{note: "a relative link inside", path: filepath.Join(dir, "rel-in")},
		{note: "an absolute link inside", path: filepath.Join(dir, "abs-in")},
		{note: "through a link to a directory inside", path: filepath.Join(dir, "abs-dir-in/deep/b.txt")},
		{note: "a link out", path: filepath.Join(dir, "abs-out")},
		{note: "through a link out", path: filepath.Join(dir, "abs-dir-out/secret.txt")},
		{note: "an anchor reached through a link", anchor: filepath.Join(base, "via"), path: filepath.Join(base, "via/a.txt")},
		{note: "outside the anchor", path: filepath.Join(out, "secret.txt")},
		{note: "bad input: a relative path", anchor: "/", path: "a.txt"},
		{note: "bad input: the anchor itself", path: dir},
		{note: "a missing file", path: filepath.Join(dir, "missing.txt")},
		{note: "a FIFO", path: filepath.Join(dir, "fifo")},
		{note: "a directory", path: filepath.Join(dir, "sub")},
		{note: "a device", anchor: "/", path: "/dev/zero"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			anchor := cmp.Or(tc.anchor, dir)
			data, st, ok := readWhole(anchor, tc.path)
			if ok != tc.whole {
				t.Fatalf("readWhole(%s, %s): ok %v, want %v", anchor, tc.path, ok, tc.whole)
			}
			if !ok {
				return
			}
			want, err := os.ReadFile(tc.path)
			fi, _ := os.Stat(tc.path)
			if err != nil || string(data) != string(want) || st != stateOf(fi) {
				t.Errorf("readWhole read %q in state %+v; the file holds %q in state %+v", data, st, want, stateOf(fi))
			}
		})
	}
}

// TestReadWholeAnswersAsTheStream: Read of a small file read whole answers
// exactly as Read of the same file through a link, which reads it as a
// stream (issue 32).
func TestReadWholeAnswersAsTheStream(t *testing.T) {
	for _, tc := range []struct{ note, content, in string }{
		{note: "lines", content: "one\ntwo\nthree\n", in: `{}`},
		{note: "no end of line", content: "a\nb", in: `{}`},
		{note: "CRLF and a lone CR", content: "a\r\nb\r\n\r", in: `{}`},
		{note: "empty lines", content: "\n\n\n", in: `{}`},
		{note: "offset and limit", content: "1\n2\n3\n4\n", in: `{"offset":2,"limit":2}`},
		{note: "bad input: offset past the end", content: "1\n2\n", in: `{"offset":9}`},
		{note: "long lines cut", content: strings.Repeat("é", 2001) + "\n" + strings.Repeat("x", 9000) + "\r\n", in: `{}`},
		{note: "a CR at the kept bound", content: strings.Repeat("x", keepLine-1) + "\r" + strings.Repeat("y", 10) + "\n", in: `{}`},
		{note: "bad input: NUL bytes", content: "text\x00more", in: `{}`},
		{note: "a NUL past the sniff", content: strings.Repeat("a", sniffLen) + "\x00", in: `{}`},
		{note: "invalid UTF-8", content: "\xff\xfe\n\x80", in: `{}`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			env := session(t)
			env.Scope = &tools.Scope{Anchor: env.Workdir}
			p := write(t, env.Workdir, "f.txt", tc.content)
			if err := os.Symlink("f.txt", filepath.Join(env.Workdir, "link")); err != nil {
				t.Fatal(err)
			}
			if _, _, ok := readWhole(env.Workdir, p); !ok && runtime.GOOS == "linux" {
				t.Fatalf("%s is not read whole", p)
			}
			in := func(name string) string { return `{"file_path":"` + name + `",` + strings.TrimPrefix(tc.in, "{") }
			whole, stream := call(t, env, "Read", strings.Replace(in("f.txt"), ",}", "}", 1)), call(t, env, "Read", strings.Replace(in("link"), ",}", "}", 1))
			if stream.Text = strings.ReplaceAll(stream.Text, filepath.Join(env.Workdir, "link"), p); whole != stream {
				t.Errorf("read whole: %+v\nas a stream: %+v", whole, stream)
			}
		})
	}
}
