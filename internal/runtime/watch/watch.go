// Package watch reloads a policy directory while the gateway serves (rule R3):
// it watches the directory tree with fsnotify, waits for a burst of changes
// to settle, loads the whole policy, and hands a sound one to the caller to
// swap in atomically. A broken edit, or a directory that vanished, leaves the
// last good generation in force and is logged with file:line:col.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"aimon.dev/gw/internal/core/policy"
)

// Options configure a Watcher. The zero value is ready to use.
type Options struct {
	// Debounce is how long the tree must be quiet before a reload; 0 means
	// 50ms. A burst that never settles is loaded after at most
	// max(1s, 20×Debounce), and again when it ends. A reload that no
	// event's quiet stands for (SIGHUP, a retry, a rescan, a directory
	// that cannot be watched) waits a second Debounce, in which it loads.
	Debounce time.Duration
	// Poll is how often a missing policy directory (or a missing parent of
	// it) is looked for; 0 means 1s. Events find it sooner when they can.
	Poll time.Duration
	// Logger receives the reload logs; nil means slog.Default().
	Logger *slog.Logger
	// Load loads a policy directory; nil means policy.Load with no options
	// (pass a closure to give it some, such as policy.WithPlugins).
	Load func(dir string) (*policy.Generation, error)
}

// Status is where the watcher stands, for the gateway's status line.
type Status struct {
	// Generation counts the generations put in force: 1 is the one New loaded.
	Generation int64 `json:"generation"`
	// Revision is the revision of the generation in force.
	Revision string `json:"revision"`
	// LoadedAt is when the generation in force was loaded.
	LoadedAt time.Time `json:"loaded_at"`
	// LastError is why the newest reload was rejected, one problem a line
	// (file:line:col: message); "" when the newest reload went in force.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when that reload was rejected; zero when LastError is "".
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// A Watcher keeps a policy directory's newest sound generation in force.
type Watcher struct {
	dir     string // absolute and clean
	modRoot string // the CUE module root: dir or an ancestor; "" when none was found
	swap    func(*policy.Generation) error
	load    func(string) (*policy.Generation, error)
	log     *slog.Logger

	debounce, maxWait, poll time.Duration

	fs      *fsnotify.Watcher
	reload  chan struct{}
	force   atomic.Bool // the pending reload loads even files unchanged (Reload)
	once    sync.Once
	running atomic.Bool
	closed  atomic.Bool

	// Owned by New and then by Run's goroutine.
	tree    map[string]bool // directories watched with everything below them
	flat    map[string]bool // ancestors watched for their own .cue files and for dir itself
	present bool            // dir exists and its tree is watched
	warned  map[string]bool // directories that could not be watched, logged once

	initial *policy.Generation
	extra   []string // directories outside dir the policy reads (markdown surfaces)
	// inForce is the generation in force and inForceSums the files it was
	// loaded from, as they read before and after its load; nil when they
	// changed during it. A reload of files that read the same provisions
	// inForce again instead of loading it again.
	inForce     *policy.Generation
	inForceSums map[string][32]byte

	mu     sync.Mutex
	status Status
	hooks  []func(Status)
}

// New watches dir and loads the policy in it (see Initial). The load happens
// after the watches are in place, so no edit falls between the two. If the policy does
// not load, New returns the error (a policy.Errors for a policy.Load) and
// nothing is watched. Call Run to follow changes; swap is called from Run with
// each sound new generation, and must make it current atomically (for
// example gateway.Swap, which stores an atomic.Pointer), or return why it
// cannot (a tool that cannot be provisioned): the reload is then rejected
// as a broken edit is, and the generation in force stays.
func New(dir string, swap func(*policy.Generation) error, opts Options) (*Watcher, error) {
	if swap == nil {
		return nil, errors.New("watch.New needs a swap function to hand new generations to")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot resolve the policy directory %q: %w", dir, err)
	}
	w := &Watcher{
		dir: abs, modRoot: moduleRoot(abs), swap: swap, load: opts.Load, log: opts.Logger,
		debounce: opts.Debounce, poll: opts.Poll,
		reload: make(chan struct{}, 1),
		tree:   map[string]bool{}, flat: map[string]bool{}, warned: map[string]bool{},
	}
	if w.load == nil {
		w.load = func(dir string) (*policy.Generation, error) { return policy.Load(dir) }
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	if w.debounce <= 0 {
		w.debounce = 50 * time.Millisecond
	}
	w.maxWait = max(time.Second, 20*w.debounce)
	if w.poll <= 0 {
		w.poll = time.Second
	}
	if w.fs, err = fsnotify.NewWatcher(); err != nil {
		return nil, fmt.Errorf("cannot watch the policy directory %s for changes: %w; raise fs.inotify.max_user_instances or serve without reloads", abs, err)
	}
	w.ensure()
	before, busy := w.sums(0)
	gen, err := w.load(abs)
	if err != nil {
		w.fs.Close()
		return nil, err
	}
	w.initial = gen
	w.follow(gen)
	if w.inForce = gen; busy == "" {
		w.setInForce(gen, before)
	}
	w.status = Status{Generation: 1, Revision: gen.Revision, LoadedAt: time.Now()}
	w.logWarnings(gen)
	return w, nil
}

// Initial returns the generation New loaded (generation 1). New does not
// swap it in: the caller serves it first, for example with gateway.New, and
// Run swaps in the ones that follow.
func (w *Watcher) Initial() *policy.Generation { return w.initial }

// Status returns where the watcher stands.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// OnReload calls f with the new status after every reload, sound or not,
// from Run's goroutine; when f runs, a sound generation is already in force.
// f must not block for long: the next reload waits for it.
func (w *Watcher) OnReload(f func(Status)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, f)
}

// Reload asks for a reload, as on SIGHUP: it is debounced together with any
// pending changes, and also looks again for directories to watch. The
// policy is loaded again even when its files read as the generation in
// force was loaded from (what it finds through PATH may have changed). It
// never blocks.
func (w *Watcher) Reload() {
	w.force.Store(true)
	w.wake()
}

// Reprovision asks for the generation in force to be handed to swap again,
// as Reload does, without loading the policy again when its files read as
// they did when it was loaded: for what provisioning finds outside the
// policy (an upstream server whose tools changed). It never blocks.
func (w *Watcher) Reprovision() { w.wake() }

// wake asks Run for a reload.
func (w *Watcher) wake() {
	select {
	case w.reload <- struct{}{}:
	default: // one is already pending
	}
}

// Close stops watching. Run closes the watcher itself when its context ends;
// Close is for a watcher that is never run.
func (w *Watcher) Close() error {
	var err error
	w.once.Do(func() {
		w.closed.Store(true)
		err = w.fs.Close()
	})
	return err
}

// Run follows changes until ctx ends. It survives the policy directory
// vanishing: the last good generation stays, and the directory is watched for
// again until it comes back. It returns nil when ctx ends or Close is called.
// Run once per watcher.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("the policy watcher is already running; call Run once")
	}
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	poll := time.NewTicker(w.poll)
	defer poll.Stop()
	var first, last time.Time // when the pending burst began and was last added to; zero when none is pending
	// unseen: the pending reload was asked for or follows a rescan, so no
	// quiet of events shows its files unchanged (see reloadNow).
	unseen := false
	schedule := func(event bool) {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		last, unseen = now, unseen || !event
		timer.Reset(min(w.debounce, max(0, w.maxWait-now.Sub(first))))
	}
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case ev, ok := <-w.fs.Events:
			if !ok {
				return w.stopped()
			}
			if w.handle(ev) {
				schedule(true)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return w.stopped()
			}
			// An overflow loses events: look at everything again.
			w.log.Warn("policy watch", "error", err)
			w.rescan()
			schedule(false)
		case <-w.reload:
			w.log.Debug("policy reload requested", "dir", w.dir)
			w.rescan()
			schedule(false)
		case <-poll.C:
			if w.missing() && w.ensure() {
				schedule(false)
			}
		case <-timer.C:
			// A burst loaded at maxWait was never quiet, and a tree of
			// which a directory cannot be watched changes there without
			// events.
			quiet := !unseen && len(w.warned) == 0 && !w.missing() && time.Since(last) >= w.debounce
			first, unseen = time.Time{}, false
			w.reloadNow(quiet)
		}
	}
}

// stopped is Run's result when fsnotify's channels close.
func (w *Watcher) stopped() error {
	if w.closed.Load() {
		return nil
	}
	return errors.New("the policy watcher stopped: fsnotify closed its channels; restart aimon-gw serve to watch the policy again")
}

// reloadNow loads the whole policy and puts it in force if it is sound and
// whole (rule R5): its files have been unchanged for a debounce, read the
// same before the load and after it, and no process holds one of them open
// for writing. Otherwise the reload is tried again a debounce later, and
// the generation in force stays: a policy still being written never widens
// what is allowed.
//
// quiet says that the debounce just ended was one without events on a tree
// watched whole, which every write to its files makes: that is the
// debounce the files stayed unchanged for. Otherwise (SIGHUP, a retry, an
// overflow's rescan, a directory that could not be watched) the files must
// read the same twice, one debounce apart, as well: the load runs during
// that second debounce rather than after it (issue 32), and counts only
// when the files read the same before it, after the debounce and after it.
// An editor's save waited the two debounces one after the other, most of
// its time to be in force (issue 49).
func (w *Watcher) reloadNow(quiet bool) {
	start := time.Now()
	force := w.force.Swap(false)
	retry := func(why string) {
		w.log.Debug("policy reload deferred", "why", why)
		if force {
			w.force.Store(true)
		}
		w.wake()
	}
	before, busy := w.sums(0) // the writers are looked for after the load
	if busy == "" && !force && w.inForceSums != nil && maps.Equal(before, w.inForceSums) {
		// The files read as the generation in force was loaded from, which
		// is whole and sound: a load would give it again (issue 32: a
		// 500-tool load is most of a reload).
		w.finish(start, w.inForce, before, w.swap(w.inForce))
		return
	}
	type loaded struct {
		gen *policy.Generation
		err error
	}
	var done chan loaded
	if busy == "" {
		done = make(chan loaded, 1)
		go func() {
			gen, err := w.load(w.dir)
			done <- loaded{gen, err}
		}()
		if quiet {
			w.log.Debug("policy reload loads", "settled", "a debounce without events")
		} else {
			w.log.Debug("policy reload loads", "settled", "two reads a debounce apart")
			time.Sleep(w.debounce)
			// Whether a process holds a file open for writing is looked
			// for once, after the load (a /proc scan costs as much as a
			// small policy's load); the files must read the same then too.
			if again, _ := w.sums(0); !maps.Equal(before, again) {
				busy = "its files are still changing"
			}
		}
	}
	if busy != "" {
		if done != nil {
			<-done // one load at a time
		}
		retry(busy)
		return
	}
	l := <-done
	// A load that failed is judged the same way: a file half written is
	// no broken edit to report while its writer still holds it.
	after, busy := w.snapshot()
	if busy == "" && !maps.Equal(before, after) {
		busy = "its files changed during the load"
	}
	if busy != "" {
		retry(busy)
		return
	}
	gen, err := l.gen, l.err
	if err == nil {
		err = w.swap(gen) // in force before anyone can see the new status
	}
	w.finish(start, gen, before, err)
}

// finish records a reload that swap put in force (err nil), or that was
// rejected, in the status, the logs and the hooks.
func (w *Watcher) finish(start time.Time, gen *policy.Generation, sums map[string][32]byte, err error) {
	if err == nil {
		w.follow(gen)
		w.setInForce(gen, sums)
	}
	took := time.Since(start)
	w.mu.Lock()
	old := w.status
	if err == nil {
		w.status = Status{Generation: old.Generation + 1, Revision: gen.Revision, LoadedAt: time.Now()}
	} else {
		w.status.LastError = errorText(err)
		w.status.LastErrorAt = time.Now()
	}
	st, hooks := w.status, w.hooks
	w.mu.Unlock()

	if err == nil {
		w.log.Info("policy reloaded", "generation", st.Generation, "revision", st.Revision,
			"tools", len(gen.Tools), "surfaces", len(gen.Surfaces), "took", took.Round(time.Microsecond))
		w.logWarnings(gen)
	} else {
		w.logRejected(err, old)
	}
	for _, f := range hooks {
		f(st)
	}
}

// setInForce records gen as in force, loaded from files that read as sums
// before its load; they are trusted only if they read the same after it.
func (w *Watcher) setInForce(gen *policy.Generation, sums map[string][32]byte) {
	w.inForce, w.inForceSums = gen, nil
	if after, busy := w.sums(0); busy == "" && maps.Equal(sums, after) {
		w.inForceSums = after
	}
}

// follow watches the directories outside the policy's that gen reads.
func (w *Watcher) follow(gen *policy.Generation) {
	w.extra = gen.Dirs
	for _, d := range gen.Dirs {
		if !w.tree[d] {
			w.watchTree(d)
		}
	}
}

// errorText is err's text, never empty: an empty LastError would read as
// "the newest edit loaded".
func errorText(err error) string {
	if s := strings.TrimSpace(err.Error()); s != "" {
		return s
	}
	return fmt.Sprintf("the policy does not load, and the loader gave no reason (%T); run aimon-gw vet on the directory.", err)
}

func (w *Watcher) logWarnings(gen *policy.Generation) {
	for _, d := range gen.Warnings {
		w.log.Warn("policy problem", "at", d.Pos.String(), "code", d.Code, "problem", d.Message)
	}
}

// logRejected logs a rejected reload: a summary, then every problem on a
// line of its own with its file:line:col.
func (w *Watcher) logRejected(err error, inForce Status) {
	var errs policy.Errors
	if !errors.As(err, &errs) {
		errs = policy.Errors{{Pos: policy.Position{File: w.dir}, Message: err.Error()}}
	}
	w.log.Warn("policy reload rejected; the last good policy stays in force: fix the problems below and save again",
		"dir", w.dir, "problems", len(errs), "generation", inForce.Generation, "revision", inForce.Revision)
	for _, d := range errs {
		w.log.Warn("policy problem", "at", d.Pos.String(), "code", d.Code, "problem", d.Message)
	}
}

// editorTemp reports whether base names a file editors write beside the one
// being edited (swap, backup, lock and probe files), which is never policy.
func editorTemp(base string) bool {
	switch {
	case base == "4913", // vim's probe for a writable directory
		strings.HasSuffix(base, "~"),
		strings.HasPrefix(base, ".#"), // emacs lock
		len(base) > 1 && strings.HasPrefix(base, "#") && strings.HasSuffix(base, "#"), // emacs autosave
		strings.HasPrefix(base, ".") && (strings.HasSuffix(base, ".swp") || strings.HasSuffix(base, ".swo") || strings.HasSuffix(base, ".swx")),
		strings.HasSuffix(base, "___jb_tmp___"), strings.HasSuffix(base, "___jb_old___"):
		return true
	}
	return false
}
