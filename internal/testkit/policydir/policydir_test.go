package policydir

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteAddsTheModuleUnlessGiven: a written policy has the module file
// the kit gives, or the test's own, and its files where their slash paths
// say; WriteIn writes them in the directory named, made if need be.
func TestWriteAddsTheModuleUnlessGiven(t *testing.T) {
	read := func(dir, name string) string {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := Write(t, map[string]string{"policy.cue": "package policy\n", "sub/x.cue": "x"})
	if read(dir, "cue.mod/module.cue") != Module || read(dir, "policy.cue") != "package policy\n" || read(dir, "sub/x.cue") != "x" {
		t.Error("Write did not write the module and the files")
	}
	own := "module: \"example.com/own@v0\"\n"
	at := filepath.Join(t.TempDir(), "a", "policy")
	if got := WriteIn(t, at, map[string]string{"cue.mod/module.cue": own}); got != at || read(at, "cue.mod/module.cue") != own {
		t.Errorf("WriteIn wrote %s with module %q; want %s with the test's own", got, read(at, "cue.mod/module.cue"), at)
	}
}
