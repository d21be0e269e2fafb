package builtin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/tools"
)

func TestGlob(t *testing.T) {
	env := session(t)
	w := env.Workdir
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"old.go", "sub/mid.go", "sub/deep/new.go", "notes.txt", "tie-b.md", "tie-a.md"} {
		p := write(t, w, name, "x")
		mod := base.Add(time.Duration(i) * time.Hour)
		if strings.HasPrefix(name, "tie") {
			mod = base.Add(100 * time.Hour)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(w, "dir.go"), 0o755)
	os.Symlink(filepath.Join(w, "sub"), filepath.Join(w, "link.go"))
	p := func(name string) string { return filepath.Join(w, name) }

	tests := []struct {
		name  string
		in    string
		isErr bool
		want  string
		frags []string
	}{
		{name: "newest first", in: `{"pattern":"**/*.go"}`, want: p("sub/deep/new.go") + "\n" + p("sub/mid.go") + "\n" + p("old.go")},
		{name: "one level", in: `{"pattern":"*.go"}`, want: p("old.go")},
		{name: "ties by path", in: `{"pattern":"*.md"}`, want: p("tie-a.md") + "\n" + p("tie-b.md")},
		{name: "alternatives", in: `{"pattern":"*.{txt,md}"}`, want: p("tie-a.md") + "\n" + p("tie-b.md") + "\n" + p("notes.txt")},
		{name: "under path", in: `{"pattern":"**/*.go","path":"sub"}`, want: p("sub/deep/new.go") + "\n" + p("sub/mid.go")},
		{name: "absolute path", in: `{"pattern":"*.go","path":` + js(p("sub/deep")) + `}`, want: p("sub/deep/new.go")},
		{name: "dot slash", in: `{"pattern":"./sub/*.go"}`, want: p("sub/mid.go")},
		{name: "no match", in: `{"pattern":"*.rs"}`, frags: []string{`No files found for "*.rs" in ` + w}},

		{name: "absolute pattern", in: `{"pattern":"/etc/*"}`, isErr: true, frags: []string{`"/etc/*" is absolute`, "'path'"}},
		{name: "climbing pattern", in: `{"pattern":"../*"}`, isErr: true, frags: []string{`"../*"`, "'..'"}},
		{name: "climbing inside", in: `{"pattern":"sub/../../x"}`, isErr: true, frags: []string{"'..'"}},
		{name: "invalid pattern", in: `{"pattern":"[a"}`, isErr: true, frags: []string{`"[a" is not a valid glob`}},
		{name: "empty pattern", in: `{"pattern":""}`, isErr: true, frags: []string{"'pattern' must not be empty"}},
		{name: "path is a file", in: `{"pattern":"*","path":"old.go"}`, isErr: true, frags: []string{p("old.go"), "is a file"}},
		{name: "missing path", in: `{"pattern":"*","path":"nope"}`, isErr: true, frags: []string{p("nope"), "does not exist"}},
		{name: "missing pattern", in: `{"path":"sub"}`, isErr: true, frags: []string{"Missing required parameter 'pattern'."}},
		{name: "pattern not a string", in: `{"pattern":true}`, isErr: true, frags: []string{"Parameter 'pattern' must be a string, got boolean true."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "Glob", tt.in)
			wantResult(t, r, tt.isErr, tt.frags...)
			if tt.want != "" && r.Text != tt.want {
				t.Errorf("text =\n%s\nwant\n%s", r.Text, tt.want)
			}
		})
	}
}

func TestGlobCap(t *testing.T) {
	env := session(t)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = MaxGlobResults + 5
	for i := range n {
		p := write(t, env.Workdir, fmt.Sprintf("f%03d.txt", i), "")
		mod := base.Add(time.Duration(i) * time.Minute)
		os.Chtimes(p, mod, mod)
	}
	r := call(t, env, "Glob", `{"pattern":"*.txt"}`)
	wantResult(t, r, false, fmt.Sprintf("[Showing the %d newest of %d files;", MaxGlobResults, n))
	lines := strings.Split(r.Text, "\n")
	if len(lines) != MaxGlobResults+1 {
		t.Fatalf("%d lines, want %d files and a note", len(lines), MaxGlobResults)
	}
	if want := filepath.Join(env.Workdir, fmt.Sprintf("f%03d.txt", n-1)); lines[0] != want {
		t.Errorf("first = %s, want the newest %s", lines[0], want)
	}
	if want := filepath.Join(env.Workdir, "f005.txt"); lines[MaxGlobResults-1] != want {
		t.Errorf("last = %s, want %s", lines[MaxGlobResults-1], want)
	}

	// Exactly at the cap there is no note.
	os.Remove(filepath.Join(env.Workdir, "f000.txt"))
	for i := 1; i < 5; i++ {
		os.Remove(filepath.Join(env.Workdir, fmt.Sprintf("f%03d.txt", i)))
	}
	r = call(t, env, "Glob", `{"pattern":"*.txt"}`)
	if strings.Contains(r.Text, "[") || strings.Count(r.Text, "\n") != MaxGlobResults-1 {
		t.Errorf("at the cap: %d lines, note %v", strings.Count(r.Text, "\n")+1, strings.Contains(r.Text, "["))
	}
}

func TestGlobWithoutWorkdir(t *testing.T) {
	r := Glob{}.Run(context.Background(), &tools.Env{}, input(t, `{"pattern":"*"}`))
	wantResult(t, r, true, "no working directory")
}

func TestGlobCancelled(t *testing.T) {
	env := session(t)
	write(t, env.Workdir, "a/b/c.go", "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Glob{}.Run(ctx, env, input(t, `{"pattern":"**/*.go"}`))
	wantResult(t, r, true, "cancelled")
}
