package builtin

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// genTree writes a tree of files in nested directories, with "needle" on
// lines spread by a fixed seed, for holding the parallel search to the
// sequential one.
func genTree(t *testing.T, dir string, files int) {
	t.Helper()
	r := rand.New(rand.NewPCG(32, 4))
	for i := range files {
		var b strings.Builder
		for l := range 5 + r.IntN(60) {
			if r.IntN(7) == 0 {
				fmt.Fprintf(&b, "line %d has a needle %d é\n", l, r.IntN(1000))
			} else {
				fmt.Fprintf(&b, "line %d is plain hay\n", l)
			}
		}
		write(t, dir, fmt.Sprintf("d%d/e%d/f%03d.txt", i%5, i%3, i), b.String())
	}
	write(t, dir, "d0/big.txt", strings.Repeat("needle in a long line of hay "+strings.Repeat("x", 200)+"\n", 400))
}

// TestR6GrepInParallelSaysWhatTheWalkSays: with workers, Grep's output is
// byte for byte the one-file-at-a-time walk's, in every mode, with context
// lines, and where head_limit or MaxOutput cut it.
func TestR6GrepInParallelSaysWhatTheWalkSays(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(p string) bool { return !strings.Contains(p, "/e2/") }}
	for _, tt := range []struct{ note, in string }{
		{"files with matches", `{"pattern":"needle"}`},
		{"content with line numbers", `{"pattern":"needle \\d+ é","output_mode":"content","-n":true}`},
		{"content with context, groups parted", `{"pattern":"needle 1","output_mode":"content","-C":1,"-n":true}`},
		{"count", `{"pattern":"needle","output_mode":"count"}`},
		{"head_limit cuts", `{"pattern":"needle","output_mode":"content","head_limit":37}`},
		{"MaxOutput cuts", `{"pattern":"hay","output_mode":"content","-B":2}`},
		{"a glob", `{"pattern":"needle","glob":"d1/**/*.txt","output_mode":"count"}`},
		{"bad input: no match", `{"pattern":"absent-word"}`},
	} {
		t.Run(tt.note, func(t *testing.T) {
			searchWorkers = 1
			want := call(t, env, "Grep", tt.in)
			for _, w := range []int{2, 4, 9} {
				searchWorkers = w
				got := call(t, env, "Grep", tt.in)
				if got.Text != want.Text || got.IsError != want.IsError {
					t.Errorf("%d workers:\n%.2000s\nwant (sequential):\n%.2000s", w, got.Text, want.Text)
				}
			}
			searchWorkers = 0
		})
	}
}

// TestR6GrepInParallelStopsWhenCancelled: a search cancelled while its
// workers run stops and says so, in each mode of cancelling.
func TestR6GrepInParallelStopsWhenCancelled(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	defer func() { searchWorkers = 0 }()
	searchWorkers = 4
	for _, tt := range []struct {
		note  string
		after int // files the walk hands on before the cancel; -1: cancelled before the call
	}{
		{"cancelled before the call", -1},
		{"cancelled at the first file", 0},
		{"cancelled mid-walk", 40},
	} {
		t.Run(tt.note, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.after < 0 {
				cancel()
			}
			seen := 0
			env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(string) bool {
				if seen == tt.after {
					cancel()
				}
				seen++
				return true
			}}
			tool, _ := Lookup("Grep")
			r := tool.Run(ctx, env, input(t, `{"pattern":"needle 7","output_mode":"content"}`))
			if !r.IsError || !strings.Contains(strings.ToLower(r.Text), "cancel") {
				t.Errorf("a cancelled Grep gave:\n%.500s", r.Text)
			}
			if tt.after >= 0 && seen > tt.after+2 {
				t.Errorf("the walk went on for %d files after the cancel", seen-tt.after-1)
			}
		})
	}
}

// TestR6GlobInParallelSaysWhatTheWalkSays: with directories read ahead by
// workers, Glob's result (text and structured) is the sequential walk's,
// pruned directories and the note included.
func TestR6GlobInParallelSaysWhatTheWalkSays(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	write(t, env.Workdir, "d1/e0/deep/er/x.txt", "x\n")
	write(t, env.Workdir, "d1/e0/.hid/y.txt", "y\n")
	write(t, env.Workdir, `d2/e1/a[b]*/z.txt`, "z\n")
	defer func() { searchWorkers = 0 }()
	reaches := func(dir string) bool { return !strings.Contains(dir+"/", "/e2/") && !strings.HasSuffix(dir, "/d3") }
	for _, tt := range []struct {
		note, in string
		scope    *tools.Scope
	}{
		{"anywhere", `{"pattern":"**/*.txt"}`, nil},
		{"one directory", `{"pattern":"d1/e0/*.txt"}`, nil},
		{"a segment glob in between", `{"pattern":"d*/e1/*"}`, nil},
		{"braces", `{"pattern":"{d0,d4}/**/f0*.txt"}`, nil},
		{"an escape", `{"pattern":"d2/e1/a\\[b\\]\\*/*"}`, nil},
		{"a ** in between", `{"pattern":"d1/**/x.txt"}`, nil},
		{"pruned and withheld", `{"pattern":"**/*.txt"}`, &tools.Scope{Anchor: env.Workdir, Reaches: func(d string) bool { return reaches(d) },
			Allows: func(p string) bool { return !strings.Contains(p, "/e2/") && !strings.Contains(p, "f01") }}},
		{"bad input: no match", `{"pattern":"**/*.none"}`, nil},
	} {
		t.Run(tt.note, func(t *testing.T) {
			env.Scope = tt.scope
			searchWorkers = 1
			want := call(t, env, "Glob", tt.in)
			if want.IsError {
				t.Fatalf("the sequential Glob failed: %s", want.Text)
			}
			for _, w := range []int{2, 4, 9} {
				searchWorkers = w
				got := call(t, env, "Glob", tt.in)
				if got.Text != want.Text || got.IsError != want.IsError || fmt.Sprint(got.Structured) != fmt.Sprint(want.Structured) {
					t.Errorf("%d workers:\n%.2000s\nwant (sequential):\n%.2000s", w, got.Text, want.Text)
				}
			}
		})
	}
}

// TestR6SearchesInParallelStopWhenCancelled: a Glob or Grep cancelled while
// its workers read ahead stops and says so.
func TestR6SearchesInParallelStopWhenCancelled(t *testing.T) {
	env := session(t)
	genTree(t, env.Workdir, 150)
	defer func() { searchWorkers = 0 }()
	searchWorkers = 4
	for _, tool := range []string{"Glob", "Grep"} {
		for _, after := range []int{-1, 0, 40} {
			t.Run(fmt.Sprintf("%s cancelled after %d", tool, after), func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if after < 0 {
					cancel()
				}
				var mu sync.Mutex
				seen := 0
				env.Scope = &tools.Scope{Anchor: env.Workdir, Allows: func(string) bool {
					mu.Lock()
					defer mu.Unlock()
					if seen == after {
						cancel()
					}
					seen++
					return true
				}}
				in := `{"pattern":"**/*.txt"}`
				if tool == "Grep" {
					in = `{"pattern":"needle"}`
				}
				tl, _ := Lookup(tool)
				r := tl.Run(ctx, env, input(t, in))
				if !r.IsError || !strings.Contains(strings.ToLower(r.Text), "cancel") {
					t.Errorf("a cancelled %s gave:\n%.500s", tool, r.Text)
				}
			})
		}
	}
}

// TestR6LookAheadListsWhatTheWalkLists: a walk through lookAhead visits
// what the plain walk visits, in its order; the workers answered the
// directories want admits, and read none it does not.
func TestR6LookAheadListsWhatTheWalkLists(t *testing.T) {
	tree := fstest.MapFS{}
	for i := range 60 {
		tree[fmt.Sprintf("d%d/e%d/f%d.txt", i%4, i%5, i)] = &fstest.MapFile{Data: []byte("x")}
	}
	tree["skip/deep/x.txt"] = &fstest.MapFile{Data: []byte("x")}
	walk := func(fsys fs.FS) []string {
		var seen []string
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if d != nil && d.IsDir() && p == "skip" {
				return fs.SkipDir
			}
			seen = append(seen, p)
			return err
		})
		return seen
	}
	want := walk(tree)
	for _, n := range []int{2, 4, 9} {
		var mu sync.Mutex
		var asked []string
		ahead, stop := lookAhead(context.Background(), tree, n, func(dir string) bool {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, dir)
			return !strings.HasPrefix(dir, "skip")
		})
		got := walk(ahead)
		a := ahead.(*aheadFS)
		stop()
		if !slices.Equal(got, want) {
			t.Errorf("%d workers: the walk visited\n%v\nwant\n%v", n, got, want)
		}
		if a.served == 0 || a.readAhead != a.served {
			t.Errorf("%d workers: %d listings read ahead, %d of them served to the walk; want all of them, and some", n, a.readAhead, a.served)
		}
		if len(asked) < 20 {
			t.Errorf("%d workers: want was asked about %d directories only", n, len(asked))
		}
	}
	f, stop := lookAhead(context.Background(), tree, 1, nil)
	defer stop()
	if _, ahead := f.(*aheadFS); ahead {
		t.Error("one worker must be the walk alone")
	}
}

// TestR6WorkersFromTheMachine: the walk alone on up to two processors,
// where workers were measured not to pay; more, bounded, above; a fixed
// count wins.
func TestR6WorkersFromTheMachine(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer func() { searchWorkers = 0 }()
	for _, tc := range []struct {
		note               string
		procs, fixed, want int
	}{
		{"one processor", 1, 0, 1},
		{"two processors", 2, 0, 1},
		{"three processors", 3, 0, 3},
		{"many processors, bounded", 64, 0, maxWorkers},
		{"a fixed count", 2, 4, 4},
	} {
		runtime.GOMAXPROCS(tc.procs)
		searchWorkers = tc.fixed
		if got := workers(); got != tc.want {
			t.Errorf("%s: %d workers, want %d", tc.note, got, tc.want)
		}
	}
}

// TestR6GrepReadsPlainFilesAsTheyAre: a file reached through no link is
// opened raw (openPlain) with its size; a link, a FIFO, a file of stated
// size 0, a secret of the gateway's and a path outside the anchor take
// open's way, and Grep still finds what a link named leads to, skips the
// secret and never waits on the FIFO.
func TestR6GrepReadsPlainFilesAsTheyAre(t *testing.T) {
	env := session(t)
	w := env.Workdir
	write(t, w, "a.txt", "needle a\n")
	write(t, w, "sub/b.txt", "hay\nneedle b\n")
	write(t, w, "e.txt", "")
	write(t, w, "k.txt", "needle secret\n")
	sandbox.Conceal(filepath.Join(w, "k.txt"))
	if err := os.Symlink("a.txt", filepath.Join(w, "l.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(w, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.Scope = &tools.Scope{Anchor: w}
	a, err := openAnchor(env)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, tc := range []struct {
		note string
		name string
		size int64 // 0: not opened raw
	}{
		{"a plain file", "a.txt", 9},
		{"a plain file below", "sub/b.txt", 13},
		{"a link", "l.txt", 0},
		{"a FIFO", "p", 0},
		{"a file of size 0", "e.txt", 0},
		{"a secret of the gateway's", "k.txt", 0},
		{"bad input: outside the anchor", "../x", 0},
	} {
		f, size, ok := a.openPlain(filepath.Join(w, tc.name))
		if ok {
			f.Close()
		}
		if ok != (tc.size > 0) || size != tc.size {
			t.Errorf("%s: openPlain gave %v with size %d, want size %d", tc.note, ok, size, tc.size)
		}
	}
	r := call(t, env, "Grep", `{"pattern":"needle","output_mode":"content"}`)
	wantResult(t, r, false, "a.txt:needle a", "sub/b.txt:needle b")
	if strings.Contains(r.Text, "secret") {
		t.Errorf("Grep showed a secret of the gateway's:\n%s", r.Text)
	}
	// The walk passes a link by, as rg does; named, it is searched.
	wantResult(t, call(t, env, "Grep", `{"pattern":"needle","path":"l.txt","output_mode":"content"}`), false, "needle a")
}

// countingFS counts the listings it makes.
type countingFS struct {
	fs.FS
	reads map[string]int
}

func (c *countingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.reads[name]++
	return fs.ReadDir(c.FS, name)
}

// TestR6GlobListsADirectoryOnceForTwoAsksInARow: the directory listed last
// is listed again from memory (doublestar asks twice in a row for
// **/x), each ask still a step, what one caller changes in its listing
// not the next one's; another directory in between lists anew.
func TestR6GlobListsADirectoryOnceForTwoAsksInARow(t *testing.T) {
	tree := fstest.MapFS{"a/x": {}, "a/y": {}, "b/z": {}}
	under := &countingFS{FS: tree, reads: map[string]int{}}
	c := &ctxFS{ctx: context.Background(), FS: under}
	first, _ := c.ReadDir("a")
	first[0] = nil
	second, err := c.ReadDir("a")
	if err != nil || len(second) != 2 || second[0] == nil || second[0].Name() != "x" {
		t.Fatalf("the second listing of a: %v, %v", second, err)
	}
	c.ReadDir("b")
	c.ReadDir("a")
	if under.reads["a"] != 2 || under.reads["b"] != 1 || c.steps != 4 {
		t.Errorf("listings made %v, steps %d; want a twice, b once, 4 steps", under.reads, c.steps)
	}
	if _, err := c.ReadDir("none"); err == nil {
		t.Error("bad input: a missing directory listed without an error")
	}
	if _, err := c.ReadDir("none"); err == nil || under.reads["none"] != 1 {
		t.Errorf("bad input: a missing directory asked twice: %v, listed %d times", err, under.reads["none"])
	}
	env := session(t)
	genTree(t, env.Workdir, 30)
	wantResult(t, call(t, env, "Glob", `{"pattern":"**/f00*.txt"}`), false, "d0/e0/f000.txt", "d4/e0/f009.txt")
}
