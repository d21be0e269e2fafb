package builtin

import (
	"context"
	"io/fs"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// searchFS is the tree below a search's root as Grep and Glob walk it. A
// directory is listed through a descriptor opened beneath the anchor in one
// openat2, where the root's FS opens each component on the way and stats
// every entry it lists (issue 32: a quarter of Glob's time); anything else,
// and every directory when the anchor was not opened plain, takes the
// root's way (rule R6).
type searchFS struct {
	fs.FS // the root's, at rel
	a     *anchor
	rel   string // the search root, relative to the anchor
	// stat, when set, says which regular files' entries carry their
	// FileInfo, stated on the directory's descriptor: for Glob, which
	// shows modification times, the files its pattern matches.
	stat func(name string) bool
}

// newSearchFS is the tree at rel, relative to the anchor.
func newSearchFS(a *anchor, rel string, stat func(name string) bool) (*searchFS, error) {
	sub, err := fs.Sub(a.root.FS(), path.Clean(strings.ReplaceAll(rel, "\\", "/")))
	if err != nil {
		return nil, err
	}
	return &searchFS{FS: sub, a: a, rel: rel, stat: stat}, nil
}

// ReadDir lists the directory name, sorted by name as fs.ReadDir does.
func (s *searchFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	var stat func(string) bool
	if s.stat != nil {
		stat = func(entry string) bool { return s.stat(path.Join(name, entry)) }
	}
	ents, err, done := s.a.listBeneath(path.Join(s.rel, name), stat)
	if !done {
		return fs.ReadDir(s.FS, name)
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// Stat stats name without opening it: opening a FIFO blocks until a
// writer comes (fs.Stat of an FS without Stat opens; fs.Sub's has none).
func (s *searchFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return s.a.root.Stat(path.Join(s.rel, name))
}

// statted is a directory entry with its FileInfo known.
type statted struct {
	fs.DirEntry
	info fs.FileInfo
}

func (e statted) Info() (fs.FileInfo, error) { return e.info, nil }

// fileInfo is what a search needs of a regular file it found: its
// modification time; the entry and its FileInfo know the rest.
func fileInfo(fsys fs.FS, name string, d fs.DirEntry) (fs.FileInfo, error) {
	if e, ok := d.(statted); ok && e.info != nil {
		return e.info, nil
	}
	return fs.Stat(fsys, name) // follows a symbolic link, to drop links to directories
}

// searchWorkers fixes how many goroutines a search reads with; 0 lets
// workers choose from the machine.
var searchWorkers = 0

// workers is how many goroutines a search reads with: the walk alone on
// up to two processors, where BenchmarkSearchWorkers measured workers
// costing 1.0-1.4x the processor time and wall time of the walk alone
// (issue 32; on one CPU they cannot overlap anything); GOMAXPROCS, at
// most maxWorkers, above.
func workers() int {
	if searchWorkers > 0 {
		return searchWorkers
	}
	if n := runtime.GOMAXPROCS(0); n > 2 {
		return min(n, maxWorkers)
	}
	return 1
}

// maxWorkers bounds a search's workers: more read no faster from one disk.
const maxWorkers = 8

// aheadFS lists directories ahead of a walk with workers, so that
// directory reads overlap: each directory the walk lists is answered from
// what a worker read, or read there and then, so the walk (its order, its
// steps, what it prunes) is the sequential one's. Only directories the
// walk may enter are read ahead: those want admits, below one it listed.
type aheadFS struct {
	fs.FS // the searchFS
	ctx   context.Context
	want  func(dir string) bool
	todo  chan *listing
	wg    sync.WaitGroup

	mu   sync.Mutex
	read map[string]*listing
	// Listings handed to the workers and listings the walk took from
	// them, for the tests.
	readAhead, served int
}

// listing is one directory read ahead; done is closed once it is.
type listing struct {
	dir  string
	done chan struct{}
	ents []fs.DirEntry
	err  error
}

// lookAhead starts n workers reading ahead for a walk of fsys; stop ends
// them. With n of 1 or less it is fsys itself.
func lookAhead(ctx context.Context, fsys fs.FS, n int, want func(dir string) bool) (fs.FS, func()) {
	if n <= 1 {
		return fsys, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &aheadFS{FS: fsys, ctx: ctx, want: want, todo: make(chan *listing, 64*n), read: map[string]*listing{}}
	for range n {
		a.wg.Add(1)
		go a.work()
	}
	return a, func() {
		cancel()
		close(a.todo)
		a.wg.Wait()
	}
}

func (a *aheadFS) work() {
	defer a.wg.Done()
	for l := range a.todo {
		if a.ctx.Err() == nil {
			l.ents, l.err = fs.ReadDir(a.FS, l.dir)
		} else {
			l.err = a.ctx.Err()
		}
		close(l.done)
	}
}

// ReadDir gives the walk the listing of dir, and hands its subdirectories
// to the workers.
func (a *aheadFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	a.mu.Lock()
	l, ok := a.read[dir]
	delete(a.read, dir)
	a.mu.Unlock()
	var ents []fs.DirEntry
	var err error
	if ok {
		select {
		case <-l.done:
		case <-a.ctx.Done():
			return nil, a.ctx.Err()
		}
		ents, err = l.ents, l.err
		a.mu.Lock()
		a.served++
		a.mu.Unlock()
	}
	if !ok {
		ents, err = fs.ReadDir(a.FS, dir)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := path.Join(dir, e.Name())
		if !a.want(sub) {
			continue
		}
		l := &listing{dir: sub, done: make(chan struct{})}
		a.mu.Lock()
		a.read[sub] = l
		a.mu.Unlock()
		select {
		case a.todo <- l:
			a.mu.Lock()
			a.readAhead++
			a.mu.Unlock()
		default: // the workers are behind: the walk reads it itself
			a.mu.Lock()
			delete(a.read, sub)
			a.mu.Unlock()
		}
	}
	return ents, err
}
