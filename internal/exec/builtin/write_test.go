package builtin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	env := session(t)
	dir := env.Workdir
	write(t, dir, "blocker", "a file where a directory would be")
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)

	tests := []struct {
		name  string
		in    string
		isErr bool
		frags []string
		file  string // path that must then hold content
		want  string
	}{
		{name: "new file", in: `{"file_path":"new.txt","content":"hello\n"}`,
			frags: []string{"Created", filepath.Join(dir, "new.txt"), "6 bytes"}, file: "new.txt", want: "hello\n"},
		{name: "creates parents", in: `{"file_path":"a/b/c.txt","content":"x"}`, frags: []string{"1 byte)"}, file: "a/b/c.txt", want: "x"},
		{name: "empty content", in: `{"file_path":"e.txt","content":""}`, frags: []string{"0 bytes"}, file: "e.txt", want: ""},
		{name: "directory", in: `{"file_path":"adir","content":"x"}`, isErr: true, frags: []string{filepath.Join(dir, "adir"), "directory"}},
		{name: "parent is a file", in: `{"file_path":"blocker/x.txt","content":"x"}`, isErr: true, frags: []string{"blocker", "not a directory"}},
		{name: "missing content", in: `{"file_path":"m.txt"}`, isErr: true, frags: []string{"Missing required parameter 'content'."}},
		{name: "both missing", in: `{}`, isErr: true, frags: []string{"'file_path'", "'content'"}},
		{name: "content not a string", in: `{"file_path":"m.txt","content":["a"]}`, isErr: true, frags: []string{"Parameter 'content' must be a string, got an array."}},
		{name: "empty path", in: `{"file_path":"","content":"x"}`, isErr: true, frags: []string{"must not be empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "Write", tt.in)
			wantResult(t, r, tt.isErr, tt.frags...)
			if tt.file != "" {
				got, err := os.ReadFile(filepath.Join(dir, tt.file))
				if err != nil || string(got) != tt.want {
					t.Errorf("file holds %q (%v), want %q", got, err, tt.want)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "m.txt")); err == nil {
		t.Error("a refused Write created its file")
	}
}

func TestC6WriteOverUnreadFileRefused(t *testing.T) {
	env := session(t)
	p := write(t, env.Workdir, "old.txt", "precious\n")
	os.Chmod(p, 0o600)

	r := call(t, env, "Write", `{"file_path":"old.txt","content":"clobbered"}`)
	wantResult(t, r, true, p, "has not been read", "Read it first")
	if got, _ := os.ReadFile(p); string(got) != "precious\n" {
		t.Fatalf("refused Write changed the file to %q", got)
	}

	if r := call(t, env, "Read", `{"file_path":"old.txt"}`); r.IsError {
		t.Fatal(r.Text)
	}
	r = call(t, env, "Write", `{"file_path":"old.txt","content":"new"}`)
	wantResult(t, r, false, "Updated", p)
	if got, _ := os.ReadFile(p); string(got) != "new" {
		t.Errorf("file holds %q after Write", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("Write changed the mode to %v", fi.Mode().Perm())
	}
}

// A file the session wrote it knows, so it may edit it without reading it.
func TestC6WriteRecordsTheFile(t *testing.T) {
	env := session(t)
	call(t, env, "Write", `{"file_path":"w.txt","content":"alpha beta"}`)
	if !env.Files.Has(filepath.Join(env.Workdir, "w.txt")) {
		t.Fatal("Write did not record the file")
	}
	r := call(t, env, "Edit", `{"file_path":"w.txt","old_string":"beta","new_string":"gamma"}`)
	wantResult(t, r, false, "Replaced 1 occurrence")
}

func TestC6WriteWithoutFileSet(t *testing.T) {
	env := session(t)
	env.Files = nil
	write(t, env.Workdir, "f", "x")
	r := call(t, env, "Write", `{"file_path":"f","content":"y"}`)
	wantResult(t, r, true, "has not been read")
	r = call(t, env, "Write", `{"file_path":"g","content":"y"}`)
	wantResult(t, r, false, "Created")
}
