package builtin

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/bmatcuk/doublestar/v4"

	"aimon.dev/gw/tools"
)

// GrepInput is the input of Grep; it mirrors #GrepInput. The wire names -i,
// -n, -A, -B and -C are declared, not derived (rule S12).
type GrepInput struct {
	Pattern    string  `json:"pattern"`
	Path       *string `json:"path"`
	Glob       *string `json:"glob"`
	OutputMode *string `json:"output_mode"`
	IgnoreCase *bool   `json:"-i"`
	LineNums   *bool   `json:"-n"`
	After      *int    `json:"-A"`
	Before     *int    `json:"-B"`
	Context    *int    `json:"-C"`
	HeadLimit  *int    `json:"head_limit"`
}

// Grep output modes.
const (
	ModeContent = "content"
	ModeFiles   = "files_with_matches"
	ModeCount   = "count"
)

// maxGrepLine is how much of one line Grep searches; the rest of a longer line is not seen.
var maxGrepLine = 1 << 20 // a variable for the tests alone

// skipDirs are version-control directories Grep does not descend into.
var skipDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// Grep searches file contents with an RE2 regular expression. It skips binary
// files and version-control directories. Concurrent-safe; honours cancellation.
type Grep struct{}

// grep is one validated search.
type grep struct {
	env           *tools.Env
	a             *anchor
	skipped       int // files below the root the surface may not read
	prunedDirs    int // directories below the root no allow entry reaches
	re            *regexp.Regexp
	root          string
	many          bool // searching a directory: prefix lines with the file
	glob          string
	mode          string
	lineNums      bool
	before, after int
	limit         int // 0: no limit

	prefix  []byte // what every match begins with; nil when nothing is
	literal bool   // the pattern is prefix alone
	// find is where in a buffer the first line that can match is: one
	// that holds a literal every match holds; nil when none is known.
	find func(b []byte) int

	out     strings.Builder
	items   int
	cut     string // why the output stopped early
	matched bool
}

// errStop ends the walk once the output is full.
var errStop = errors.New("grep output full")

// Run searches.
func (Grep) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p GrepInput
	if r, ok := bind(env, "Grep", in, &p); !ok {
		return r
	}
	g, r, ok := newGrep(env, &p)
	if !ok {
		return r
	}
	env.Logger().Debug("Grep", "pattern", p.Pattern, "root", g.root, "mode", g.mode)

	a, err := openAnchor(env)
	if err != nil {
		return openFailure(env, "Grep", g.root, err)
	}
	defer a.Close()
	g.a = a
	ctx, cancel := bounded(ctx)
	defer cancel()
	fi, rel, err := a.stat(g.root)
	switch {
	case errors.Is(err, errEscapes):
		return a.escaped("Grep", g.root)
	case err != nil:
		return openFailure(env, "Grep", g.root, err)
	case fi.IsDir():
		g.many = true
		err = g.walk(ctx, rel, workers())
	case !fi.Mode().IsRegular():
		return refuse(env, "Grep", "%s is not a regular file or a directory (it is a %s); Grep searches files and directories only.", g.root, fileKind(fi.Mode()))
	default:
		s := newSearcher(g, g)
		err = s.file(ctx, g.root)
		s.release()
	}
	if r, stopped := overBudget(env, "Grep", ctx, err, "a narrower path or glob"); stopped {
		return r
	}
	switch {
	case err != nil && !errors.Is(err, errStop):
		if r, ok := anchorFailure(env, "Grep", err); ok {
			return r
		}
		return fail(env, "Grep", err, "Could not search %s: %v.", g.root, err)
	case !g.matched:
		return tools.OK(fmt.Sprintf("No matches found for %s in %s.%s", quote(p.Pattern), g.root, skippedNote(g.skipped, g.prunedDirs)))
	}
	if g.cut != "" {
		g.out.WriteString(g.cut)
	}
	return tools.OK(strings.TrimSuffix(g.out.String(), "\n") + skippedNote(g.skipped, g.prunedDirs))
}

// newGrep checks the parameters that the schema cannot (range, syntax) and
// the ones the gate may have let through in warn mode (the mode's enum).
func newGrep(env *tools.Env, p *GrepInput) (*grep, tools.Result, bool) {
	g := &grep{mode: ModeFiles, env: env}
	if p.OutputMode != nil {
		g.mode = *p.OutputMode
	}
	switch g.mode {
	case ModeContent, ModeFiles, ModeCount:
	default:
		return nil, refuse(env, "Grep", "Parameter 'output_mode' must be one of \"content\", \"files_with_matches\" or \"count\", got %s.", quote(g.mode)), false
	}
	for _, c := range []struct {
		name string
		v    *int
		dst  *int
	}{{"-A", p.After, &g.after}, {"-B", p.Before, &g.before}, {"-C", p.Context, nil}} {
		if c.v != nil && *c.v < 0 {
			return nil, refuse(env, "Grep", "Parameter '%s' must be 0 or more lines, got %d.", c.name, *c.v), false
		}
	}
	// -C sets both sides; an explicit -A or -B wins for its side, as in ripgrep.
	if p.Context != nil {
		g.after, g.before = *p.Context, *p.Context
	}
	if p.After != nil {
		g.after = *p.After
	}
	if p.Before != nil {
		g.before = *p.Before
	}
	// More lines of context than the output can hold would only fill memory.
	g.before, g.after = min(g.before, MaxOutput), min(g.after, MaxOutput)
	if p.HeadLimit != nil {
		if *p.HeadLimit < 1 {
			return nil, refuse(env, "Grep", "Parameter 'head_limit' must be 1 or more, got %d.", *p.HeadLimit), false
		}
		g.limit = *p.HeadLimit
	}
	g.lineNums = p.LineNums != nil && *p.LineNums

	expr := p.Pattern
	if p.IgnoreCase != nil && *p.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, refuse(env, "Grep", "Parameter 'pattern' %s is not a valid RE2 regular expression: %v.", quote(p.Pattern), unprefix(err)), false
	}
	g.re = re
	if prefix, complete := re.LiteralPrefix(); prefix != "" && grepFast {
		// Complete is also said of an anchored ^abc$: only a pattern that
		// is its own literal is searched as one.
		g.prefix, g.literal = []byte(prefix), complete && regexp.QuoteMeta(prefix) == expr
	}
	if grepFast {
		g.find = prefilter(expr, g.prefix)
	}

	if p.Glob != nil {
		g.glob = filepath.ToSlash(*p.Glob)
		if g.glob == "" || !doublestar.ValidatePattern(g.glob) {
			return nil, refuse(env, "Grep", "Parameter 'glob' %s is not a valid glob; use for example *.go or **/*.{ts,tsx}.", quote(*p.Glob)), false
		}
	}

	if p.Path != nil {
		g.root, err = resolve(env, "path", *p.Path)
	} else if g.root = workdir(env); g.root == "" {
		err = errors.New("Parameter 'path' was not given and there is no working directory to search; give an absolute path.")
	}
	if err != nil {
		return nil, refuse(env, "Grep", "%s", err), false
	}
	return g, tools.Result{}, true
}

// unprefix drops the "error parsing regexp: " that regexp puts before its reason.
func unprefix(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// walk searches every regular file under rel (relative to the anchor)
// that passes the glob and that the surface may read (rule R6): the walk
// goes through the anchored root, so no symbolic link takes it out. With
// more than one worker the files are searched in parallel while one
// goroutine walks (walkParallel).
func (g *grep) walk(ctx context.Context, rel string, workers int) error {
	if workers > 1 {
		return g.walkParallel(ctx, rel, workers)
	}
	s := newSearcher(g, g)
	defer s.release()
	return g.walkFiles(ctx, rel, 1, func(path string) error { return s.file(ctx, path) })
}

// walkFiles calls search with each file walk searches, in the order of
// the walk; with more than one worker, directories are read ahead
// (lookAhead).
func (g *grep) walkFiles(ctx context.Context, rel string, workers int, search func(path string) error) error {
	fsys, err := newSearchFS(g.a, rel, nil)
	if err != nil {
		return err
	}
	ahead, stop := lookAhead(ctx, fsys, workers, func(dir string) bool {
		return !skipDirs[path.Base(dir)] && g.a.mayAllowBelow(filepath.Join(g.root, filepath.FromSlash(dir)))
	})
	defer stop()
	walked := &ctxFS{ctx: ctx, FS: ahead}
	return fs.WalkDir(walked, ".", func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Each file searched is a step, as each directory read is.
		if walked.steps++; walked.steps > maxSearchSteps {
			return errSteps
		}
		path := filepath.Join(g.root, filepath.FromSlash(p)) // as the model named it
		if err != nil {
			if p == "." {
				return err
			}
			// An unreadable directory or file is skipped, not fatal.
			g.env.Logger().Debug("Grep skips", "path", path, "cause", err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if p != "." && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			// A directory no allow entry reaches is not read at all.
			if p != "." && !g.a.mayAllowBelow(path) {
				g.prunedDirs++
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !g.globMatches(path) {
			return nil
		}
		if !g.a.allows(path) {
			g.skipped++
			return nil
		}
		return search(path)
	})
}

// walkParallel is walk with files searched by workers, each with buffers
// of its own, while this goroutine walks. Each file's results are kept
// apart (fileOut) and replayed onto the output in the order of the walk,
// so that the output, head_limit and MaxOutput cut it as the sequential
// walk does, byte for byte; the step limit stays the walk's own.
func (g *grep) walkParallel(ctx context.Context, rel string, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A job keeps what the walk had left out before it: where the replay
	// stops, the note counts what the sequential walk would have.
	type job struct {
		path            string
		done            chan *fileOut
		skipped, pruned int
	}
	jobs := make(chan job, workers)
	// What the replay waits for, in walk order; its room bounds how many
	// files' results are held ahead of the replay.
	order := make(chan job, 4*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := newSearcher(g, nil)
			defer s.release()
			for j := range jobs {
				o := &fileOut{limit: g.limit}
				s.out = o
				o.err = s.file(ctx, j.path)
				j.done <- o
			}
		}()
	}
	var replayErr error
	var stopped job
	replayed := make(chan struct{})
	go func() {
		defer close(replayed)
		for j := range order {
			if replayErr != nil {
				continue // drained: the output is final
			}
			select {
			case o := <-j.done:
				replayErr = g.replay(o)
			case <-ctx.Done():
				replayErr = ctx.Err()
			}
			if replayErr != nil {
				stopped = j
				cancel()
			}
		}
	}()
	err := g.walkFiles(ctx, rel, workers, func(path string) error {
		j := job{path: path, done: make(chan *fileOut, 1), skipped: g.skipped, pruned: g.prunedDirs}
		select {
		case order <- j:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(jobs)
	close(order)
	wg.Wait()
	<-replayed
	if replayErr != nil {
		g.skipped, g.prunedDirs = stopped.skipped, stopped.pruned
	}
	return cmp.Or(replayErr, err)
}

// sink is where a search puts a file's results: the output itself, or a
// fileOut that keeps them for the replay.
type sink interface {
	emit(s string) error    // a result (a line, a file, a count)
	emitRaw(s string) error // text that is not a result
	parted() error          // a group separator before a file's first group, when results came before it
	hit()                   // a line matched
}

// fileOut is one file's results, kept for the replay. It stops the file's
// search only where the replay is sure to stop too: past head_limit
// results, or past MaxOutput bytes of its own.
type fileOut struct {
	ops          []outOp
	items, bytes int
	limit        int
	matched      bool
	err          error
}

// outOp is one call of a sink: text and its kind ('r' emit, 'x' emitRaw,
// '-' parted).
type outOp struct {
	s    string
	kind byte
}

func (o *fileOut) emit(s string) error {
	o.ops = append(o.ops, outOp{s, 'r'})
	o.items++
	o.bytes += len(s)
	return o.full()
}

func (o *fileOut) emitRaw(s string) error {
	o.ops = append(o.ops, outOp{s, 'x'})
	o.bytes += len(s)
	return o.full()
}

func (o *fileOut) parted() error {
	o.ops = append(o.ops, outOp{kind: '-'})
	return nil
}

func (o *fileOut) hit() { o.matched = true }

func (o *fileOut) full() error {
	if o.limit > 0 && o.items > o.limit || o.bytes > MaxOutput {
		return errStop
	}
	return nil
}

// replay puts a file's kept results onto the output, as its search would
// have put them there itself.
func (g *grep) replay(o *fileOut) error {
	if o.matched {
		g.hit()
	}
	for _, op := range o.ops {
		var err error
		switch op.kind {
		case 'r':
			err = g.emit(op.s)
		case 'x':
			err = g.emitRaw(op.s)
		default:
			err = g.parted()
		}
		if err != nil {
			return err
		}
	}
	return o.err
}

// searcher searches files one at a time for a grep, into out, with
// buffers of its own reused from file to file.
type searcher struct {
	g   *grep
	out sink
	buf []byte // the file being searched
	br  *bufio.Reader
}

// newSearcher is a searcher with a buffer from bufPool; release gives it
// back.
func newSearcher(g *grep, out sink) *searcher {
	return &searcher{g: g, out: out, buf: *bufPool.Get().(*[]byte)}
}

// release gives the searcher's buffer back to bufPool, unless it grew
// past maxPooled.
func (s *searcher) release() {
	if cap(s.buf) <= maxPooled {
		b := s.buf[:0]
		bufPool.Put(&b)
	}
	s.buf = nil
}

// bufPool keeps file buffers between searches: growing a fresh one to
// each call's largest file was two fifths of Grep's allocation (issue 32).
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooled is the largest buffer bufPool keeps.
const maxPooled = 1 << 20

// skippedNote says that a search left out files the surface may not read,
// and directories it did not open because no allow entry reaches them.
func skippedNote(files, dirs int) string {
	var what []string
	if files > 0 {
		what = append(what, plural(files, "file"))
	}
	switch {
	case dirs == 1:
		what = append(what, "1 directory")
	case dirs > 1:
		what = append(what, fmt.Sprintf("%d directories", dirs))
	}
	if len(what) == 0 {
		return ""
	}
	verb, them := "were", "them"
	if files+dirs == 1 {
		verb, them = "was", "it"
	}
	return fmt.Sprintf("\n[%s below the search path %s not searched: this surface may not read %s.]", strings.Join(what, " and "), verb, them)
}

// globMatches applies the glob to the file's name, or to its path under root
// when the glob has a slash.
func (g *grep) globMatches(path string) bool {
	if g.glob == "" {
		return true
	}
	name := filepath.Base(path)
	if strings.Contains(g.glob, "/") {
		rel, err := filepath.Rel(g.root, path)
		if err != nil {
			return false
		}
		name = filepath.ToSlash(rel)
	}
	return doublestar.MatchUnvalidated(g.glob, name)
}

// file searches one file. Unreadable and binary files are skipped.
func (s *searcher) file(ctx context.Context, path string) error {
	g := s.g
	f, size, err := s.open(path)
	if err != nil {
		if !g.many {
			return err
		}
		g.env.Logger().Debug("Grep skips", "path", path, "cause", err)
		return nil
	}
	defer f.Close()
	src, binary := s.lines(f, size)
	if binary {
		g.env.Logger().Debug("Grep skips a binary file", "path", path)
		return nil
	}
	// Without context lines, the lines before the next that holds a
	// literal every match holds cannot match: skipped, only counted.
	skip := g.before == 0 && g.find != nil

	var (
		n       int      // current line number
		count   int      // matching lines
		ring    []string // the last g.before lines
		after   int      // context lines still to print after a match
		printed int      // number of the last line printed, 0 for none
	)
	for step := 0; ; step++ {
		if step%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if skip && after == 0 {
			skipped, more := src.skipTo(g.find)
			if !more {
				break
			}
			n += skipped
		}
		raw, err := src.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !g.many {
				return err
			}
			g.env.Logger().Debug("Grep skips", "path", path, "cause", err)
			break
		}
		n++
		hit := g.match(raw)
		if hit {
			count++
			s.out.hit()
		}
		if g.mode == ModeFiles && hit {
			return s.out.emit(path + "\n")
		}
		if g.mode != ModeContent {
			continue
		}
		switch {
		case hit:
			// With context on, non-adjacent groups are parted by "--", as in grep.
			if g.before > 0 || g.after > 0 {
				var err error
				switch {
				case printed > 0 && n-len(ring) > printed+1:
					err = s.out.emitRaw("--\n")
				case printed == 0:
					err = s.out.parted()
				}
				if err != nil {
					return err
				}
			}
			for i, l := range ring {
				if err := s.out.emit(g.format(path, n-len(ring)+i, '-', []byte(l))); err != nil {
					return err
				}
			}
			ring = ring[:0]
			if err := s.out.emit(g.format(path, n, ':', raw)); err != nil {
				return err
			}
			printed, after = n, g.after
		case after > 0:
			after--
			if err := s.out.emit(g.format(path, n, '-', raw)); err != nil {
				return err
			}
			printed = n
		case g.before > 0:
			if len(ring) == g.before {
				ring = ring[1:] // append reallocates in time, so this stays amortized O(1)
			}
			// Kept already cut: cutting again at print time changes nothing.
			ring = append(ring, cutLine(string(raw)))
		}
	}
	if g.mode == ModeCount && count > 0 {
		return s.out.emit(fmt.Sprintf("%s:%d\n", path, count))
	}
	return nil
}

// format renders one content line: path, line number, text, ripgrep style
// (':' after a match's prefix, '-' after a context line's).
func (g *grep) format(path string, n int, sep byte, line []byte) string {
	var b strings.Builder
	if g.many {
		b.WriteString(path)
		b.WriteByte(sep)
	}
	if g.lineNums {
		fmt.Fprintf(&b, "%d%c", n, sep)
	}
	if cut, ok := cutAt(line); ok {
		b.Write(line[:cut])
		b.WriteString("...")
	} else {
		b.Write(line)
	}
	b.WriteByte('\n')
	return b.String()
}

// emit adds one result (a line, a file, a count), stopping at head_limit and MaxOutput.
func (g *grep) emit(s string) error {
	if g.limit > 0 && g.items == g.limit {
		g.cut = fmt.Sprintf("[Results cut at head_limit %d; there are more.]", g.limit)
		return errStop
	}
	g.items++
	return g.emitRaw(s)
}

// parted adds the separator before a file's first group when results
// came before it.
func (g *grep) parted() error {
	if g.items > 0 {
		return g.emitRaw("--\n")
	}
	return nil
}

func (g *grep) hit() { g.matched = true }

// emitRaw adds text that is not a result (a group separator).
func (g *grep) emitRaw(s string) error {
	if g.out.Len()+len(s) > MaxOutput {
		g.cut = fmt.Sprintf("[Output cut at %d bytes; narrow the search, or use head_limit.]", MaxOutput)
		return errStop
	}
	g.out.WriteString(s)
	return nil
}

// match reports whether a line matches: a literal pattern by a byte
// search, as fast as memchr, anything else by the regular expression.
func (g *grep) match(line []byte) bool {
	if g.literal {
		return bytes.Contains(line, g.prefix)
	}
	return g.re.Match(line)
}

// grepFast turns off holding files whole and the literal prefix, for the
// test that holds them to searching line by line.
var grepFast = true

// maxHeld is the largest file Grep holds whole in its buffer; a larger
// one is read line by line.
var maxHeld int64 = 8 << 20 // a variable for the tests alone

// open opens a file to search: where the anchor opens it plainly
// (openPlain), a descriptor read as it is, with its size; else an
// os.File, checked on its descriptor to be a regular file (a FIFO swapped
// in is skipped, not read) and bound by a read deadline, of size 0
// (unknown).
func (s *searcher) open(path string) (io.ReadCloser, int64, error) {
	if f, size, ok := s.g.a.openPlain(path); ok {
		return f, size, nil
	}
	f, err := s.g.a.open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	bound(f)
	return f, 0, nil
}

// lines is the source of a file's lines, and whether it is binary (a NUL
// in its first sniffLen bytes). A file of up to maxHeld bytes is read
// whole into the buffer the search reuses, so that a literal is found in
// it with one byte search rather than line by line (issue 32); a larger
// one goes through one reused bufio.Reader. A file of known size is read
// to that size, in one read where the buffer holds it, without the read
// that would only say it ended.
func (s *searcher) lines(f io.Reader, size int64) (*lineSource, bool) {
	s.buf = s.buf[:0]
	if size > 0 && size <= maxHeld && int(size) > cap(s.buf) {
		// Grown at least twofold, so that a walk's growing files
		// reallocate it a few times only.
		s.buf = slices.Grow(s.buf, max(int(size), 2*cap(s.buf)))
	}
	var err error
	whole := false
	for grepFast && int64(len(s.buf)) <= maxHeld {
		if size > 0 && int64(len(s.buf)) == size {
			whole = true
			break
		}
		if len(s.buf) == cap(s.buf) {
			s.buf = append(s.buf, make([]byte, max(cap(s.buf), 16<<10))...)[:len(s.buf)]
		}
		var k int
		k, err = f.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+k]
		if err != nil {
			whole = true
			break
		}
	}
	if !whole {
		// Not held (too large, or grepFast off): what was read, then the rest.
		r := io.MultiReader(bytes.NewReader(s.buf), f)
		if s.br == nil {
			s.br = bufio.NewReaderSize(r, 64*1024)
		} else {
			s.br.Reset(r)
		}
		head, _ := s.br.Peek(sniffLen)
		return &lineSource{br: s.br}, bytes.IndexByte(head, 0) >= 0
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return &lineSource{rest: s.buf, err: err}, bytes.IndexByte(s.buf[:min(len(s.buf), sniffLen)], 0) >= 0
}

// lineSource yields a file's lines without their line endings, each cut
// at maxGrepLine bytes, as readLine does.
type lineSource struct {
	br      *bufio.Reader // a file read line by line
	scratch []byte
	rest    []byte // a file held whole: what is left of it
	err     error  // a held file's read error, given after its lines
}

func (l *lineSource) next() ([]byte, error) {
	if l.br != nil {
		line, err := readLine(l.br, l.scratch[:0], maxGrepLine)
		l.scratch = line
		return line, err
	}
	if len(l.rest) == 0 {
		return nil, cmp.Or(l.err, io.EOF)
	}
	line := l.rest
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line, l.rest = line[:i], line[i+1:]
	} else {
		l.rest = nil
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line[:min(len(line), maxGrepLine)], nil
}

// skipTo drops the lines before the first where find finds and returns how
// many it dropped; more is false when no line left holds it. A file read
// line by line skips nothing.
func (l *lineSource) skipTo(find func([]byte) int) (skipped int, more bool) {
	if l.br != nil {
		return 0, true
	}
	i := find(l.rest)
	if i < 0 {
		return 0, l.err != nil // the error is still to be given
	}
	start := bytes.LastIndexByte(l.rest[:i], '\n') + 1
	skipped = bytes.Count(l.rest[:start], []byte{'\n'})
	l.rest = l.rest[start:]
	return skipped, true
}
