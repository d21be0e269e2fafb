package builtin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEdit(t *testing.T) {
	tests := []struct {
		name    string
		content string
		in      string // file_path is added
		isErr   bool
		frags   []string
		want    string // the file afterwards
	}{
		{name: "single", content: "a b c", in: `"old_string":"b","new_string":"B"`, frags: []string{"Replaced 1 occurrence in"}, want: "a B c"},
		{name: "multiline", content: "x\ny\nz\n", in: `"old_string":"y\nz","new_string":"Y"`, want: "x\nY\n"},
		{name: "delete", content: "keep drop", in: `"old_string":" drop","new_string":""`, want: "keep"},
		{name: "replace all", content: "a-a-a", in: `"old_string":"a","new_string":"b","replace_all":true`, frags: []string{"3 occurrences"}, want: "b-b-b"},
		{name: "replace all once", content: "a-b", in: `"old_string":"a","new_string":"c","replace_all":true`, want: "c-b"},
		{name: "ambiguous", content: "a-a", in: `"old_string":"a","new_string":"b"`, isErr: true, frags: []string{`"a"`, "occurs 2 times", "replace_all"}, want: "a-a"},
		{name: "replace_all false", content: "a-a", in: `"old_string":"a","new_string":"b","replace_all":false`, isErr: true, frags: []string{"occurs 2 times"}, want: "a-a"},
		{name: "not found", content: "abc", in: `"old_string":"zz","new_string":"y"`, isErr: true, frags: []string{`"zz"`, "was not found"}, want: "abc"},
		{name: "same strings", content: "abc", in: `"old_string":"b","new_string":"b"`, isErr: true, frags: []string{"are the same", `"b"`}, want: "abc"},
		{name: "empty old", content: "abc", in: `"old_string":"","new_string":"x"`, isErr: true, frags: []string{"'old_string' must not be empty"}, want: "abc"},
		{name: "missing new", content: "abc", in: `"old_string":"a"`, isErr: true, frags: []string{"Missing required parameter 'new_string'."}, want: "abc"},
		{name: "replace_all not bool", content: "abc", in: `"old_string":"a","new_string":"b","replace_all":"yes"`, isErr: true, frags: []string{`Parameter 'replace_all' must be a boolean, got string "yes".`}, want: "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := session(t)
			p := write(t, env.Workdir, "f.txt", tt.content)
			if r := call(t, env, "Read", `{"file_path":"f.txt"}`); r.IsError && tt.content != "" {
				t.Fatal(r.Text)
			}
			r := call(t, env, "Edit", `{"file_path":"f.txt",`+tt.in+`}`)
			wantResult(t, r, tt.isErr, tt.frags...)
			if got, _ := os.ReadFile(p); string(got) != tt.want {
				t.Errorf("file holds %q, want %q", got, tt.want)
			}
		})
	}
}

func TestC6EditUnreadRefused(t *testing.T) {
	env := session(t)
	p := write(t, env.Workdir, "f.txt", "alpha\n")
	r := call(t, env, "Edit", `{"file_path":"f.txt","old_string":"alpha","new_string":"beta"}`)
	wantResult(t, r, true, p, "has not been read", "Read it first")
	if got, _ := os.ReadFile(p); string(got) != "alpha\n" {
		t.Fatalf("refused Edit changed the file to %q", got)
	}
	// Another file's read does not count.
	write(t, env.Workdir, "other.txt", "x")
	call(t, env, "Read", `{"file_path":"other.txt"}`)
	wantResult(t, call(t, env, "Edit", `{"file_path":"f.txt","old_string":"alpha","new_string":"beta"}`), true, "has not been read")
}

func TestC6ReadThenEdit(t *testing.T) {
	env := session(t)
	p := write(t, env.Workdir, "f.txt", "alpha\n")
	os.Chmod(p, 0o640)
	// Read by a relative path, edit by the absolute one: the same file.
	if r := call(t, env, "Read", `{"file_path":"./f.txt"}`); r.IsError {
		t.Fatal(r.Text)
	}
	r := call(t, env, "Edit", `{"file_path":`+js(p)+`,"old_string":"alpha","new_string":"beta"}`)
	wantResult(t, r, false, "Replaced 1 occurrence in "+p)
	if got, _ := os.ReadFile(p); string(got) != "beta\n" {
		t.Errorf("file holds %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("Edit changed the mode to %v", fi.Mode().Perm())
	}
}

func TestEditMissingAndDirectory(t *testing.T) {
	env := session(t)
	os.Mkdir(filepath.Join(env.Workdir, "d"), 0o755)
	wantResult(t, call(t, env, "Edit", `{"file_path":"nope","old_string":"a","new_string":"b"}`), true, "does not exist", filepath.Join(env.Workdir, "nope"))
	wantResult(t, call(t, env, "Edit", `{"file_path":"d","old_string":"a","new_string":"b"}`), true, "directory")
	// A file read and then deleted is reported missing, not unread.
	p := write(t, env.Workdir, "gone", "a")
	call(t, env, "Read", `{"file_path":"gone"}`)
	os.Remove(p)
	wantResult(t, call(t, env, "Edit", `{"file_path":"gone","old_string":"a","new_string":"b"}`), true, "does not exist")
}
