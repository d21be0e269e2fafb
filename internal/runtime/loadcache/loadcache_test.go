package loadcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"aimon.dev/gw/internal/core/defaultpolicy"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/testkit/policydir"
)

const head = "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Bash: schema.#Bash, Read: schema.#Read}\n"

// module writes a policy module and returns its directory.
func module(t *testing.T, policyCue string) string {
	t.Helper()
	return policydir.Write(t, map[string]string{"policy.cue": policyCue})
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func loader(dir, wd string) Loader {
	return func() (*policy.Generation, error) { return policy.Load(dir, policy.WithWorkdir(wd)) }
}

// decide answers a Bash or Read call as the agent: the permission only.
func decide(t *testing.T, g *policy.Generation, tool, field, subject, wd string) bool {
	t.Helper()
	e, err := g.Effective([]string{"agent"})
	if err != nil {
		t.Fatal(err)
	}
	return e.Decide(tool, map[string]any{field: subject}, wd).Allowed
}

func load(t *testing.T, c *Cache, dir, wd string) (*policy.Generation, bool) {
	t.Helper()
	g, hit, err := c.Load(dir, loader(dir, wd), policy.WithWorkdir(wd))
	if err != nil {
		t.Fatal(err)
	}
	return g, hit
}

// rewrite changes a record's body and seals it with a matching checksum,
// as a forger or a bug would.
func rewrite(t *testing.T, p string, edit func(head, saved []byte) ([]byte, []byte)) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rest := bytes.TrimPrefix(data, []byte(magic))
	_, body, _ := bytes.Cut(rest, []byte("\n"))
	h, saved, _ := bytes.Cut(body, []byte("\n"))
	h, saved = edit(h, saved)
	body = append(append(h, '\n'), saved...)
	sum := sha256.Sum256(body)
	out := append([]byte(magic+hex.EncodeToString(sum[:])+"\n"), body...)
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestR3CacheNeverChangesADecision: a record stands for a load only while
// it verifies; after any change to the policy, the record, the binary or
// the cache's ownership, the policy is loaded afresh and decides as it now
// says (issue 14).
func TestR3CacheNeverChangesADecision(t *testing.T) {
	tests := []struct {
		note string
		// spoil changes something after a record of the git policy was
		// written; the next load must miss.
		spoil func(t *testing.T, c *Cache, dir string)
		// git is whether git status is then allowed.
		git bool
		// warn is whether the miss is suspect, and logged as a warning;
		// the others are a cache's normal flow.
		warn bool
	}{
		{"the policy is edited", func(t *testing.T, c *Cache, dir string) {
			write(t, filepath.Join(dir, "policy.cue"), head+`agent: "allowed-tools": ["Bash(ls)"]`+"\n")
		}, false, false},
		// Content is what is checked, never a file's size and time alone.
		{"the policy is edited to the same size and time", func(t *testing.T, c *Cache, dir string) {
			p := filepath.Join(dir, "policy.cue")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			write(t, p, head+`agent: "allowed-tools": ["Bash(gi?:*)"]`+"\n")
			if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
			if now, _ := os.Stat(p); now.Size() != st.Size() || !now.ModTime().Equal(st.ModTime()) {
				t.Fatalf("the edit changed the size or the time: %v, %v", now.Size(), now.ModTime())
			}
		}, false, false},
		{"a directory joins the policy's", func(t *testing.T, c *Cache, dir string) {
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
		}, true, false},
		{"a file joins the module's cue.mod", func(t *testing.T, c *Cache, dir string) {
			write(t, filepath.Join(dir, "cue.mod", "extra.txt"), "x")
		}, true, false},
		{"a file joins the package", func(t *testing.T, c *Cache, dir string) {
			write(t, filepath.Join(dir, "more.cue"), "package policy\n\nvalidation: \"off\"\n")
		}, true, false},
		{"the module file changes", func(t *testing.T, c *Cache, dir string) {
			write(t, filepath.Join(dir, "cue.mod", "module.cue"), "module: \"example.com/q@v0\"\nlanguage: version: \"v0.12.0\"\n")
		}, true, false},
		{"a byte of the record flips", func(t *testing.T, c *Cache, dir string) {
			p := c.path(dir)
			data, _ := os.ReadFile(p)
			data[len(data)-10] ^= 1
			os.WriteFile(p, data, 0o600)
		}, true, true},
		{"the record is cut short", func(t *testing.T, c *Cache, dir string) {
			p := c.path(dir)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, data[:len(data)/2], 0o600)
		}, true, true},
		{"the record is of another version", func(t *testing.T, c *Cache, dir string) {
			p := c.path(dir)
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte("loadcache 1"), []byte("loadcache 0"), 1), 0o600)
		}, true, false},
		{"a sealed record holds no policy", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) { return h, []byte(`{"Format":2}`) })
		}, true, true},
		{"a sealed record holds a plan cut short", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) { return h, s[:len(s)-2] })
		}, true, true},
		// The head is read token by token (readRecord): what encoding/json
		// would have let by is a suspect record too.
		{"a sealed record's head has a field no record has", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) {
				return bytes.Replace(h, []byte(`{"Exe":`), []byte(`{"Trusted":true,"Exe":`), 1), s
			})
		}, true, true},
		{"a sealed record's manifest names a file twice", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) {
				return bytes.Replace(h, []byte(`"Files":{`), []byte(`"Files":{"/x":"a","/x":"b",`), 1), s
			})
		}, true, true},
		{"a sealed record's head is two", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) { return append(h, h...), s })
		}, true, true},
		{"another binary wrote the record", func(t *testing.T, c *Cache, dir string) {
			rewrite(t, c.path(dir), func(h, s []byte) ([]byte, []byte) {
				return bytes.Replace(h, []byte(`"Exe":"`), []byte(`"Exe":"x`), 1), s
			})
		}, true, false},
		{"the record may be written by others", func(t *testing.T, c *Cache, dir string) {
			os.Chmod(c.path(dir), 0o666)
		}, true, true},
		{"the cache directory may be written by others", func(t *testing.T, c *Cache, dir string) {
			os.Chmod(c.Dir, 0o777)
		}, true, true},
		{"the record is a symbolic link", func(t *testing.T, c *Cache, dir string) {
			p := c.path(dir)
			os.Rename(p, p+".real")
			os.Symlink(p+".real", p)
		}, true, true},
	}
	for _, tc := range tests {
		// A hook's check begins before it reads its input (Prefetch):
		// it misses alike.
		for _, ahead := range []bool{false, true} {
			note := tc.note
			if ahead {
				note += ", checked ahead"
			}
			t.Run(note, func(t *testing.T) {
				spoiled(t, tc.spoil, tc.git, tc.warn, ahead)
			})
		}
	}
}

// spoiled is a case of TestR3CacheNeverChangesADecision: a record of the
// git policy, then spoil, then a load that must miss, checked ahead by
// Prefetch when ahead.
func spoiled(t *testing.T, spoil func(t *testing.T, c *Cache, dir string), git, warn, ahead bool) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	if _, hit := load(t, c, dir, "/w"); hit {
		t.Fatal("the first load hit a record")
	}
	st, err := os.Stat(c.path(dir))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the record: %v, %v; want a file of mode 0600", st, err)
	}
	g, hit := load(t, c, dir, "/w")
	if !hit || !decide(t, g, "Bash", "command", "git status", "/w") {
		t.Fatalf("the second load: hit %v; want a restored policy that allows git status", hit)
	}
	spoil(t, c, dir)
	var log bytes.Buffer
	c.Log = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if ahead {
		c.Prefetch(dir)
	}
	g, hit = load(t, c, dir, "/w")
	if hit {
		t.Fatal("a spoiled record was used")
	}
	if warned := strings.Contains(log.String(), "level=WARN"); warned != warn {
		t.Errorf("warned %v, want %v:\n%s", warned, warn, log.String())
	}
	if got := decide(t, g, "Bash", "command", "git status", "/w"); got != git {
		t.Fatalf("git status allowed = %v, want %v", got, git)
	}
}

// TestR3CacheRecordOnlyWhatWasLoaded: a policy edited while it loads is
// not recorded, so no record can hold a policy that its files no longer say.
func TestR3CacheRecordOnlyWhatWasLoaded(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	calls := 0
	edit := func() (*policy.Generation, error) {
		g, err := policy.Load(dir)
		if calls++; calls == 1 {
			write(t, filepath.Join(dir, "policy.cue"), head+`agent: "allowed-tools": ["Bash(ls)"]`+"\n")
		}
		return g, err
	}
	if _, _, err := c.Load(dir, edit); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.path(dir)); !os.IsNotExist(err) {
		t.Fatalf("a record was written of a policy edited during its load: %v", err)
	}
	g, hit := load(t, c, dir, "/w")
	if hit || decide(t, g, "Bash", "command", "git status", "/w") {
		t.Fatal("the edit is not in force")
	}
}

// TestR3CacheWorkdir: entries relative to the working directory resolve
// against the one of each call, whichever wrote the record.
func TestR3CacheWorkdir(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Read(./src/**)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	load(t, c, dir, "/one")
	for _, wd := range []string{"/one", "/two"} {
		g, hit := load(t, c, dir, wd)
		if !hit {
			t.Fatalf("%s: no hit", wd)
		}
		if !decide(t, g, "Read", "file_path", wd+"/src/a.go", wd) || decide(t, g, "Read", "file_path", "/one/src/a.go", "/two") && wd == "/two" {
			t.Errorf("%s: ./src/** does not resolve against the call's working directory", wd)
		}
	}
}

// TestR3CacheEmbedded: the embedded policy is recorded too; only the
// binary says what it is.
func TestR3CacheEmbedded(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	l := func() (*policy.Generation, error) { return policy.LoadFS(defaultpolicy.FS()) }
	for i, want := range []bool{false, true} {
		g, hit, err := c.Load("", l)
		if err != nil || hit != want || g.Tools["Echo"] == nil {
			t.Fatalf("load %d: hit %v, %v; want hit %v and the default tools", i, hit, err, want)
		}
	}
}

// TestR3CacheNotOwned: a record or a directory of another user is not read.
func TestR3CacheNotOwned(t *testing.T) {
	st, err := os.Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sys := *st.Sys().(*syscall.Stat_t)
	sys.Uid = uint32(os.Geteuid() + 1)
	other := fileInfo{FileInfo: st, sys: &sys}
	if why := privateInfo("d", other, true); !strings.Contains(why, "another user") {
		t.Fatalf("a directory of another user: %q", why)
	}
	if why := privateInfo("d", st, true); why != "" {
		t.Fatalf("the user's own directory: %q", why)
	}
}

type fileInfo struct {
	os.FileInfo
	sys *syscall.Stat_t
}

func (f fileInfo) Sys() any { return f.sys }

// TestR3CacheBoundsItsManifest: a policy directory that holds more than a
// manifest may hash on each call is loaded afresh every time, not re-read
// whole for every decision.
func TestR3CacheBoundsItsManifest(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	write(t, filepath.Join(dir, "vendor", "big.bin"), strings.Repeat("x", maxManifest+1))
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	for range 2 {
		if g, hit := load(t, c, dir, "/w"); hit || !decide(t, g, "Bash", "command", "git status", "/w") {
			t.Fatalf("hit %v; want a fresh load that allows git status", hit)
		}
	}
	if _, err := os.Stat(c.path(dir)); !os.IsNotExist(err) {
		t.Fatalf("a record of a policy too large to verify: %v", err)
	}
}

// TestC2CacheNeverWaitsOnAFIFO: a policy file replaced by a FIFO after its
// record was written neither hangs the verification nor is taken: the
// fresh load reports it, and the call is refused (a hook must not hang).
func TestC2CacheNeverWaitsOnAFIFO(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	load(t, c, dir, "/w")
	p := filepath.Join(dir, "policy.cue")
	os.Remove(p)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := c.Load(dir, loader(dir, "/w"), policy.WithWorkdir("/w"))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("Load = %v, want the fresh load's error naming the FIFO", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cache waits on a FIFO in the policy's place")
	}
}

// TestR3CacheOpenRecordsWhenAsked: Open, for a process that serves, hands
// back a fresh load at once and writes its record only when asked; a
// restored policy comes with nothing to record, and a load that failed
// with no record at all.
func TestR3CacheOpenRecordsWhenAsked(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	open := func(note string, hit bool) func() {
		t.Helper()
		g, record, err := c.Open(dir, loader(dir, "/w"), policy.WithWorkdir("/w"))
		if err != nil || !decide(t, g, "Bash", "command", "git status", "/w") || (record == nil) != hit {
			t.Fatalf("%s: %v, a record to write %v; want the policy, and one to write %v", note, err, record != nil, !hit)
		}
		return record
	}
	open("a miss not recorded", false)
	if _, err := os.Stat(c.path(dir)); !os.IsNotExist(err) {
		t.Fatalf("a record was written before it was asked for: %v", err)
	}
	open("a miss recorded", false)()
	open("a hit", true)
	write(t, filepath.Join(dir, "policy.cue"), "package policy\n\nagent: {")
	if g, record, err := c.Open(dir, loader(dir, "/w")); err == nil || g != nil || record != nil {
		t.Fatalf("a policy that does not load: %v, %v, a record to write %v; want its error alone", g, err, record != nil)
	}
}

// TestR3CacheFreshBeforeEachLoad: Fresh is called before every fresh load
// (the first, one of an edited policy) and never on a hit, so the hook's
// collector waits only where a record answers.
func TestR3CacheFreshBeforeEachLoad(t *testing.T) {
	dir := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	fresh, loads := 0, 0
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache"), Fresh: func() { fresh++ }}
	counted := func() (*policy.Generation, error) {
		if loads++; fresh == 0 {
			t.Error("a load ran before Fresh was called")
		}
		return loader(dir, "/w")()
	}
	for _, tc := range []struct {
		note         string
		edit         bool
		hit          bool
		fresh, loads int
	}{
		{"the first call", false, false, 1, 2}, // the load, and the one that checks the record
		{"a hit", false, true, 1, 2},
		{"an edited policy", true, false, 2, 4},
		{"its record", false, true, 2, 4},
	} {
		if tc.edit {
			write(t, filepath.Join(dir, "policy.cue"), head+`agent: "allowed-tools": ["Bash(go:*)"]`+"\n")
		}
		if _, hit, err := c.Load(dir, counted, policy.WithWorkdir("/w")); err != nil || hit != tc.hit || fresh != tc.fresh || loads != tc.loads {
			t.Errorf("%s: hit %v, Fresh called %d times, %d loads (%v); want hit %v, %d, %d", tc.note, hit, fresh, loads, err, tc.hit, tc.fresh, tc.loads)
		}
	}
}

// TestR3CachePrefetchIsOfItsDirectoryOnce: a check begun ahead stands for
// the next load of its own directory only, and for one load: a load of
// another policy meanwhile is that policy's, and a load after an edit
// that follows the first is checked again.
func TestR3CachePrefetchIsOfItsDirectoryOnce(t *testing.T) {
	git := module(t, head+`agent: "allowed-tools": ["Bash(git:*)"]`+"\n")
	ls := module(t, head+`agent: "allowed-tools": ["Bash(ls)"]`+"\n")
	c := &Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	load(t, c, git, "/w")
	load(t, c, ls, "/w")
	c.Prefetch(git)
	g, hit := load(t, c, ls, "/w")
	if !hit || decide(t, g, "Bash", "command", "git status", "/w") || !decide(t, g, "Bash", "command", "ls", "/w") {
		t.Fatalf("a load of another policy than the one checked ahead: hit %v, or it is not that policy", hit)
	}
	g, hit = load(t, c, git, "/w")
	if !hit || !decide(t, g, "Bash", "command", "git status", "/w") {
		t.Fatalf("the load checked ahead: hit %v, or it does not allow git status", hit)
	}
	write(t, filepath.Join(git, "policy.cue"), head+`agent: "allowed-tools": ["Bash(ls)"]`+"\n")
	if g, hit = load(t, c, git, "/w"); hit || decide(t, g, "Bash", "command", "git status", "/w") {
		t.Fatalf("a load after an edit was answered from the check ahead of the one before: hit %v", hit)
	}
}
