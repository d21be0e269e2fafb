// Package importcase runs the cases of an importer's tests (aimon-gw
// import codex, import gemini-cli): each directory of testdata imported
// and compared with its golden file, and files the runtime would refuse
// to load refused with a sentence naming where.
package importcase

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/front/importkit"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/testkit/policydir"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Import is an importer: the files an argument names, and the import.
type Import struct {
	Files  func(arg string) ([]string, error)
	Import func(files []string, project string) (*importkit.Imported, error)
}

// Project is the project the cases are imported for.
const Project = "/srv/project"

// Each runs f on each case of testdata (a directory of a runtime's
// files), imported for Project, with the policy loaded (it must load).
func (im Import) Each(t *testing.T, f func(t *testing.T, name string, files []string, got *importkit.Imported, gen *provision.Generation)) {
	entries, _ := os.ReadDir("testdata")
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			files, err := im.Files(filepath.Join("testdata", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := im.Import(files, Project)
			if err != nil {
				t.Fatal(err)
			}
			f(t, e.Name(), files, got, load(t, got.Source, Project))
		})
	}
	if n < 3 {
		t.Fatalf("found %d cases in testdata, want 3 or more", n)
	}
}

// Golden compares each case's policy, and the rules it could not keep,
// with testdata/CASE.golden (go test -update rewrites them).
func (im Import) Golden(t *testing.T) {
	im.Each(t, func(t *testing.T, name string, _ []string, got *importkit.Imported, _ *provision.Generation) {
		text := got.Source
		if len(got.Lossy) > 0 {
			text += "\n// Lossy:\n// " + strings.Join(got.Lossy, "\n// ") + "\n"
		}
		file := filepath.Join("testdata", name+".golden")
		if *update {
			os.WriteFile(file, []byte(text), 0o644)
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if text != string(want) {
			t.Errorf("the import of testdata/%s differs from %s:\n%s", name, file, text)
		}
	})
}

// Refused imports each bad file alone, {name, body, what the error must
// say}, and wants that error, and no policy.
func (im Import) Refused(t *testing.T, bad [][3]string) {
	for _, c := range bad {
		t.Run(c[0], func(t *testing.T) {
			f := filepath.Join(t.TempDir(), c[0])
			os.WriteFile(f, []byte(c[1]), 0o644)
			got, err := im.Import([]string{f}, Project)
			if err == nil || !strings.Contains(err.Error(), c[2]) {
				t.Fatalf("got %v, %v; want an error with %q", got, err, c[2])
			}
		})
	}
}

// load writes a policy of one file, src, in a module of its own and loads
// it as the gateway does, for the working directory wd; a policy that does
// not load fails the test.
func load(t testing.TB, src, wd string) *provision.Generation {
	t.Helper()
	dir := policydir.Write(t, map[string]string{"policy.cue": src})
	h := pluginhost.New(slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	gen, err := reload.Load(context.Background(), reload.Registry(h, &provision.Upstreams{}), dir, wd, 0)
	if err != nil {
		t.Fatalf("the policy does not load: %v\n%s", err, src)
	}
	return gen
}
