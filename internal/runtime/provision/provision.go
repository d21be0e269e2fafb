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
	// reached, whose tools are withheld (rule R4), by server name.
	Unavailable []Unavailable
	impls       map[string]tools.Tool

	// places index where each surface's entries are written, built on
	// the first look (Place), by *policy.Surface.
	places sync.Map

	mu       sync.Mutex
	active   int
	retired  bool
	releases []func()
	once     sync.Once
	released chan struct{}
}

// Unavailable is an upstream server that is down, why, and the tools it
// withholds; the gateway offers them again once the server answers.
type Unavailable struct {
	Server string   `json:"server"`
	Reason string   `json:"reason"`
	Tools  []string `json:"tools,omitempty"`
}

// Provision binds every tool of gen, once preflight found nothing that
// would refuse it: a generation refused before starts nothing (rule R3).
// When any tool cannot be bound, what was bound is released and the error is a policy.Errors with the place
// each failed tool is declared.
func (r Registry) Provision(ctx context.Context, gen *policy.Generation) (*Generation, error) {
	g := &Generation{impls: map[string]tools.Tool{}, released: make(chan struct{})}
	decls := map[string]policy.Declared{}
	var errs policy.Errors
	down := map[string]*Unavailable{}
	if errs := r.preflight(gen); len(errs) > 0 {
		return nil, errs // nothing started
	}
	if w, ok := r["upstream"].(interface {
		Warm(context.Context, []*policy.Tool) func()
	}); ok {
		ts := slices.Collect(maps.Values(gen.Wildcards))
		for _, t := range gen.Tools {
			ts = append(ts, t)
		}
		defer w.Warm(ctx, ts)()
	}
	if len(gen.Wildcards) > 0 {
		expanded, release, err := r.expand(ctx, gen, down)
		defer release()
		if err != nil {
			return nil, err
		}
		gen = expanded
	}
	// Tools of MCP servers are bound side by side: a server that does not
	// answer holds the load for its own bound, not for each of its tools
	// and every other server's after it (rule R10).
	names := gen.Names()
	type bound struct {
		b   Binding
		err error
	}
	binds := make([]bound, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		t := gen.Tools[name]
		if k, ok := r[t.Kind()]; ok {
			if t.Kind() != "upstream" {
				binds[i].b, binds[i].err = k.Bind(ctx, t)
				continue
			}
			wg.Go(func() { binds[i].b, binds[i].err = k.Bind(ctx, t) })
		}
	}
	wg.Wait()
	for i, name := range names {
		t := gen.Tools[name]
		if _, ok := r[t.Kind()]; !ok {
			errs = append(errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.C1,
				Message: fmt.Sprintf("tool %s is implemented by a %s, which this gateway cannot run here.", name, t.Kind())})
			continue
		}
		b, err := binds[i].b, binds[i].err
		if err != nil {
			errs = append(errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.R4,
				Message: fmt.Sprintf("tool %s: %s", name, sentence(err))})
			continue
		}
		if b.Release != nil {
			g.releases = append(g.releases, b.Release)
		}
		g.impls[name] = b.Tool
		if b.Declared != nil {
			decls[name] = *b.Declared
			if why := b.Declared.Unavailable; why != "" {
				d := down[t.Upstream.Server]
				if d == nil {
					d = &Unavailable{Server: t.Upstream.Server, Reason: why}
					down[t.Upstream.Server] = d
				}
				d.Tools = append(d.Tools, name)
			}
		}
	}
	if len(errs) == 0 && len(gen.Pending()) > 0 {
		var err error
		if gen, err = gen.Complete(decls); err != nil {
			g.release()
			return nil, err
		}
	}
	if len(errs) > 0 {
		g.release()
		return nil, errs
	}
	g.Generation = gen
	for _, server := range slices.Sorted(maps.Keys(down)) {
		g.Unavailable = append(g.Unavailable, *down[server])
	}
	for _, k := range r {
		if s, ok := k.(Settler); ok {
			s.Settle()
		}
	}
	return g, nil
}

// expand adds the tools of the servers that expose "*", as they list them.
// A server that cannot list them is recorded in down, and adds none.
func (r Registry) expand(ctx context.Context, gen *policy.Generation, down map[string]*Unavailable) (*policy.Generation, func(), error) {
	var releases []func()
	release := func() {
		for _, f := range releases {
			f()
		}
	}
	lister, ok := r["upstream"].(Lister)
	if !ok {
		return nil, release, fmt.Errorf("this gateway cannot list the tools of an MCP server")
	}
	listed := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for server, w := range gen.Wildcards {
		wg.Go(func() { // side by side, as Provision binds
			names, rel, err := lister.List(ctx, w)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				down[server] = &Unavailable{Server: server, Reason: sentence(err)}
				return
			}
			releases = append(releases, rel)
			listed[server] = names
		})
	}
	wg.Wait()
	out, err := gen.Expand(listed)
	return out, release, err
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

// Retire takes g out of service: it takes no new call, and releases what it
// holds once its calls in flight have exited. Idempotent.
func (g *Generation) Retire() {
	g.mu.Lock()
	first := !g.retired
	g.retired = true
	idle := g.active == 0
	g.mu.Unlock()
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
	v, ok := g.places.Load(s)
	if !ok {
		v, _ = g.places.LoadOrStore(s, &placeIndex{})
	}
	ix := v.(*placeIndex)
	ix.once.Do(func() { ix.build(s) })
	if key != allow.DeniedTools && key != allow.AskTools {
		key = "allowed-tools" // as s.Place reads any other key
	}
	pos, ok := ix.at[key][entry]
	return pos, ok
}

// placeIndex is where a surface's entries are written, by list key and
// entry: the first place of each, as s.Place finds it.
type placeIndex struct {
	once sync.Once
	at   map[string]map[string]policy.Position
}

func (ix *placeIndex) build(s *policy.Surface) {
	ix.at = map[string]map[string]policy.Position{}
	for _, l := range []struct {
		key     string
		entries []string
		places  []policy.Position
	}{
		{"allowed-tools", s.Entries, s.EntryPos},
		{allow.DeniedTools, s.Denied, s.DeniedPos},
		{allow.AskTools, s.Asked, s.AskedPos},
	} {
		at := map[string]policy.Position{}
		seen := map[string]bool{}
		for i, e := range l.entries {
			if !seen[e] && i < len(l.places) {
				at[e] = l.places[i]
			}
			seen[e] = true
		}
		ix.at[l.key] = at
	}
}
