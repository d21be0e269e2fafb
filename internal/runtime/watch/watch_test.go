package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/internal/testkit/policydir"
)

var posRE = regexp.MustCompile(`policy\.cue:\d+:\d+`)

func TestR3EditPutsNewGenerationInForce(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
	h := start(t, dir, Options{})
	first := h.w.Status()
	if first.Generation != 1 || first.Revision != h.cur.Load().Revision || first.LastError != "" || first.LoadedAt.IsZero() {
		t.Fatalf("status after New = %+v; want generation 1 with the loaded revision and no error", first)
	}

	next := map[string]string{"policy.cue": source("Read", "Echo", "Glob")}
	want := revision(t, next)
	write(t, filepath.Join(dir, "policy.cue"), next["policy.cue"])
	s := h.waitRevision(t, want)

	if s.Generation != 2 {
		t.Errorf("generation = %d; want 2", s.Generation)
	}
	if !s.LoadedAt.After(first.LoadedAt) {
		t.Errorf("LoadedAt %v is not after the first load %v", s.LoadedAt, first.LoadedAt)
	}
	if got := h.cur.Load().Names(); !slices.Equal(got, []string{"Echo", "Glob", "Read"}) {
		t.Errorf("tools in force = %v; want [Echo Glob Read]", got)
	}
	if l := h.logs.String(); !strings.Contains(l, "policy reloaded") || !strings.Contains(l, "revision="+want) {
		t.Errorf("the reload's revision is not logged:\n%s", l)
	}
}

// A broken edit leaves the last good generation in force, says where the
// problem is, and the fix that follows goes in force and clears the error.
func TestR3BrokenEditThenFix(t *testing.T) {
	cases := []struct{ name, broken, problem string }{
		{"misspelt key", "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Read: schema.#Read\nagent: allowedTools: [\"Read\"]\n", "allowedTools"},
		{"syntax error", "package policy\n\ntools: {\n\tRead: \n", ""},
		{"value out of its type", "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Read: schema.#Read\nvalidation: \"strict\"\n", "validation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := source("Read", "Echo")
			dir := policyDir(t, map[string]string{"policy.cue": good})
			h := start(t, dir, Options{})
			before, inForce := h.w.Status(), h.cur.Load()

			write(t, filepath.Join(dir, "policy.cue"), c.broken)
			s := h.waitError(t)
			if s.Generation != before.Generation || s.Revision != before.Revision || !s.LoadedAt.Equal(before.LoadedAt) {
				t.Errorf("a broken edit changed the generation in force: %+v, was %+v", s, before)
			}
			if h.cur.Load() != inForce {
				t.Errorf("a broken edit was swapped in")
			}
			if !posRE.MatchString(s.LastError) || !strings.Contains(s.LastError, c.problem) {
				t.Errorf("LastError = %q; want a policy.cue:line:col position naming %q", s.LastError, c.problem)
			}
			if s.LastErrorAt.IsZero() {
				t.Errorf("LastErrorAt is zero with an error pending")
			}
			l := h.logs.String()
			if !strings.Contains(l, "policy reload rejected") || !posRE.MatchString(l) {
				t.Errorf("the rejection is not logged with file:line:col:\n%s", l)
			}

			fixed := map[string]string{"policy.cue": source("Read", "Grep")}
			write(t, filepath.Join(dir, "policy.cue"), fixed["policy.cue"])
			s = h.waitRevision(t, revision(t, fixed))
			if s.Generation != before.Generation+1 || !s.LastErrorAt.IsZero() {
				t.Errorf("after the fix status = %+v; want generation %d and no error", s, before.Generation+1)
			}
			if _, ok := h.cur.Load().Tools["Grep"]; !ok {
				t.Errorf("the fixed policy is not in force: %v", h.cur.Load().Names())
			}
		})
	}
}

// Editors and tools save in several ways; each must end in one generation of
// the saved content.
func TestR3SaveStyles(t *testing.T) {
	saves := []struct {
		name string
		save func(t *testing.T, dir, data string)
	}{
		{"in place", func(t *testing.T, dir, data string) {
			write(t, filepath.Join(dir, "policy.cue"), data)
		}},
		{"rename into place", func(t *testing.T, dir, data string) {
			tmp := filepath.Join(dir, ".policy.cue.tmp123")
			write(t, tmp, data)
			if err := os.Rename(tmp, filepath.Join(dir, "policy.cue")); err != nil {
				t.Fatal(err)
			}
		}},
		{"rename into place from outside", func(t *testing.T, dir, data string) {
			tmp := filepath.Join(filepath.Dir(dir), "staged.cue")
			write(t, tmp, data)
			if err := os.Rename(tmp, filepath.Join(dir, "policy.cue")); err != nil {
				t.Fatal(err)
			}
		}},
		{"vim with backup and swap file", func(t *testing.T, dir, data string) {
			p := filepath.Join(dir, "policy.cue")
			write(t, filepath.Join(dir, ".policy.cue.swp"), "swap")
			write(t, filepath.Join(dir, "4913"), "")
			os.Remove(filepath.Join(dir, "4913"))
			if err := os.Rename(p, p+"~"); err != nil {
				t.Fatal(err)
			}
			write(t, p, data)
			os.Remove(p + "~")
			os.Remove(filepath.Join(dir, ".policy.cue.swp"))
		}},
		{"delete and recreate", func(t *testing.T, dir, data string) {
			p := filepath.Join(dir, "policy.cue")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			write(t, p, data)
		}},
		{"truncate then write", func(t *testing.T, dir, data string) {
			f, err := os.OpenFile(filepath.Join(dir, "policy.cue"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			half := len(data) / 2
			f.WriteString(data[:half])
			f.Sync()
			f.WriteString(data[half:])
			f.Close()
		}},
	}
	for _, s := range saves {
		t.Run(s.name, func(t *testing.T) {
			dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
			h := start(t, dir, Options{})
			next := source("Read", "Echo", "Bash")
			s.save(t, dir, next)
			st := h.waitRevision(t, revision(t, map[string]string{"policy.cue": next}))
			if _, ok := h.cur.Load().Tools["Bash"]; !ok {
				t.Errorf("status %+v, but the saved policy is not in force: %v", st, h.cur.Load().Names())
			}
		})
	}
}

// manyFiles spreads a policy over n files, one subagent each (surfaces load
// much faster than tools); variant changes every file.
func manyFiles(n int, variant string) map[string]string {
	files := map[string]string{"policy.cue": source("Echo")}
	for i := range n {
		files[fmt.Sprintf("agent%03d.cue", i)] = fmt.Sprintf("package policy\n\nsubagents: %s%03d: \"allowed-tools\": [\"Echo\"]\n", variant, i)
	}
	return files
}

// A burst that rewrites many files gives one reload, of its final state.
func TestR3BurstOfManyFilesGivesOneReload(t *testing.T) {
	const n = 100
	dir := policyDir(t, manyFiles(n, "A"))
	// A long quiet period, so that the burst cannot be split by a slow
	// machine; the test waits for the reload, it does not time it.
	h := start(t, dir, Options{Debounce: 500 * time.Millisecond})
	next := manyFiles(n, "B")
	want := revision(t, next)
	// The burst comes in groups a little apart, as a slow checkout's would:
	// the pauses shape the burst, they assert nothing.
	i := 0
	for name, data := range next {
		write(t, filepath.Join(dir, name), data)
		if i++; i%20 == 0 {
			time.Sleep(30 * time.Millisecond)
		}
	}
	s := h.waitRevision(t, want)
	if s.Generation != 2 || h.reloads.Load() != 1 {
		t.Errorf("the burst gave generation %d after %d reloads; want one reload to generation 2", s.Generation, h.reloads.Load())
	}
	if got := len(h.cur.Load().Surfaces); got != n+1 || h.cur.Load().Surfaces["subagent:B000"] == nil {
		t.Errorf("%d surfaces in force; want the agent and %d B subagents", got, n)
	}
}

// A git checkout rewrites, adds and removes files at once.
func TestR3GitCheckout(t *testing.T) {
	git := need.Command(t, "git", "apt-get install git")
	dir := policyDir(t, manyFiles(60, "A"))
	run := func(args ...string) {
		t.Helper()
		if out, err := runIn(dir, git, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	run("-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
	run("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "A")
	run("checkout", "-q", "-b", "b")
	for name := range manyFiles(60, "A") {
		os.Remove(filepath.Join(dir, name))
	}
	next := manyFiles(90, "B")
	for name, data := range next {
		write(t, filepath.Join(dir, name), data)
	}
	run("-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A", ".")
	run("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "B")
	run("checkout", "-q", "main")

	h := start(t, dir, Options{Debounce: 500 * time.Millisecond})
	run("checkout", "-q", "b")
	h.waitRevision(t, revision(t, next))
	if got := len(h.cur.Load().Surfaces); got != 91 || h.cur.Load().Surfaces["subagent:B089"] == nil {
		t.Errorf("%d surfaces in force after the checkout; want the agent and 90 B subagents", got)
	}
	if n := h.reloads.Load(); n != 1 {
		t.Errorf("the checkout gave %d reloads; want 1", n)
	}
}

// A subdirectory created while serving is watched, however deep, as soon
// as it appears: an edit in it alone reloads the policy that imports it.
func TestR3NewSubdirectoryIsWatched(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
	h := start(t, dir, Options{})

	lib := func(tool string) string {
		return "package deep\n\nimport \"aimon.dev/gw/schema\"\n\nExtra: " + tool + ": schema.#" + tool + "\n"
	}
	importing := "package policy\n\nimport (\n\t\"aimon.dev/gw/schema\"\n\t\"example.com/p/lib/deep\"\n)\n\n" +
		"tools: deep.Extra\ntools: Read: schema.#Read\n"
	write(t, filepath.Join(dir, "lib", "deep", "deep.cue"), lib("Glob"))
	write(t, filepath.Join(dir, "policy.cue"), importing)
	h.waitFor(t, "a policy with the imported Glob", func(s Status) bool {
		_, ok := h.cur.Load().Tools["Glob"]
		return s.LastError == "" && ok
	})
	before := h.w.Status()

	// Only the file in the new subdirectory changes.
	write(t, filepath.Join(dir, "lib", "deep", "deep.cue"), lib("Grep"))
	h.waitFor(t, "a policy with the imported Grep", func(s Status) bool {
		_, ok := h.cur.Load().Tools["Grep"]
		return s.Generation > before.Generation && ok
	})
	if _, ok := h.cur.Load().Tools["Glob"]; ok {
		t.Errorf("the old import is still in force: %v", h.cur.Load().Names())
	}

	// A removed subdirectory breaks the import: rejected, last good kept.
	inForce := h.cur.Load()
	if err := os.RemoveAll(filepath.Join(dir, "lib")); err != nil {
		t.Fatal(err)
	}
	s := h.waitError(t)
	if h.cur.Load() != inForce || !strings.Contains(s.LastError, "import") {
		t.Errorf("after removing the imported directory: status %+v; want the last good generation kept and the import named", s)
	}
}

// A removed policy directory leaves the last good generation in force, is
// reported, and the gateway recovers when the directory comes back.
func TestR3DirectoryRemovedAndRestored(t *testing.T) {
	ways := []struct {
		name            string
		remove, restore func(t *testing.T, dir, data string)
		poll            time.Duration
	}{
		{"removed and recreated",
			func(t *testing.T, dir, _ string) { must(t, os.RemoveAll(dir)) },
			func(t *testing.T, dir, data string) {
				write(t, filepath.Join(dir, "cue.mod", "module.cue"), policydir.Module)
				write(t, filepath.Join(dir, "policy.cue"), data)
			}, 0},
		{"renamed away and back",
			func(t *testing.T, dir, _ string) { must(t, os.Rename(dir, dir+".bak")) },
			func(t *testing.T, dir, data string) {
				write(t, filepath.Join(dir+".bak", "policy.cue"), data)
				must(t, os.Rename(dir+".bak", dir))
			}, 0},
		{"removed and replaced by a staged copy",
			func(t *testing.T, dir, _ string) { must(t, os.RemoveAll(dir)) },
			func(t *testing.T, dir, data string) {
				staged := dir + ".new"
				write(t, filepath.Join(staged, "cue.mod", "module.cue"), policydir.Module)
				write(t, filepath.Join(staged, "lib", "x.cue"), "package lib\n")
				write(t, filepath.Join(staged, "policy.cue"), data)
				must(t, os.Rename(staged, dir))
			}, 0},
		{"its parent removed and recreated",
			func(t *testing.T, dir, _ string) { must(t, os.RemoveAll(filepath.Dir(dir))) },
			func(t *testing.T, dir, data string) {
				write(t, filepath.Join(dir, "cue.mod", "module.cue"), policydir.Module)
				write(t, filepath.Join(dir, "policy.cue"), data)
			}, 20 * time.Millisecond}, // nothing is left to watch: found by polling
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
			h := start(t, dir, Options{Poll: way.poll})
			before, inForce := h.w.Status(), h.cur.Load()

			way.remove(t, dir, "")
			s := h.waitError(t)
			if h.cur.Load() != inForce || s.Generation != before.Generation || s.Revision != before.Revision {
				t.Errorf("with the directory gone: status %+v; want generation %d kept", s, before.Generation)
			}
			if !strings.Contains(s.LastError, "does not exist") {
				t.Errorf("LastError = %q; want it to say the directory does not exist", s.LastError)
			}
			if !strings.Contains(h.logs.String(), "policy reload rejected") {
				t.Errorf("the missing directory is not logged:\n%s", h.logs)
			}

			next := source("Read", "Echo", "Write")
			way.restore(t, dir, next)
			s = h.waitRevision(t, revision(t, map[string]string{"policy.cue": next}))
			if _, ok := h.cur.Load().Tools["Write"]; !ok {
				t.Errorf("status %+v, but the restored policy is not in force", s)
			}

			// The restored directory is watched again.
			again := source("Read")
			write(t, filepath.Join(dir, "policy.cue"), again)
			h.waitRevision(t, revision(t, map[string]string{"policy.cue": again}))
		})
	}
}

// The module root may lie above the policy directory, as in this repository:
// the module's cue.mod and the package's files in the directories between
// are policy too.
func TestR3ModuleRootAboveDirectory(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "cue.mod", "module.cue"), policydir.Module)
	write(t, filepath.Join(root, "policies", "main", "policy.cue"), source("Read", "Echo"))
	dir := filepath.Join(root, "policies", "main")
	h := start(t, dir, Options{})

	// A file of the same package one level up is part of the policy.
	write(t, filepath.Join(root, "policies", "shared.cue"), "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Glob: schema.#Glob\n")
	h.waitFor(t, "the shared file's Glob", func(Status) bool { _, ok := h.cur.Load().Tools["Glob"]; return ok })

	// A broken module file is rejected, and its repair reloads.
	write(t, filepath.Join(root, "cue.mod", "module.cue"), "module: 42\nlanguage: version: \"v0.12.0\"\n")
	s := h.waitError(t)
	if !strings.Contains(s.LastError, "module") {
		t.Errorf("LastError = %q; want the module file's problem", s.LastError)
	}
	write(t, filepath.Join(root, "cue.mod", "module.cue"), policydir.Module)
	h.waitFor(t, "the repaired module", func(s Status) bool { return s.LastError == "" })
}

// Calls in flight keep the generation they started with; the next one sees
// the new generation.
func TestR3InFlightCallKeepsItsGeneration(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
	h := start(t, dir, Options{})
	started := h.cur.Load() // a call takes the generation in force when it starts
	names := started.Names()

	next := map[string]string{"policy.cue": source("Bash")}
	write(t, filepath.Join(dir, "policy.cue"), next["policy.cue"])
	h.waitRevision(t, revision(t, next))

	if !slices.Equal(started.Names(), names) || started.Revision == h.cur.Load().Revision {
		t.Errorf("the call's generation changed under it: %v", started.Names())
	}
	if got := h.cur.Load().Names(); !slices.Equal(got, []string{"Bash"}) {
		t.Errorf("the next call sees %v; want [Bash]", got)
	}
}

// Reload (SIGHUP) reloads even when no event was seen.
func TestR3ReloadOnRequest(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")})
	h := start(t, dir, Options{})
	before := h.w.Status()
	h.w.Reload()
	h.w.Reload() // a second request while one is pending is folded into it
	s := h.waitFor(t, "a reload on request", func(s Status) bool { return s.Generation > before.Generation })
	if s.Revision != before.Revision || s.LastError != "" {
		t.Errorf("a reload of unchanged files gave %+v; want revision %s and no error", s, before.Revision)
	}
}

// New refuses a policy that does not load, with the loader's diagnostics,
// and watches nothing.
func TestR3NewRejectsBrokenPolicy(t *testing.T) {
	cases := []struct {
		name  string
		dir   func(t *testing.T) string
		where string
	}{
		{"broken file", func(t *testing.T) string {
			return policyDir(t, map[string]string{"policy.cue": "package policy\n\nagent: allowedTools: []\n"})
		}, "policy.cue:"},
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := New(c.dir(t), func(*policy.Generation) error { t.Error("swap called for a broken policy"); return nil }, Options{})
			var errs policy.Errors
			if w != nil || !errors.As(err, &errs) || !strings.Contains(err.Error(), c.where) {
				t.Fatalf("New = %v, %v; want a policy.Errors naming %q", w, err, c.where)
			}
		})
	}
	if _, err := New(".", nil, Options{}); err == nil {
		t.Errorf("New with a nil swap succeeded")
	}
}

// A custom loader's error that is not a policy.Errors is reported as is.
func TestR3CustomLoaderError(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Echo")})
	calls := 0
	load := func(d string) (*policy.Generation, error) {
		calls++
		if calls == 1 {
			return policy.Load(d)
		}
		return nil, errors.New("the loader is out of order")
	}
	h := start(t, dir, Options{Load: load})
	h.w.Reload()
	s := h.waitError(t)
	if s.LastError != "the loader is out of order" || !strings.Contains(h.logs.String(), "the loader is out of order") {
		t.Errorf("LastError = %q; want the loader's error, logged", s.LastError)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Run runs once, and returns nil when the watcher is closed.
func TestR3RunOnceAndClose(t *testing.T) {
	dir := policyDir(t, map[string]string{"policy.cue": source("Echo")})
	w, err := New(dir, func(*policy.Generation) error { return nil }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if g := w.Initial(); g == nil || g.Revision != w.Status().Revision {
		t.Fatalf("Initial = %v; want the generation of status %+v", g, w.Status())
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	w.OnReload(func(Status) {})
	for !w.running.Load() {
		runtime.Gosched()
	}
	if err := w.Run(context.Background()); err == nil {
		t.Errorf("a second Run succeeded")
	}
	w.Close()
	if err := <-done; err != nil {
		t.Errorf("Run after Close = %v; want nil", err)
	}
}

// The status line's fields: the error ones only when the newest edit was
// rejected.
func TestR3StatusJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
	cases := []struct {
		s    Status
		want string
	}{
		{Status{Generation: 2, Revision: "abc", LoadedAt: at}, `{"generation":2,"revision":"abc","loaded_at":"2026-11-29T23:00:00Z"}`},
		{Status{Generation: 2, Revision: "abc", LoadedAt: at, LastError: "policy.cue:1:2: bad", LastErrorAt: at},
			`{"generation":2,"revision":"abc","loaded_at":"2026-11-29T23:00:00Z","last_error":"policy.cue:1:2: bad","last_error_at":"2026-11-29T23:00:00Z"}`},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.s)
		if err != nil || string(got) != c.want {
			t.Errorf("json of %+v = %s, %v; want %s", c.s, got, err, c.want)
		}
	}
}

// TestR5FileOpenForWritingIsNotTaken: while a process holds a policy file
// open for writing, what it has written so far is not put in force, even
// when it reads the same twice and loads (a writer that pauses), nor
// reported as a broken edit; once the file is closed, its content is.
func TestR5FileOpenForWritingIsNotTaken(t *testing.T) {
	for _, c := range []struct {
		note, written string
	}{
		{note: "a whole policy so far", written: source("Read", "Echo")},
		{note: "half a policy, which does not load", written: source("Read", "Echo")[:40]},
	} {
		t.Run(c.note, func(t *testing.T) {
			dir := policyDir(t, map[string]string{"policy.cue": source("Read")})
			h := start(t, dir, Options{})
			inForce := h.w.Status()
			f, err := os.OpenFile(filepath.Join(dir, "policy.cue"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(c.written); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(waitLimit)
			for !strings.Contains(h.logs.String(), "policy.cue is open for writing") {
				select {
				case <-deadline:
					t.Fatalf("no reload was deferred for the file open for writing within %v; logs:\n%s", waitLimit, h.logs)
				case <-time.After(10 * time.Millisecond):
				}
			}
			if st := h.w.Status(); st.Revision != inForce.Revision || st.Generation != inForce.Generation || st.LastError != "" {
				t.Errorf("status %+v while the file is open for writing; want %+v still in force and no error", st, inForce)
			}
			final := source("Read", "Echo", "Grep")
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(final), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			h.waitRevision(t, revision(t, map[string]string{"policy.cue": final}))
		})
	}
}

// TestR3FilesAsInForceAreNotLoadedAgain: a reload whose files read as the
// generation in force was loaded from hands that generation to swap again
// without a load (Reprovision, a save of the same bytes, an edit undone
// after a broken one, which clears the error); Reload (SIGHUP) and an edit
// load.
func TestR3FilesAsInForceAreNotLoadedAgain(t *testing.T) {
	for _, c := range []struct {
		note      string
		act       func(t *testing.T, h *harness, dir string)
		wantLoads int64 // loads the act adds
		same      bool  // the generation in force is handed to swap again
	}{
		{note: "Reprovision", act: func(t *testing.T, h *harness, dir string) { h.w.Reprovision() }, same: true},
		{note: "a save of the same bytes", act: func(t *testing.T, h *harness, dir string) {
			write(t, filepath.Join(dir, "policy.cue"), source("Read"))
		}, same: true},
		{note: "Reload loads again", act: func(t *testing.T, h *harness, dir string) { h.w.Reload() }, wantLoads: 1},
		{note: "an edit loads", act: func(t *testing.T, h *harness, dir string) {
			write(t, filepath.Join(dir, "policy.cue"), source("Read", "Echo"))
		}, wantLoads: 1},
	} {
		t.Run(c.note, func(t *testing.T) {
			dir := policyDir(t, map[string]string{"policy.cue": source("Read")})
			var loads atomic.Int64
			h := start(t, dir, Options{Load: func(d string) (*policy.Generation, error) { loads.Add(1); return policy.Load(d) }})
			first, n := h.cur.Load(), loads.Load()
			c.act(t, h, dir)
			h.waitFor(t, "generation 2", func(s Status) bool { return s.Generation == 2 })
			if got := loads.Load() - n; got != c.wantLoads {
				t.Errorf("%d loads; want %d", got, c.wantLoads)
			}
			if (h.cur.Load() == first) != c.same {
				t.Errorf("the generation in force handed to swap again: %v; want %v", h.cur.Load() == first, c.same)
			}
		})
	}
	t.Run("a directory swapped through its link, as a ConfigMap is updated", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "policy")
		if err := os.Symlink(policyDir(t, map[string]string{"policy.cue": source("Read")}), link); err != nil {
			t.Fatal(err)
		}
		var loads atomic.Int64
		h := start(t, link, Options{Load: func(d string) (*policy.Generation, error) { loads.Add(1); return policy.Load(d) }})
		first, n := h.cur.Load(), loads.Load()
		next := link + ".next"
		if err := os.Symlink(policyDir(t, map[string]string{"policy.cue": source("Read", "Echo")}), next); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(next, link); err != nil {
			t.Fatal(err)
		}
		h.waitFor(t, "generation 2", func(s Status) bool { return s.Generation == 2 })
		if loads.Load()-n != 1 || h.cur.Load() == first || h.cur.Load().Tools["Echo"] == nil {
			t.Errorf("%d loads, Echo in force: %v; want the new directory loaded", loads.Load()-n, h.cur.Load().Tools["Echo"] != nil)
		}
	})
	t.Run("an edit undone after a broken one", func(t *testing.T) {
		dir := policyDir(t, map[string]string{"policy.cue": source("Read")})
		var loads atomic.Int64
		h := start(t, dir, Options{Load: func(d string) (*policy.Generation, error) { loads.Add(1); return policy.Load(d) }})
		first := h.cur.Load()
		write(t, filepath.Join(dir, "policy.cue"), "package policy\n\ntools: {\n")
		h.waitError(t)
		n := loads.Load()
		write(t, filepath.Join(dir, "policy.cue"), source("Read"))
		st := h.waitFor(t, "the error cleared", func(s Status) bool { return s.LastError == "" && s.Generation == 2 })
		if loads.Load() != n || h.cur.Load() != first || st.Revision != first.Revision {
			t.Errorf("%d more loads, status %+v; want none, and the first generation in force again", loads.Load()-n, st)
		}
	})
}

// TestR5OnlyAQuietOfEventsSettlesOnce: an editor's save, whose events then
// stop for a debounce, is loaded after that one debounce (issue 49: the
// second one was most of a save's time to be in force); a change no event
// shows, made through a hard link from outside the watched tree and taken
// by a Reload (SIGHUP), must read the same twice, a debounce apart, and
// goes in force so.
func TestR5OnlyAQuietOfEventsSettlesOnce(t *testing.T) {
	const once, twice = `settled="a debounce without events"`, `settled="two reads a debounce apart"`
	dir := policyDir(t, map[string]string{"policy.cue": source("Read")})
	h := start(t, dir, Options{})
	saved := source("Read", "Echo")
	tmp := filepath.Join(dir, ".policy.cue.tmp")
	write(t, tmp, saved)
	if err := os.Rename(tmp, filepath.Join(dir, "policy.cue")); err != nil {
		t.Fatal(err)
	}
	h.waitRevision(t, revision(t, map[string]string{"policy.cue": saved}))
	if logs := h.logs.String(); !strings.Contains(logs, once) || strings.Contains(logs, twice) {
		t.Fatalf("an editor's save did not load after one quiet debounce; logs:\n%s", logs)
	}
	alias := filepath.Join(t.TempDir(), "alias.cue")
	if err := os.Link(filepath.Join(dir, "policy.cue"), alias); err != nil {
		t.Fatal(err)
	}
	unseen := source("Read", "Echo", "Grep")
	f, err := os.OpenFile(alias, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(unseen); err != nil {
		t.Fatal(err)
	}
	f.Close()
	h.w.Reload()
	h.waitRevision(t, revision(t, map[string]string{"policy.cue": unseen}))
	if logs := h.logs.String(); !strings.Contains(logs, twice) {
		t.Errorf("a Reload of a change no event showed was not read twice; logs:\n%s", logs)
	}
}
