// Package provision binds a loaded policy generation to its tools'
// implementations, as Caddy provisions a config: the whole new generation
// is bound before it replaces the old one, a generation whose binding fails
// releases everything it acquired, and a retired generation releases what
// it holds only once its last call has finished.
//
// Implementation kinds ("builtin", "plugin", …) come in through a Registry,
// so adding a kind touches no switch in the gateway.
package provision

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// A Kind binds the tools of one implementation kind.
type Kind interface {
	// Bind returns t's implementation. What Bind acquires (a process, a
	// connection) is held until the Binding's Release is called; on error
	// Bind holds nothing.
	Bind(ctx context.Context, t *policy.Tool) (Binding, error)
}

// A Lister is a kind whose implementation says which tools it has: an MCP
// server that exposes "*". List holds what it started until release is
// called, so that the binds that follow share it.
type Lister interface {
	List(ctx context.Context, server *policy.Tool) (names []string, release func(), err error)
}

// A Settler is a kind with something to do once a generation is bound
// whole: stop the servers that start on first use.
type Settler interface{ Settle() }

// A Binding is one tool bound to its implementation.
type Binding struct {
	Tool tools.Tool
	// Declared is what the implementation says of the tool (a plugin's
	// schema), for a tool the policy leaves pending; nil otherwise.
	Declared *policy.Declared
	// Release gives back what Bind acquired; nil when nothing.
	Release func()
}

// A Registry maps implementation kinds (policy.Tool.Kind) to their Kind.
type Registry map[string]Kind

// A Generation is a policy generation bound to its implementations. Calls
// Enter it and Exit it; once Retired, it takes no new call and releases what
// it holds when its last call exits. Safe for concurrent use.
type Generation struct {
	*policy.Generation
	// Number and LoadedAt say in which order and when the gateway put the
	// generation in force; set once, before any call can see it.
	Number   int64
	LoadedAt time.Time
	// Unavailable are the upstream servers that could not be started or
	// reached, or are still waited for (ProvisionNow), whose tools are
	// withheld (rules R4, R10), by server name.
	Unavailable []Unavailable
	impls       map[string]tools.Tool
	// commit reads the git commit where the policy lies (Commit) once,
	// when it is first asked for.
	commit func() string

	// places index where each surface's entries are written, built on
	// the first look (Place), by *policy.Surface.
	places sync.Map

	// waiting are the servers whose first answer the generation waits
	// for, and updates the generations that complete it (ProvisionNow).
	waiting    map[string]bool
	updates    <-chan *Generation
	superseded chan struct{}

	mu       sync.Mutex
	active   int
	retired  bool
	releases []func()
	once     sync.Once
	released chan struct{}
}

// Commit is the git commit checked out where the policy lies, when it
// lies in a git work tree (policy.GitCommit); "" otherwise. It is read on
// the first look (a serving gateway's log of the generation going in
// force, the first decision a log records), not by a hook whose decision
// nothing records: opening the repository took a tenth of its time.
func (g *Generation) Commit() string {
	if g.commit == nil {
		return ""
	}
	return g.commit()
}

// CommitOf has g, which completes prev (the same policy), name prev's
// commit, read once for both.
func (g *Generation) CommitOf(prev *Generation) { g.commit = prev.commit }

// Unavailable is an upstream server that is down, why, and the tools it
// withholds; the gateway offers them again once the server answers.
type Unavailable struct {
	Server string   `json:"server"`
	Reason string   `json:"reason"`
	Tools  []string `json:"tools,omitempty"`
}

// Provision binds every tool of gen, once preflight found nothing that
// would refuse it: a generation refused before starts nothing (rule R3).
// It waits for every upstream MCP server, side by side, each within its
// bound. When any tool cannot be bound, what was bound is released and the
// error is a policy.Errors with the place each failed tool is declared.
func (r Registry) Provision(ctx context.Context, gen *policy.Generation) (*Generation, error) {
	l, results, err := r.start(ctx, gen)
	if err != nil {
		return nil, err
	}
	return r.wait(l, results)
}

// wait binds what the servers of l bind, and the generation of it all.
func (r Registry) wait(l *loading, results <-chan bound) (*Generation, error) {
	var failed error
	for range len(l.waiting) {
		res := <-results
		if err := l.merge(res); err != nil && failed == nil {
			failed = err
		}
	}
	l.waiting = nil
	if failed != nil {
		l.hold.drop()
		return nil, failed
	}
	if len(l.errs) > 0 {
		l.hold.drop()
		return nil, sorted(l.errs)
	}
	g, err := l.build()
	l.hold.drop()
	if err != nil {
		return nil, err
	}
	r.settle()
	return g, nil
}

// ProvisionNow is Provision for the first load of a resident gateway,
// which waits for no upstream MCP server: the generation it returns serves
// every other tool at once, and a server's tools are withheld while it is
// waited for (Waits). Updates then delivers, as each server answers or
// runs out of its bound, a generation of the same policy that offers its
// tools as it declares them, or withholds them saying why, until no
// server is waited for (rule R10: a server that does not answer withholds
// only its own tools). A server whose tools cannot be bound is withheld
// with the sentence that would have refused the load: there is no
// generation in force to keep (a reload keeps the one in force, and waits).
func (r Registry) ProvisionNow(ctx context.Context, gen *policy.Generation) (*Generation, error) {
	l, results, err := r.start(ctx, gen)
	if err != nil {
		return nil, err
	}
	abandon := func() {
		// What the servers still bind is given back as each ends.
		n := len(l.waiting)
		l.waiting = nil
		go func() {
			for range n {
				l.merge(<-results)
			}
			l.hold.drop()
		}()
	}
	if len(l.errs) > 0 {
		abandon()
		return nil, sorted(l.errs)
	}
	first, err := l.build()
	if err != nil {
		// The tools withheld with an open input cannot complete the
		// policy: the servers' declarations may.
		return r.wait(l, results)
	}
	updates := make(chan *Generation, len(l.waiting))
	first.updates = updates
	go func() {
		defer close(updates)
		defer l.hold.drop()
		for range len(l.waiting) {
			res := <-results
			if err := l.merge(res); err != nil || len(l.errs) > 0 {
				l.withhold(res, err)
			}
			l.mu.Lock()
			delete(l.waiting, res.server)
			l.mu.Unlock()
			g, err := l.build()
			if err != nil {
				// What the server declares does not complete the policy.
				l.withhold(res, err)
				if g, err = l.build(); err != nil {
					l.log().Error("a generation cannot be completed with an MCP server's tools; they stay withheld", "server", res.server, "cause", err)
					continue
				}
			}
			updates <- g
		}
		r.settle()
	}()
	return first, nil
}

// settle has each kind that has something to do once a generation is
// bound whole do it.
func (r Registry) settle() {
	for _, k := range r {
		if s, ok := k.(Settler); ok {
			s.Settle()
		}
	}
}

// Updates delivers the generations that complete g (see ProvisionNow), in
// order, and is closed after the last (at once for a generation bound
// whole). Each is to be put in force in its predecessor's place, or retired.
func (g *Generation) Updates() <-chan *Generation {
	if g.updates == nil {
		return noUpdates
	}
	return g.updates
}

var noUpdates = func() chan *Generation {
	c := make(chan *Generation)
	close(c)
	return c
}()

// Waits reports whether name is a tool, or with "*" may be one, of a
// server g still waits for (see ProvisionNow); name "" asks whether g
// waits for any server. A call of such a tool is decided once the server
// has answered or run out of its bound, in the generation that follows.
func (g *Generation) Waits(name string) bool {
	if len(g.waiting) == 0 {
		return false
	}
	if name == "" {
		return true
	}
	if t, ok := g.Tools[name]; ok {
		return t.Upstream != nil && g.waiting[t.Upstream.Server]
	}
	server, _, ok := strings.Cut(name, "__")
	return ok && g.waiting[server] && g.Wildcards[server] != nil
}

// Superseded is closed once g is retired: another generation is in force.
func (g *Generation) Superseded() <-chan struct{} { return g.superseded }

// compiling is held while a loaded policy is expanded or completed: the
// first load's servers answer while a reload may complete the same one.
var compiling sync.Mutex

// loading is one load's binding: what is bound so far, shared by the
// generations built from it (one for Provision, one per server answered
// for ProvisionNow), and released once the last of them is.
type loading struct {
	r      Registry
	base   *policy.Generation
	hold   *holder
	mu     sync.Mutex // held by merge: results come from the servers' goroutines
	decls  map[string]policy.Declared
	impls  map[string]tools.Tool
	listed map[string][]string
	down   map[string]*Unavailable
	errs   policy.Errors
	// waiting are the servers not answered yet, by name, with a tool of
	// each (for its bound).
	waiting map[string]*policy.Tool
	// servers are the tools of each server, as the policy names them.
	servers map[string][]*policy.Tool
}

// bound is what a server's goroutine bound: the tools it lists, when it
// exposes "*" (nil when it could not list them, down then saying why), and
// each tool's binding.
type bound struct {
	server string
	listed []string
	down   *Unavailable
	err    error // its listed tools cannot be added to the policy
	binds  map[string]Binding
	errs   map[string]error
	tools  map[string]*policy.Tool
}

// start binds the tools of every kind but upstream at once, and starts a
// goroutine per upstream server that binds its tools, side by side: a
// server that does not answer holds the load for its own bound, not for
// each of its tools and every other server's after it (rule R10).
func (r Registry) start(ctx context.Context, gen *policy.Generation) (*loading, <-chan bound, error) {
	if errs := r.preflight(gen); len(errs) > 0 {
		return nil, nil, errs // nothing started
	}
	l := &loading{r: r, base: gen, hold: &holder{refs: 1}, decls: map[string]policy.Declared{}, impls: map[string]tools.Tool{},
		listed: map[string][]string{}, down: map[string]*Unavailable{}, waiting: map[string]*policy.Tool{}, servers: map[string][]*policy.Tool{}}
	var local []string
	for _, name := range gen.Names() {
		t := gen.Tools[name]
		if _, ok := r[t.Kind()]; ok && t.Kind() == "upstream" {
			l.servers[t.Upstream.Server] = append(l.servers[t.Upstream.Server], t)
			l.waiting[t.Upstream.Server] = t
			continue
		}
		local = append(local, name)
	}
	for server, w := range gen.Wildcards {
		l.waiting[server] = w
	}
	results := make(chan bound, len(l.waiting))
	for server := range l.waiting {
		go func() { results <- l.bindServer(ctx, server) }()
	}
	for _, name := range local {
		t := gen.Tools[name]
		k, ok := r[t.Kind()]
		if !ok {
			l.errs = append(l.errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.C1,
				Message: fmt.Sprintf("tool %s is implemented by a %s, which this gateway cannot run here.", name, t.Kind())})
			continue
		}
		b, err := k.Bind(ctx, t)
		l.mu.Lock()
		l.add(t, b, err)
		l.mu.Unlock()
	}
	return l, results, nil
}

// bindServer binds the tools of one upstream server: those the policy
// names, and with "*" those it lists.
func (l *loading) bindServer(ctx context.Context, server string) bound {
	res := bound{server: server, binds: map[string]Binding{}, errs: map[string]error{}, tools: map[string]*policy.Tool{}}
	k := l.r["upstream"]
	ts := slices.Clone(l.servers[server])
	w := l.base.Wildcards[server]
	if warm, ok := k.(interface {
		Warm(context.Context, []*policy.Tool) func()
	}); ok {
		warmed := slices.Clone(ts)
		if w != nil {
			warmed = append(warmed, w)
		}
		defer warm.Warm(ctx, warmed)()
	}
	if w != nil {
		lister, ok := k.(Lister)
		if !ok {
			res.err = fmt.Errorf("this gateway cannot list the tools of an MCP server")
			return res
		}
		names, release, err := lister.List(ctx, w)
		if err != nil {
			res.down = &Unavailable{Server: server, Reason: sentence(err)}
		} else {
			defer release() // the binds below hold their own leases
			compiling.Lock()
			exp, err := l.base.Expand(map[string][]string{server: names})
			compiling.Unlock()
			if err != nil {
				res.err = err
				return res
			}
			res.listed = names
			for _, n := range names {
				if t := exp.Tools[server+"__"+n]; t != nil && l.base.Tools[t.Name] == nil {
					ts = append(ts, t)
				}
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() {
			b, err := k.Bind(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			res.tools[t.Name], res.binds[t.Name], res.errs[t.Name] = t, b, err
		})
	}
	wg.Wait()
	return res
}

// merge adds what a server bound; err is why its listed tools cannot be
// added, and a tool that cannot be bound is added to l.errs.
func (l *loading) merge(res bound) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if res.down != nil {
		l.down[res.server] = res.down
	}
	if res.err != nil {
		for _, b := range res.binds {
			l.hold.add(b.Release)
		}
		return res.err
	}
	if res.listed != nil {
		l.listed[res.server] = res.listed
	}
	for _, name := range slices.Sorted(maps.Keys(res.binds)) {
		l.add(res.tools[name], res.binds[name], res.errs[name])
	}
	return nil
}

// add records one tool's binding, or why it has none; l.mu is held.
func (l *loading) add(t *policy.Tool, b Binding, err error) {
	if err != nil {
		l.errs = append(l.errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.R4,
			Message: fmt.Sprintf("tool %s: %s", t.Name, sentence(err))})
		return
	}
	l.hold.add(b.Release)
	l.impls[t.Name] = b.Tool
	if b.Declared == nil {
		return
	}
	l.decls[t.Name] = *b.Declared
	if why := b.Declared.Unavailable; why != "" {
		d := l.down[t.Upstream.Server]
		if d == nil {
			d = &Unavailable{Server: t.Upstream.Server, Reason: why}
			l.down[t.Upstream.Server] = d
		}
		d.Tools = append(d.Tools, t.Name)
	}
}

// withhold withholds a server's tools, as one that is down, for why they
// cannot be offered (ProvisionNow): a tool that cannot be bound, or a
// declaration that the policy cannot complete with.
func (l *loading) withhold(res bound, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		err = sorted(l.errs)
	}
	why := sentence(err)
	l.errs = nil
	l.log().Error("an MCP server's tools cannot be offered under this policy; they are withheld", "server", res.server, "cause", err)
	delete(l.listed, res.server)
	d := &Unavailable{Server: res.server, Reason: why}
	l.down[res.server] = d
	for _, t := range l.servers[res.server] {
		b := withheld(t, why)
		l.impls[t.Name], l.decls[t.Name] = b.Tool, *b.Declared
		d.Tools = append(d.Tools, t.Name)
	}
}

func (l *loading) log() *slog.Logger {
	if u, ok := l.r["upstream"].(*Upstreams); ok {
		return u.log()
	}
	return slog.New(slog.DiscardHandler)
}

// build is the generation of what is bound so far: the tools of a server
// still waited for are withheld, with an open input, saying so.
func (l *loading) build() (*Generation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	compiling.Lock()
	defer compiling.Unlock()
	gen := l.base
	if len(l.listed) > 0 {
		var err error
		if gen, err = gen.Expand(l.listed); err != nil {
			return nil, err
		}
	}
	g := &Generation{impls: maps.Clone(l.impls), released: make(chan struct{}), superseded: make(chan struct{})}
	decls := l.decls
	down := map[string]*Unavailable{}
	for s, d := range l.down {
		c := *d
		c.Tools = slices.Clone(d.Tools)
		down[s] = &c
	}
	if len(l.waiting) > 0 {
		decls = maps.Clone(decls)
		g.waiting = map[string]bool{}
		for server, t := range l.waiting {
			g.waiting[server] = true
			why := "it has not answered yet"
			if u, ok := l.r["upstream"].(*Upstreams); ok {
				why = fmt.Sprintf("it has not answered yet; the gateway waits up to %s for it (its timeout, or --load-timeout)", u.wait(t))
			}
			why += "."
			d := &Unavailable{Server: server, Reason: why}
			for _, t := range l.servers[server] {
				b := withheld(t, why)
				g.impls[t.Name], decls[t.Name] = b.Tool, *b.Declared
				d.Tools = append(d.Tools, t.Name)
			}
			down[server] = d
		}
	}
	if len(gen.Pending()) > 0 {
		var err error
		if gen, err = gen.Complete(decls); err != nil {
			return nil, err
		}
	}
	if gen == l.base {
		// Its own: the gateway numbers it and names its commit, while the
		// servers still waited for expand the loaded one.
		c := *gen
		gen = &c
	}
	g.Generation = gen
	dir := gen.Dir
	g.commit = sync.OnceValue(func() string { return policy.GitCommit(dir) })
	for _, server := range slices.Sorted(maps.Keys(down)) {
		g.Unavailable = append(g.Unavailable, *down[server])
	}
	g.releases = []func(){l.hold.hold()}
	return g, nil
}

// sorted is errs in the order of their sentences, which name their tools:
// the servers' goroutines end in any order.
func sorted(errs policy.Errors) policy.Errors {
	slices.SortStableFunc(errs, func(a, b policy.Diagnostic) int { return strings.Compare(a.Message, b.Message) })
	return errs
}

// A holder is what one load bound, shared by the generations built from
// it: given back once the load and each of them has let go.
type holder struct {
	mu       sync.Mutex
	refs     int
	releases []func()
}

// hold takes a reference, which the returned function drops.
func (h *holder) hold() func() {
	h.mu.Lock()
	h.refs++
	h.mu.Unlock()
	return sync.OnceFunc(h.drop)
}

func (h *holder) drop() {
	h.mu.Lock()
	h.refs--
	var rs []func()
	if h.refs == 0 {
		rs, h.releases = h.releases, nil
	}
	h.mu.Unlock()
	for _, f := range rs {
		f()
	}
}

// add has f called when the holder is let go, at once if it was.
func (h *holder) add(f func()) {
	if f == nil {
		return
	}
	h.mu.Lock()
	if h.refs > 0 {
		h.releases = append(h.releases, f)
		f = nil
	}
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// Impl returns the implementation bound to the tool name.
func (g *Generation) Impl(name string) (tools.Tool, bool) {
	t, ok := g.impls[name]
	return t, ok
}

// Enter starts a call under g; it reports false once g is retired, and the
// caller then takes the generation now in force.
func (g *Generation) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return false
	}
	g.active++
	return true
}

// Exit ends a call that Enter started.
func (g *Generation) Exit() {
	g.mu.Lock()
	g.active--
	last := g.retired && g.active == 0
	g.mu.Unlock()
	if last {
		g.release()
	}
}

// Retired reports whether g was retired.
func (g *Generation) Retired() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.retired
}

// Retire takes g out of service: it takes no new call, and releases what it
// holds once its calls in flight have exited. Idempotent.
func (g *Generation) Retire() {
	g.mu.Lock()
	first := !g.retired
	g.retired = true
	idle := g.active == 0
	g.mu.Unlock()
	if first && g.superseded != nil {
		close(g.superseded)
	}
	if first && idle {
		g.release()
	}
}

// Released is closed once g has released what it held.
func (g *Generation) Released() <-chan struct{} { return g.released }

func (g *Generation) release() {
	g.once.Do(func() {
		for _, r := range g.releases {
			r()
		}
		close(g.released)
	})
}

// sentence ends an error's text with a full stop.
func sentence(err error) string {
	s := strings.TrimSpace(err.Error())
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// Place is s.Place(entry, key) of a surface s of the generation, looked up
// in an index built once per surface: a scan of a list of 1,000 entries
// per deciding entry was a call's largest cost (issue 32).
func (g *Generation) Place(s *policy.Surface, entry, key string) (policy.Position, bool) {
	pl, ok := g.place(s, entry, key)
	return pl.pos, ok
}

// PlaceText is Place's position as its text (file:line:col), formatted
// once with the index: a decision names its entries' places, and the
// formatting was a third of a 10-entry decision (issue 49).
func (g *Generation) PlaceText(s *policy.Surface, entry, key string) (string, bool) {
	pl, ok := g.place(s, entry, key)
	return pl.text, ok
}

func (g *Generation) place(s *policy.Surface, entry, key string) (place, bool) {
	pl, ok := g.Places(s, key)[entry]
	return pl, ok
}

// Places are the places of one list of a surface, by entry, for a caller
// that looks up several entries of it: the index found once for them all
// (it was a sixth of a refusal that names ten entries, issue 49).
type Places map[string]place

// Text is PlaceText of entry in the list.
func (ps Places) Text(entry string) (string, bool) {
	pl, ok := ps[entry]
	return pl.text, ok
}

// Places is the places of list key (as Place reads it) of surface s.
func (g *Generation) Places(s *policy.Surface, key string) Places {
	v, ok := g.places.Load(s)
	if !ok {
		v, _ = g.places.LoadOrStore(s, &placeIndex{})
	}
	ix := v.(*placeIndex)
	ix.once.Do(func() { ix.build(s) })
	if key != allow.DeniedTools && key != allow.AskTools {
		key = "allowed-tools" // as s.Place reads any other key
	}
	return ix.at[key]
}

// placeIndex is where a surface's entries are written, by list key and
// entry: the first place of each, as s.Place finds it.
type placeIndex struct {
	once sync.Once
	at   map[string]Places
}

type place struct {
	pos  policy.Position
	text string
}

func (ix *placeIndex) build(s *policy.Surface) {
	ix.at = map[string]Places{}
	for _, l := range []struct {
		key     string
		entries []string
		places  []policy.Position
	}{
		{"allowed-tools", s.Entries, s.EntryPos},
		{allow.DeniedTools, s.Denied, s.DeniedPos},
		{allow.AskTools, s.Asked, s.AskedPos},
	} {
		at := map[string]place{}
		seen := map[string]bool{}
		for i, e := range l.entries {
			if !seen[e] && i < len(l.places) {
				at[e] = place{l.places[i], l.places[i].String()}
			}
			seen[e] = true
		}
		ix.at[l.key] = at
	}
}
