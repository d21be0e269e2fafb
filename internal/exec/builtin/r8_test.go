package builtin

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"strings"
	"syscall"
	"time"

	"aimon.dev/gw/tools"
	"os"
	"path/filepath"
	"testing"

	"aimon.dev/gw/internal/exec/sandbox"
)

// TestC6ChangeTimeCounts: a file changed after it was read, with its size
// and modification time put back, is refused by Write and Edit: the inode
// change time cannot be put back.
func TestC6ChangeTimeCounts(t *testing.T) {
	for _, tt := range []struct{ note, tool, in string }{
		{note: "Write", tool: "Write", in: `{"file_path":"f.txt","content":"clobbered"}`},
		{note: "Edit", tool: "Edit", in: `{"file_path":"f.txt","old_string":"mine","new_string":"gone"}`},
	} {
		env := session(t)
		p := write(t, env.Workdir, "f.txt", "mine\n")
		if r := call(t, env, "Read", `{"file_path":"f.txt"}`); r.IsError {
			t.Fatal(r.Text)
		}
		fi, _ := os.Stat(p)
		if err := os.WriteFile(p, []byte("othr\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
		r := call(t, env, tt.tool, tt.in)
		wantResult(t, r, true, "has changed since it was read")
		if got, _ := os.ReadFile(p); string(got) != "othr\n" {
			t.Errorf("%s: the file was overwritten: %q", tt.note, got)
		}
	}
}

// TestR8WriteAndEditRefuseWhatTheGatewayReads: a protected directory and
// a file reached through a link into it are refused with a sentence.
func TestR8WriteAndEditRefuseWhatTheGatewayReads(t *testing.T) {
	env := session(t)
	mod := filepath.Join(env.Workdir, "gwpolicy")
	write(t, mod, "policy.cue", "package policy\n")
	os.Symlink(mod, filepath.Join(env.Workdir, "alias"))
	os.Symlink("gwpolicy/planted.cue", filepath.Join(env.Workdir, "dangling"))
	sandbox.Protect("the policy", mod)
	call(t, env, "Read", `{"file_path":"gwpolicy/policy.cue"}`)
	for _, tt := range []struct{ note, tool, in string }{
		{note: "a new file in it", tool: "Write", in: `{"file_path":"gwpolicy/open.cue","content":"agent: {}"}`},
		{note: "a file it holds", tool: "Edit", in: `{"file_path":"gwpolicy/policy.cue","old_string":"package","new_string":"pkg"}`},
		{note: "through a link", tool: "Write", in: `{"file_path":"alias/open.cue","content":"agent: {}"}`},
		{note: "a new directory in it", tool: "Write", in: `{"file_path":"gwpolicy/a/b.cue","content":""}`},
		{note: "through a dangling link", tool: "Write", in: `{"file_path":"dangling","content":"agent: {}"}`},
	} {
		r := call(t, env, tt.tool, tt.in)
		wantResult(t, r, true, "which the gateway reads or runs", mod)
	}
	for _, f := range []string{"open.cue", "planted.cue"} {
		if _, err := os.Stat(filepath.Join(mod, f)); err == nil {
			t.Errorf("%s was written into the protected directory", f)
		}
	}
	r := call(t, env, "Write", `{"file_path":"elsewhere.txt","content":"x"}`)
	wantResult(t, r, false, "Created")
}

// tree1000 is 10 directories of 10 directories of 10 files, x in each.
func tree1000(t *testing.T) *tools.Env {
	t.Helper()
	env := session(t)
	for i := range 10 {
		for j := range 10 {
			for k := range 9 {
				write(t, env.Workdir, fmt.Sprintf("d%d/e%d/f%d", i, j, k), "needle\n")
			}
			write(t, env.Workdir, fmt.Sprintf("d%d/e%d/x", i, j), "needle\n")
		}
	}
	return env
}

// TestR8SearchesAreBounded: the pattern that ran for hours on main
// answers; a walk past its step budget or its deadline stops with a
// sentence.
func TestR8SearchesAreBounded(t *testing.T) {
	env := tree1000(t)
	r := call(t, env, "Glob", `{"pattern":"**/**/**/**/**/**/**/x"}`)
	wantResult(t, r, false, "d9/e9/x", "d0/e0/x")
	tests := []struct {
		note, tool, in string
		steps          int
		deadline       time.Duration
		want           string
	}{
		{note: "Glob past its steps", tool: "Glob", in: `{"pattern":"**/*/**/*/**/*/**/x"}`, steps: 50, deadline: time.Hour, want: "Glob stopped after opening 50 files and directories"},
		{note: "Glob past its deadline", tool: "Glob", in: `{"pattern":"**/x"}`, steps: 1 << 30, deadline: time.Nanosecond, want: "Glob stopped at its deadline"},
		{note: "Grep past its steps", tool: "Grep", in: `{"pattern":"needle"}`, steps: 50, deadline: time.Hour, want: "Grep stopped after opening 50 files and directories"},
		{note: "Grep past its deadline", tool: "Grep", in: `{"pattern":"needle"}`, steps: 1 << 30, deadline: time.Nanosecond, want: "Grep stopped at its deadline"},
		{note: "Grep within both", tool: "Grep", in: `{"pattern":"needle","output_mode":"count","head_limit":1}`, steps: 1 << 30, deadline: time.Hour, want: ":1"},
	}
	defer func(s int, d time.Duration) { maxSearchSteps, searchDeadline = s, d }(maxSearchSteps, searchDeadline)
	for _, tt := range tests {
		maxSearchSteps, searchDeadline = tt.steps, tt.deadline
		r := call(t, env, tt.tool, tt.in)
		if !strings.Contains(r.Text, tt.want) {
			t.Errorf("%s: %s", tt.note, r.Text)
		}
	}
}

// TestR8AnchorIsNotWhereALinkLeads: the agent turned docs/ into a link out
// of the tree; a surface anchored at docs/ is refused with a sentence by
// every file tool, and a link above the working directory is followed.
func TestR8AnchorIsNotWhereALinkLeads(t *testing.T) {
	env := session(t)
	out := t.TempDir()
	write(t, out, "secret.txt", "secret\n")
	os.Symlink(out, filepath.Join(env.Workdir, "docs"))
	env.Scope = &tools.Scope{Anchor: filepath.Join(env.Workdir, "docs")}
	env.Files.Add(filepath.Join(env.Workdir, "docs/secret.txt"))
	for _, tt := range []struct{ tool, in string }{
		{"Read", `{"file_path":"docs/secret.txt"}`},
		{"Write", `{"file_path":"docs/planted.txt","content":"x"}`},
		{"Edit", `{"file_path":"docs/secret.txt","old_string":"secret","new_string":"x"}`},
		{"Grep", `{"pattern":"secret","path":"docs"}`},
		{"Glob", `{"pattern":"**","path":"docs"}`},
	} {
		r := call(t, env, tt.tool, tt.in)
		wantResult(t, r, true, "leads through the symbolic link "+filepath.Join(env.Workdir, "docs"), out)
	}
	if _, err := os.Stat(filepath.Join(out, "planted.txt")); err == nil {
		t.Error("Write followed the link")
	}
	// The working directory itself reached through a link: the operator's.
	link := filepath.Join(t.TempDir(), "proj")
	os.Symlink(env.Workdir, link)
	write(t, env.Workdir, "sub/f.txt", "x\n")
	env2 := &tools.Env{Workdir: link, Files: tools.NewFileSet(), Scope: &tools.Scope{Anchor: filepath.Join(link, "sub")}}
	wantResult(t, call(t, env2, "Read", `{"file_path":"sub/f.txt"}`), false, "x")
}

// TestR6BeneathOpensAsTheRootDoes holds the one-call open below the
// anchor (openat2 with RESOLVE_BENEATH, issue 32) to os.Root's walk: the
// same file, or the same refusal, for links that stay inside and links
// that leave, absolute or relative, dangling links, a FIFO and a
// directory.
func TestR6BeneathOpensAsTheRootDoes(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	write(t, dir, "a.txt", "a\n")
	write(t, dir, "sub/deep/b.txt", "b\n")
	write(t, out, "secret.txt", "secret\n")
	for link, to := range map[string]string{
		"rel-in":       "sub/deep/b.txt",
		"sub/up-in":    "../a.txt",
		"abs-in":       filepath.Join(dir, "a.txt"),
		"abs-dir-in":   filepath.Join(dir, "sub"),
		"rel-out":      "../" + filepath.Base(out) + "/secret.txt",
		"abs-out":      filepath.Join(out, "secret.txt"),
		"abs-dir-out":  out,
		"dangling":     "nowhere.txt",
		"sub/deep/esc": "../../../" + filepath.Base(out),
	} {
		if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ note, path string }{
		{"a file", "a.txt"},
		{"a file three down", "sub/deep/b.txt"},
		{"a relative link inside", "rel-in"},
		{"a link up that stays inside", "sub/up-in"},
		{"an absolute link inside", "abs-in"},
		{"through an absolute link to a directory inside", "abs-dir-in/deep/b.txt"},
		{"a relative link out", "rel-out"},
		{"an absolute link out", "abs-out"},
		{"through an absolute link out", "abs-dir-out/secret.txt"},
		{"through a relative link out", "sub/deep/esc/secret.txt"},
		{"a dangling link", "dangling"},
		{"a missing file", "missing.txt"},
		{"a FIFO", "fifo"},
		{"a directory", "sub"},
		{"the anchor", "."},
	} {
		t.Run(tc.note, func(t *testing.T) {
			open := func(way string) (*os.File, error) {
				env := &tools.Env{Scope: &tools.Scope{Anchor: dir}}
				a, err := openAnchor(env)
				if way == "read" {
					a, err = openReadAnchor(env)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(a.Close)
				if way != "root" && runtime.GOOS == "linux" && a.dirfd <= 0 {
					t.Errorf("the anchor %s, with no link on its way, was not opened plain", dir)
				}
				if way == "root" {
					a.closeDir()
				}
				return a.open(filepath.Join(dir, tc.path), os.O_RDONLY, 0)
			}
			want, werr := open("root")
			if werr == nil {
				t.Cleanup(func() { want.Close() })
			}
			for _, way := range []string{"beneath", "read"} {
				got, gerr := open(way)
				if escapes := strings.Contains(tc.path, "out") || strings.Contains(tc.path, "esc"); escapes != errors.Is(gerr, errEscapes) {
					t.Errorf("%s: %v; want it to escape: %v", way, gerr, escapes)
				}
				sameOpen(t, got, gerr, want, werr)
			}
		})
	}
}

// sameOpen reports two opens that did not open the same file or fail alike.
func sameOpen(t *testing.T, got *os.File, gerr error, want *os.File, werr error) {
	t.Helper()
	switch {
	case (gerr == nil) != (werr == nil):
		t.Fatalf("beneath: %v; the root: %v", gerr, werr)
	case gerr != nil:
		for _, target := range []error{errEscapes, fs.ErrNotExist, fs.ErrPermission} {
			if errors.Is(gerr, target) != errors.Is(werr, target) {
				t.Errorf("beneath: %v; the root: %v", gerr, werr)
			}
		}
	default:
		gi, _ := got.Stat()
		got.Close()
		wi, _ := want.Stat()
		if !os.SameFile(gi, wi) {
			t.Errorf("beneath opened %s, the root %s", gi.Name(), wi.Name())
		}
	}
}

// TestR8ARootOpenedLateIsTheAnchor: an anchor opened plain for Read opens
// its os.Root only when an open must take the root's way; a directory put
// in the anchor's place since, through a link, is refused, not opened.
func TestR8ARootOpenedLateIsTheAnchor(t *testing.T) {
	base, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(base, "docs")
	write(t, dir, "a.txt", "a\n")
	write(t, out, "a.txt", "elsewhere\n")
	if err := os.Symlink(filepath.Join(dir, "a.txt"), filepath.Join(dir, "abs-in")); err != nil {
		t.Fatal(err)
	}
	a, err := openReadAnchor(&tools.Env{Scope: &tools.Scope{Anchor: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if runtime.GOOS == "linux" && (a.dirfd <= 0 || a.root != nil) {
		t.Fatalf("the anchor was not opened plain, without a root (dirfd %d)", a.dirfd)
	}
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, dir); err != nil {
		t.Fatal(err)
	}
	f, err := a.open(filepath.Join(dir, "abs-in"), os.O_RDONLY, 0)
	var al *anchorLink
	if err == nil {
		f.Close()
	}
	if !errors.As(err, &al) {
		t.Errorf("an open through the anchor swapped for a link gave %v; want it refused as a link", err)
	}
}

// TestP14SearchThroughALinkVisitsOnlyWhatTheListsAllow: a Glob or Grep
// whose root a link takes to a place the scope withholds (the decision
// caught it, unless the link was swapped in after) visits its files where
// they really are, and skips them; the same files by their own root too.
func TestP14SearchThroughALinkVisitsOnlyWhatTheListsAllow(t *testing.T) {
	env := session(t)
	secret := filepath.Join(env.Workdir, "secret")
	write(t, secret, "k", "s3cr3t-content\n")
	write(t, env.Workdir, "open/o", "s3cr3t-free\n")
	os.Symlink("secret", filepath.Join(env.Workdir, "sl"))
	os.Symlink("open", filepath.Join(env.Workdir, "ol"))
	env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(p string) bool { return !strings.HasPrefix(p, secret+"/") }}
	for _, tt := range []struct {
		note, tool, in string
		says           string
	}{
		{"a glob through a link to a withheld directory", "Glob", `{"pattern":"**","path":"sl"}`, "1 file below the search path was not searched: this surface may not read it."},
		{"a grep through a link to a withheld directory", "Grep", `{"pattern":"s3cr3t","path":"sl","output_mode":"content"}`, "1 file below the search path was not searched: this surface may not read it."},
		{"a glob through a link to an allowed directory", "Glob", `{"pattern":"**","path":"ol"}`, filepath.Join(env.Workdir, "ol/o")},
		{"a grep through a link to an allowed directory", "Grep", `{"pattern":"s3cr3t","path":"ol","output_mode":"content"}`, "s3cr3t-free"},
	} {
		t.Run(tt.note, func(t *testing.T) {
			r := call(t, env, tt.tool, tt.in)
			wantResult(t, r, false, tt.says)
			if strings.Contains(r.Text, "s3cr3t-content") || strings.Contains(r.Text, "sl/k") {
				t.Errorf("the search showed a withheld file: %s", r.Text)
			}
		})
	}
}
