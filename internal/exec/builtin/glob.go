package builtin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// GlobInput is the input of Glob; it mirrors #GlobInput.
type GlobInput struct {
	Pattern string  `json:"pattern"`
	Path    *string `json:"path"`
}

// MaxGlobResults caps how many files Glob lists.
const MaxGlobResults = 100

// Glob finds files by a doublestar pattern under a directory, newest first.
// Concurrent-safe; honours cancellation.
type Glob struct{}

// Run finds the files.
func (Glob) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p GlobInput
	if r, ok := bind(env, "Glob", in, &p); !ok {
		return r
	}
	pattern := filepath.ToSlash(p.Pattern)
	switch {
	case pattern == "":
		return refuse(env, "Glob", "Parameter 'pattern' must not be empty; use for example **/*.go.")
	case strings.HasPrefix(pattern, "/"):
		// The permission subject is path, so the pattern may not leave it (rule P4).
		return refuse(env, "Glob", "Parameter 'pattern' %s is absolute; give the directory as 'path' and a pattern relative to it.", quote(p.Pattern))
	case slices.Contains(strings.Split(pattern, "/"), ".."):
		return refuse(env, "Glob", "Parameter 'pattern' %s climbs out of the directory with '..'; give the directory as 'path' instead.", quote(p.Pattern))
	case !doublestar.ValidatePattern(pattern):
		return refuse(env, "Glob", "Parameter 'pattern' %s is not a valid glob; use for example **/*.go or src/*.{ts,tsx}.", quote(p.Pattern))
	case braceAlternatives(pattern) > MaxGlobAlternatives:
		// doublestar walks each expansion of the braces on its own, and
		// passes over the failed opens that bound the walk: counted
		// before it starts, a pattern of {a,b,c} eighteen times is
		// refused here rather than running for hours (rule R8).
		return refuse(env, "Glob", "Parameter 'pattern' %s has more than %d expansions of its {a,b} alternatives, which are searched one by one; give fewer alternatives, or a wildcard such as * or ? in their place.", quote(p.Pattern), MaxGlobAlternatives)
	}
	pattern = collapse(path.Clean(pattern))

	var root string
	var err error
	if p.Path != nil {
		root, err = resolve(env, "path", *p.Path)
	} else if root = workdir(env); root == "" {
		err = fmt.Errorf("Parameter 'path' was not given and there is no working directory to search; give an absolute path.")
	}
	if err != nil {
		return refuse(env, "Glob", "%s", err)
	}
	a, err := openAnchor(env)
	if err != nil {
		return openFailure(env, "Glob", root, err)
	}
	defer a.Close()
	fi, rel, err := a.stat(root)
	if errors.Is(err, errEscapes) {
		return a.escaped("Glob", root)
	}
	if err != nil {
		return openFailure(env, "Glob", root, err)
	}
	if !fi.IsDir() {
		return refuse(env, "Glob", "%s is a file, not a directory; give a directory as 'path'.", root)
	}
	env.Logger().Debug("Glob", "pattern", pattern, "root", root)

	type hit struct {
		path string
		mod  time.Time
	}
	var hits []hit
	skipped := 0
	// The walk goes through the anchored root: no symbolic link leads it
	// out of the directory the call was allowed (rule R6).
	sub, err := newSearchFS(a, rel, func(name string) bool { return doublestar.MatchUnvalidated(pattern, name) })
	if err != nil {
		return fail(env, "Glob", err, "Could not search %s: %v.", root, err)
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	reaches := func(name string) bool {
		return a.mayAllowBelow(filepath.Join(root, filepath.FromSlash(name)))
	}
	// Directories the walk will list are read ahead by workers where
	// they pay: where the pattern may match below them, and an allow
	// entry reaches.
	ahead, stop := lookAhead(ctx, sub, workers(), func(dir string) bool {
		return allow.GlobMayMatchBelow(pattern, dir) && reaches(dir)
	})
	defer stop()
	fsys := &ctxFS{ctx: ctx, FS: ahead, reaches: reaches}
	listed := map[string]string{} // listedAt's
	err = doublestar.GlobWalk(fsys, pattern, func(rel string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Files only: a FIFO, socket or device is no file to read (rule R10).
		info, err := fileInfo(fsys, rel, d)
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		path := filepath.Join(root, filepath.FromSlash(rel))
		if !a.allows(path) || a.withheldAt(path, filepath.Join(a.listedAt(filepath.Dir(path), listed), filepath.Base(path))) != nil {
			skipped++
			return nil
		}
		hits = append(hits, hit{path, info.ModTime()})
		return nil
	}, doublestar.WithFilesOnly(), doublestar.WithNoFollow())
	if fsys.steps > maxSearchSteps {
		err = errSteps // doublestar passes over the failed opens
	}
	if r, stopped := overBudget(env, "Glob", ctx, err, "a narrower pattern or path"); stopped {
		return r
	}
	if err != nil {
		return fail(env, "Glob", err, "Could not search %s for %s: %v.", root, quote(p.Pattern), err)
	}
	if len(hits) == 0 {
		r := tools.OK(fmt.Sprintf("No files found for %s in %s.%s", quote(p.Pattern), root, skippedNote(skipped, len(fsys.pruned))))
		r.Structured = GlobOutput{Files: []string{}}
		return r
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := b.mod.Compare(a.mod); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
	var b strings.Builder
	out := GlobOutput{Files: []string{}, Truncated: len(hits) > MaxGlobResults}
	for _, h := range hits[:min(len(hits), MaxGlobResults)] {
		b.WriteString(h.path + "\n")
		out.Files = append(out.Files, h.path)
	}
	if len(hits) > MaxGlobResults {
		fmt.Fprintf(&b, "[Showing the %d newest of %d files; use a narrower pattern or path to see the rest.]", MaxGlobResults, len(hits))
	}
	r := tools.OK(strings.TrimSuffix(b.String(), "\n") + skippedNote(skipped, len(fsys.pruned)))
	r.Structured = out
	return r
}

// listedAt is where dir, a directory a search listed, really is: dir
// itself when no link is on its way below the anchor. A pattern that names
// a link (l/*) lists the directory it leads to, whose files are judged
// where they are, as Grep's opens judge them (rule P14). seen keeps what
// each directory gave; nothing is looked up when the scope withholds
// nothing.
func (a *anchor) listedAt(dir string, seen map[string]string) string {
	if !a.limited() {
		return dir
	}
	at, ok := seen[dir]
	if !ok {
		at = dir
		if rel, in := a.rel(dir); !in || !a.linkFree(rel) {
			at = sandbox.RealPath(dir)
		}
		seen[dir] = at
	}
	return at
}

// GlobOutput is Glob's structured result; it mirrors #GlobOutput.
type GlobOutput struct {
	Files     []string `json:"files"`
	Truncated bool     `json:"truncated"`
}

// ctxFS fails every Open once ctx is done or the search has opened
// maxSearchSteps files and directories, so that a walk through a large
// tree stops even where no file matches.
// With reaches set, it also fails the open of a directory no allow entry
// reaches (pruned), so that the walk never reads it.
type ctxFS struct {
	ctx   context.Context
	steps int
	fs.FS
	reaches func(name string) bool
	pruned  map[string]bool // the directories not read, for the note
	last    *listed         // the directory listed last
}

func (c *ctxFS) Open(name string) (fs.File, error) {
	if err := c.step("open", name); err != nil {
		return nil, err
	}
	return c.FS.Open(name)
}

// Stat is one step, and opens nothing (searchFS.Stat).
func (c *ctxFS) Stat(name string) (fs.FileInfo, error) {
	if err := c.step("stat", name); err != nil {
		return nil, err
	}
	return fs.Stat(c.FS, name)
}

// ReadDir lists a directory through the FS's own ReadDir (searchFS), one
// step as its open is. The directory listed last is listed again from
// memory: doublestar lists each directory twice in a row for a pattern
// such as **/*.go, once to match its files and once to walk on.
func (c *ctxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := c.step("readdir", name); err != nil {
		return nil, err
	}
	if c.last != nil && c.last.name == name {
		return slices.Clone(c.last.ents), c.last.err
	}
	ents, err := fs.ReadDir(c.FS, name)
	c.last = &listed{name, ents, err}
	return slices.Clone(ents), err
}

// listed is a directory's listing.
type listed struct {
	name string
	ents []fs.DirEntry
	err  error
}

// step counts an open of name, and fails it when the search is done, over
// its budget, or name is a directory no allow entry reaches.
func (c *ctxFS) step(op, name string) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if c.steps++; c.steps > maxSearchSteps {
		return errSteps
	}
	if c.reaches != nil && name != "." && !c.reaches(name) {
		// A file is still opened: the search checks it and counts it skipped.
		if fi, err := fs.Stat(c.FS, name); err == nil && fi.IsDir() {
			if c.pruned == nil {
				c.pruned = map[string]bool{}
			}
			c.pruned[name] = true
			return &fs.PathError{Op: op, Path: name, Err: errPruned}
		}
	}
	return nil
}

// errPruned marks a directory a search does not read.
var errPruned = errors.New("no allow entry reaches this directory")

// collapse writes runs of "**" segments as one: they match the same
// paths, and each more would multiply the walk.
func collapse(pattern string) string {
	segs := strings.Split(pattern, "/")
	out := segs[:0]
	for i, s := range segs {
		if s == "**" && i > 0 && segs[i-1] == "**" {
			continue
		}
		out = append(out, s)
	}
	return strings.Join(out, "/")
}

// MaxGlobAlternatives bounds the expansions of a Glob pattern's braces
// (rule R8): src/*.{ts,tsx} has 2, {a,b}/{c,d,e} 6.
const MaxGlobAlternatives = 1024

// braceAlternatives is how many patterns the braces of a valid pattern
// expand to (alternatives add, groups in a row multiply, nested ones
// count inside theirs), saturating just past MaxGlobAlternatives.
func braceAlternatives(pattern string) int {
	n, _ := braceSeq(pattern, 0, 0)
	return n
}

// braceSeq counts the expansions of the pattern from i up to the end of
// the alternative it is in (a ',' or '}' at depth > 0), and where it ends.
func braceSeq(p string, i, depth int) (int, int) {
	const most = MaxGlobAlternatives + 1
	n := 1
	for i < len(p) {
		switch p[i] {
		case '\\':
			i += 2
		case '[':
			// A class is one character whatever it holds ({, too).
			if j := strings.IndexByte(p[i+1:], ']'); j >= 0 {
				i += j + 2
			} else {
				i++
			}
		case '{':
			sum := 0
			i++
			for {
				var alt int
				alt, i = braceSeq(p, i, depth+1)
				sum = min(sum+alt, most)
				if i >= len(p) || p[i] == '}' {
					i++
					break
				}
				i++ // the ','
			}
			n = min(n*sum, most)
		case ',', '}':
			if depth > 0 {
				return n, i
			}
			i++
		default:
			i++
		}
	}
	return n, i
}
