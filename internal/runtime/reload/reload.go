// Package reload runs a gateway on a policy and keeps it current: watch →
// load → provision → swap → retire (rule R3). The commands that serve
// (serve, mcp) and the tests use it the same way; the one-shot commands
// (check, vet) use Once.
package reload

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"aimon.dev/gw/internal/core/defaultpolicy"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/builtin"
	"aimon.dev/gw/internal/exec/pluginhost"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/watch"
)

// Options configure a Runtime.
type Options struct {
	// Dir is the policy directory; "" serves the embedded default policy,
	// which does not change.
	Dir string
	// Gateway configures the gateway; its Workdir is also the one path
	// patterns resolve against, and its Logger receives every log.
	Gateway gateway.Options
	// OnSwap runs after each reload that put a new generation in force,
	// and after each MCP server of the first generation answered (see
	// provision.ProvisionNow); the two may run at once.
	OnSwap func(*gateway.Gateway)
	// Debounce is the watcher's (watch.Options.Debounce); 0 for its default.
	Debounce time.Duration
	// LoadTimeout bounds each load (policy.WithTimeout); 0 for none.
	LoadTimeout time.Duration
	// Secrets is the directory of per-caller secrets for servers reached
	// with each caller's identity (provision.Upstreams.Secrets).
	Secrets string
	// FromScratch compiles every tool on every reload, reusing nothing of
	// the generation in force: what a reload cost before it did (bench/scale).
	FromScratch bool
	// Cache, when not nil, keeps compiled policies between processes
	// (package loadcache): the first generation is restored from its
	// record when the record verifies. A miss loads afresh, serves, and
	// then writes the record (a second load, see loadcache), which Close
	// waits for. Reloads load afresh.
	Cache *loadcache.Cache
}

// A Runtime is a gateway, the plugin host behind it, and the watcher that
// keeps its policy current.
type Runtime struct {
	gw     *gateway.Gateway
	w      *watch.Watcher
	host   *pluginhost.Host
	up     *provision.Upstreams
	cancel context.CancelFunc
	done   chan struct{}
	// recording writes the first generation's record (Options.Cache).
	recording sync.WaitGroup
}

// Registry is the implementation kinds a gateway binds tools to: the
// built-ins, plugins on h, upstream MCP servers in up, and tools another
// program runs.
func Registry(h *pluginhost.Host, up *provision.Upstreams) provision.Registry {
	return provision.Registry{
		"builtin":  provision.Builtins(builtin.Lookup),
		"plugin":   provision.Plugins{Host: h},
		"upstream": up,
		"external": provision.External{},
	}
}

// Load loads and provisions the policy in dir ("" for the embedded
// default), with relative path patterns resolving against workdir.
func Load(ctx context.Context, reg provision.Registry, dir, workdir string, timeout time.Duration) (*provision.Generation, error) {
	gen, err := loadPolicy(ctx, dir, workdir, timeout)
	if err != nil {
		return nil, err
	}
	pg, err := reg.Provision(ctx, gen)
	if err == nil {
		warnSandbox(pg)
	}
	return pg, err
}

// loadPolicy loads the policy in dir ("" for the embedded default); the
// wait for it ends when ctx is done.
func loadPolicy(ctx context.Context, dir, workdir string, timeout time.Duration) (*policy.Generation, error) {
	if dir == "" {
		gen, err := policy.LoadFS(defaultpolicy.FS(), policy.WithWorkdir(workdir))
		if err != nil {
			return nil, fmt.Errorf("the embedded default policy does not load; this is a bug:\n%w", err)
		}
		return gen, nil
	}
	return policy.Load(dir, policy.WithWorkdir(workdir), policy.WithTimeout(timeout), policy.WithContext(ctx))
}

// warnSandbox logs, at load, tools whose sandbox is required when none can
// be made here: their calls are refused (rule R6). Finding out runs bwrap,
// which a one-shot decision (Once) does not pay for: it runs no tool.
func warnSandbox(g *provision.Generation) {
	for _, name := range g.Names() {
		if sb := g.Tools[name].Sandbox; sb != nil && !sb.Off {
			if err := sandbox.Available(); err != nil {
				slog.Warn("tool needs a sandbox that cannot be made here; its calls will be refused: install bubblewrap or set sandbox: mode: \"off\"", "tool", name, "cause", err)
			}
		}
	}
}

// Once loads and provisions a policy for one decision (check): close
// releases the generation and stops what it started. An upstream tool is
// declared from its pin when the pins hold its definition; otherwise its
// server is started, and one that is down has its tools withheld, as serve
// would.
func Once(ctx context.Context, dir, workdir string, timeout time.Duration, log *slog.Logger) (gen *provision.Generation, close func(), err error) {
	return once(ctx, nil, &provision.Upstreams{Log: log, PinsFirst: true, Wait: timeout}, dir, workdir, timeout, log)
}

// OnceCached is Once through a cache of compiled loads, when cache is not
// nil: a record that verifies stands for the load (package loadcache).
// Offline, no upstream server is started or reached (vet, the hook): their
// tools are declared from the pins (provision.Upstreams.Offline).
func OnceCached(ctx context.Context, cache *loadcache.Cache, offline bool, dir, workdir string, timeout time.Duration, log *slog.Logger) (gen *provision.Generation, close func(), err error) {
	return once(ctx, cache, &provision.Upstreams{Log: log, Offline: offline, Wait: timeout}, dir, workdir, timeout, log)
}

func once(ctx context.Context, cache *loadcache.Cache, up *provision.Upstreams, dir, workdir string, timeout time.Duration, log *slog.Logger) (gen *provision.Generation, close func(), err error) {
	h := pluginhost.New(log)
	load := func() (*policy.Generation, error) { return loadPolicy(ctx, dir, workdir, timeout) }
	var pg *policy.Generation
	if cache != nil {
		if dir != "" {
			if dir, err = filepath.Abs(dir); err != nil {
				return nil, nil, err
			}
		}
		pg, _, err = cache.Load(dir, load, policy.WithWorkdir(workdir))
	} else {
		pg, err = load()
	}
	if err != nil {
		h.Close()
		up.Close()
		return nil, nil, err
	}
	return provisionOnce(ctx, h, up, Registry(h, up), pg)
}

// Start loads the policy and returns a runtime serving it. For a directory
// it follows the files until Close (rule R3): a sound edit is provisioned
// whole and becomes the next generation in one swap, the generation it
// replaces is retired; an edit that does not load or provision leaves the
// last good generation in force. SIGHUP asks for a reload.
func Start(ctx context.Context, o Options) (*Runtime, error) {
	log := o.Gateway.Logger
	if log == nil {
		log = slog.Default()
		o.Gateway.Logger = log
	}
	r := &Runtime{host: pluginhost.New(log), up: &provision.Upstreams{Log: log, Retry: true, Wait: o.LoadTimeout, Secrets: o.Secrets}, done: make(chan struct{})}
	reg := Registry(r.host, r.up)
	wd := o.Gateway.Workdir
	if o.Cache != nil && o.Cache.Log == nil {
		c := *o.Cache
		c.Log = log
		o.Cache = &c
	}
	if o.Cache != nil {
		// Its records are what the gateway reads: no tool may write them
		// (rule R8), whichever directory it is.
		sandbox.ProtectDir(sandbox.WhatCache, o.Cache.Dir)
	}
	// firstLoad loads the first generation, through the cache when there is
	// one; record writes the record of a fresh load, once it serves.
	var record func()
	firstLoad := func(dir string, load loadcache.Loader) (*policy.Generation, error) {
		if o.Cache == nil {
			return load()
		}
		g, rec, err := o.Cache.Open(dir, load, policy.WithWorkdir(wd))
		record = rec
		return g, err
	}
	defer func() {
		if record != nil && r.gw != nil {
			r.recording.Go(record)
		}
	}()
	if o.Dir == "" {
		pol, err := firstLoad("", func() (*policy.Generation, error) { return loadPolicy(ctx, "", wd, o.LoadTimeout) })
		var gen *provision.Generation
		if err == nil {
			gen, err = reg.Provision(ctx, pol)
		}
		if err != nil {
			r.host.Close()
			r.up.Close()
			return nil, err
		}
		warnSandbox(gen)
		for _, w := range gen.Warnings {
			log.Warn("policy", "problem", w.String())
		}
		r.gw = gateway.New(gen, o.Gateway)
		close(r.done)
		r.cancel = func() {}
		return r, nil
	}
	// The watcher's first load is provisioned below, the later ones in swap.
	// Each load reuses what the generation in force compiled, where nothing
	// it depends on changed (issue 32: a reload recompiles what changed); a
	// load that fails leaves that generation to the next.
	log.Debug("loading the policy", "dir", o.Dir)
	var inForce atomic.Pointer[policy.Generation]
	loaded := false
	w, err := watch.New(o.Dir, func(g *policy.Generation) error {
		pg, err := reg.Provision(ctx, g)
		if err != nil {
			return err
		}
		r.gw.Swap(pg)
		if !o.FromScratch {
			inForce.Store(g)
		}
		if o.OnSwap != nil {
			o.OnSwap(r.gw)
		}
		return nil
	}, watch.Options{Logger: log, Debounce: o.Debounce, Load: func(dir string) (*policy.Generation, error) {
		load := func(prev *policy.Generation) (*policy.Generation, error) {
			return policy.Load(dir, policy.WithWorkdir(wd), policy.WithTimeout(o.LoadTimeout), policy.WithContext(ctx),
				policy.WithPrevious(prev))
		}
		if loaded {
			return load(inForce.Load())
		}
		// New's load, before Run (the watcher's dir is absolute), has no
		// generation to reuse; nor has the second load that records it,
		// which compiles afresh what the record vouches for. A restored
		// generation offers a reload nothing to reuse.
		loaded = true
		return firstLoad(dir, func() (*policy.Generation, error) { return load(nil) })
	}})
	if err != nil {
		r.host.Close()
		r.up.Close()
		return nil, err
	}
	// A server whose tools changed, or that answers again after it was
	// down, is provisioned again: its tools are then held to their pins
	// as at load. Set before the first load, whose servers may be down.
	// The policy itself is loaded again only if its files changed.
	r.up.OnChange(func(string) { w.Reprovision() })
	ctx, r.cancel = context.WithCancel(ctx)
	// The first generation waits for no MCP server: the other tools answer
	// at once, and each server's tools go in force as it answers (rule
	// R10). A reload waits for them instead, the generation in force
	// serving meanwhile.
	first, err := reg.ProvisionNow(ctx, w.Initial())
	if err != nil {
		r.cancel()
		w.Close()
		r.host.Close()
		r.up.Close()
		return nil, err
	}
	if !o.FromScratch {
		inForce.Store(w.Initial())
	}
	r.w = w
	o.Gateway.LastReload = func() (string, time.Time) {
		st := w.Status()
		return st.LastError, st.LastErrorAt
	}
	r.gw = gateway.New(first, o.Gateway)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var wg sync.WaitGroup
	wg.Go(func() {
		prev := first
		for next := range first.Updates() {
			if r.gw.Advance(prev, next) && o.OnSwap != nil {
				o.OnSwap(r.gw)
			}
			prev = next
		}
	})
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				log.Info("SIGHUP: reloading the policy")
				w.Reload()
			case <-ctx.Done():
				return
			}
		}
	})
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r, nil
}

// Gateway is the gateway the runtime keeps current.
func (r *Runtime) Gateway() *gateway.Gateway { return r.gw }

// Status is the watcher's: the generation in force and the last reload
// attempt; zero for the embedded policy, which is not reloaded.
func (r *Runtime) Status() watch.Status {
	if r.w == nil {
		return watch.Status{}
	}
	return r.w.Status()
}

// Close stops following the policy, retires the generation in force and
// stops every process the gateway started (rule R4).
func (r *Runtime) Close() {
	r.recording.Wait() // its load ends early when ctx does (SIGTERM)
	r.cancel()
	<-r.done
	r.gw.Close()
	r.host.Close()
	r.up.Close()
}
