package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"aimon.dev/gw/internal/core/defaultpolicy"
	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/policyref"
)

// A Policy is one loaded policy: an immutable generation of its files,
// compiled. It is safe for concurrent use, and a gateway that serves it
// never sees it change; an edit is a new Load, put in force by
// gateway.(*Gateway).Swap.
type Policy struct {
	ref policyref.Ref
	log *slog.Logger
}

func init() {
	policyref.Of = func(v any) *policyref.Ref {
		if p, ok := v.(*Policy); ok && p != nil && p.ref.Gen != nil { // a zero Policy is none
			return &p.ref
		}
		return nil
	}
	policyref.Make = func(r policyref.Ref) any { return &Policy{ref: r, log: slog.New(slog.DiscardHandler)} }
	policyref.LoadErrors = func(err error) error {
		var errs ipolicy.Errors
		if errors.As(err, &errs) {
			return diagnostics(errs)
		}
		return nil
	}
}

// An Option configures a load.
type Option func(*options)

type options struct {
	workdir *string
	timeout time.Duration
	log     *slog.Logger
}

// WithWorkdir is the directory relative path patterns ("./src/**")
// resolve against, as aimon-gw's --workdir; by default the process's
// working directory, as aimon-gw serve and check take it. WithWorkdir("")
// gives none: "./" patterns then match no path, as aimon-gw vet checks a
// policy apart from any checkout.
func WithWorkdir(dir string) Option { return func(o *options) { o.workdir = &dir } }

// WithTimeout bounds the load (and what Vet, Test and a gateway start to
// bind its tools); 0, the default, for no bound but the context's.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLogger receives the logs of what binding the policy's tools starts
// (plugins, upstream servers) in Vet and Test; by default none.
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

// Load loads the policy in dir, as aimon-gw --policy dir loads it; dir ""
// is the gateway's embedded default policy. A policy that does not load
// is an error that holds an Errors (errors.As) when its files are at fault.
// ctx ends the wait for the load.
func Load(ctx context.Context, dir string, opts ...Option) (*Policy, error) {
	if dir == "" {
		return loadFS(ctx, defaultpolicy.FS(), opts)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("the policy directory %s has no absolute path: %w", dir, err)
	}
	o, err := optionsOf(opts, abs)
	if err != nil {
		return nil, err
	}
	// Loaded as named, so that its problems are placed as the caller
	// names the directory (vet prints them).
	gen, err := ipolicy.Load(dir, ipolicy.WithWorkdir(o.wd), ipolicy.WithTimeout(o.timeout), ipolicy.WithContext(orBackground(ctx)))
	if err != nil {
		return nil, loadError(err)
	}
	return &Policy{ref: policyref.Ref{Gen: gen, Dir: abs, Workdir: o.wd, Timeout: o.timeout}, log: o.log}, nil
}

// LoadFS loads the policy whose files are fsys (an embed.FS of the
// program's own, an fstest.MapFS in a test). Such a policy has no
// directory: it is not followed for edits, and Test needs a directory.
func LoadFS(ctx context.Context, fsys fs.FS, opts ...Option) (*Policy, error) {
	return loadFS(ctx, fsys, opts)
}

func loadFS(ctx context.Context, fsys fs.FS, opts []Option) (*Policy, error) {
	o, err := optionsOf(opts, "")
	if err != nil {
		return nil, err
	}
	gen, err := ipolicy.LoadFS(fsys, ipolicy.WithWorkdir(o.wd), ipolicy.WithTimeout(o.timeout), ipolicy.WithContext(orBackground(ctx)))
	if err != nil {
		return nil, loadError(err)
	}
	return &Policy{ref: policyref.Ref{Gen: gen, FS: fsys, Workdir: o.wd, Timeout: o.timeout}, log: o.log}, nil
}

// resolved are the options applied, with the working directory absolute.
type resolved struct {
	options
	wd string
}

// optionsOf applies opts; the working directory must be a directory, but
// for the policy's own (dir), which the load reports on when it is none.
func optionsOf(opts []Option, dir string) (resolved, error) {
	var r resolved
	for _, f := range opts {
		f(&r.options)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.workdir != nil && *r.workdir == "" {
		return r, nil // none (vet)
	}
	wd, _ := os.Getwd()
	if r.workdir != nil {
		wd = *r.workdir
	}
	abs, err := filepath.Abs(wd)
	if err != nil {
		return r, fmt.Errorf("the working directory %q has no absolute path: %w", wd, err)
	}
	if st, err := os.Stat(abs); abs != dir && (err != nil || !st.IsDir()) {
		return r, fmt.Errorf("the working directory %s is not a directory; give WithWorkdir an existing directory", abs)
	}
	r.wd = abs
	return r, nil
}

// loadError turns the internal load's problems into this package's.
func loadError(err error) error {
	var errs ipolicy.Errors
	if errors.As(err, &errs) {
		return diagnostics(errs)
	}
	return err
}

// Dir is the policy's directory, absolute; "" for LoadFS and the default.
func (p *Policy) Dir() string { return p.ref.Dir }

// Workdir is the directory the policy's relative path patterns resolved
// against; "" for none.
func (p *Policy) Workdir() string { return p.ref.Workdir }

// Revision names the policy's files: a prefix of the sha256 over them, as
// the decision log records it.
func (p *Policy) Revision() string { return p.ref.Gen.Revision }

// Tools are the names of the tools the policy defines, sorted.
func (p *Policy) Tools() []string { return p.ref.Gen.Names() }

// Surfaces are the surfaces the policy declares ("agent",
// "subagent:NAME", "skill:NAME", "command:NAME"), sorted.
func (p *Policy) Surfaces() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for ref := range p.ref.Gen.Surfaces {
			if !yield(ref) {
				return
			}
		}
	})
}

// Warnings are the problems the load found that did not stop it (rule
// P12); Vet reports them with the rest.
func (p *Policy) Warnings() []Diagnostic { return diagnostics(p.ref.Gen.Warnings) }

// orBackground is ctx, or the background context when it is nil.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
