package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestP16ProgramDigestIsTheFilesNow: a program a deny entry names is
// known by the digest of its file as it is when the call starts, though
// the digest is kept between calls: a file rewritten in place with the
// same size and its modification time set back gets its new digest (the
// change time moved), and so does one replaced by another file.
func TestP16ProgramDigestIsTheFilesNow(t *testing.T) {
	// A tick is the most a file's times lag; what changed within the
	// settle interval is never kept.
	old := settle
	settle = 0
	t.Cleanup(func() { settle = old })
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	prog := filepath.Join(dir, "denied")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(prog, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := func(body string) {
		t.Helper()
		p, ok := execProgram("denied", lookups())
		sum := sha256.Sum256([]byte(body))
		if !ok || p.SHA256 != hex.EncodeToString(sum[:]) || p.Size != int64(len(body)) {
			t.Fatalf("%+v, %v: not the digest of %q", p, ok, body)
		}
	}
	write("#!/bin/sh\necho one\n")
	want("#!/bin/sh\necho one\n")
	if n := kept(prog); n != 1 {
		t.Fatalf("%d digests kept of the program, want 1", n)
	}
	want("#!/bin/sh\necho one\n")
	st, err := os.Stat(prog)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the change time's clock moves on
	f, err := os.OpenFile(prog, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("#!/bin/sh\necho two\n")
	f.Close()
	if err := os.Chtimes(prog, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	want("#!/bin/sh\necho two\n")
	os.Remove(prog)
	write("#!/bin/sh\necho three\n")
	want("#!/bin/sh\necho three\n")
	if _, ok := execProgram("absent", lookups()); ok {
		t.Error("a program not on PATH was found")
	}
	settle = time.Hour
	write("#!/bin/sh\necho four\n")
	want("#!/bin/sh\necho four\n")
	if n := kept(prog); n != 3 {
		t.Errorf("%d digests kept of the program, want the 3 of files that had settled", n)
	}
	settle = 0
	// Where a name is found is kept while PATH's directories keep their
	// entries: one made later, or one made earlier on PATH, is found.
	if err := os.WriteFile(filepath.Join(dir, "absent"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, ok := execProgram("absent", lookups()); !ok || p.Size != 1 {
		t.Errorf("a program made on PATH since is not found: %+v", p)
	}
	first := t.TempDir()
	t.Setenv("PATH", first+":"+dir)
	if p, ok := execProgram("denied", lookups()); !ok || p.Size != int64(len("#!/bin/sh\necho four\n")) {
		t.Errorf("%+v", p)
	}
	if err := os.WriteFile(filepath.Join(first, "denied"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, ok := execProgram("denied", lookups()); !ok || p.Size != int64(len("#!/bin/sh\n")) {
		t.Errorf("the program made earlier on PATH is not the one found: %+v", p)
	}
}

// kept is how many digests are kept of files at path.
func kept(path string) int {
	n := 0
	digests.Range(func(k, _ any) bool {
		if k.(programKey).path == path {
			n++
		}
		return true
	})
	return n
}
