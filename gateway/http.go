package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"aimon.dev/gw/internal/exec/sandbox"
	oob "aimon.dev/gw/internal/front/approvals"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/httpfront"
	"aimon.dev/gw/internal/front/policyref"
	"aimon.dev/gw/internal/front/telemetry"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
)

// ListenOptions say how Listen serves over HTTP, and whom.
type ListenOptions struct {
	// Addr is the address to listen on, e.g. ":8443". TLSCert and TLSKey
	// are PEM files for HTTPS, both or neither (plain HTTP behind a proxy
	// that terminates TLS); no tool may read the key.
	Addr, TLSCert, TLSKey string
	// Resource is this server's URL, e.g. https://gw.example.com/mcp: the
	// audience its tokens must name (RFC 8707) and its protected-resource
	// metadata's resource (RFC 9728); "" for none.
	Resource string
	// Every caller authenticates, by one of: Tokens, a file of static
	// tokens (lines sha256:HEX SUBJECT [GROUP,...], mode 0600); or Issuer,
	// an OAuth issuer whose JWTs are checked against its keys (at JWKSURL
	// when they are not discovered from its metadata), which must name
	// Audience ("" for Resource), fetched again every JWKSRefresh (0: five
	// minutes), the caller's groups in the claim GroupsClaim ("" for
	// "groups"). The policy's principals map callers to surfaces.
	Tokens                                 string
	Issuer, Audience, JWKSURL, GroupsClaim string
	JWKSRefresh                            time.Duration
	// Drain is how long the calls in flight have to finish once ctx is
	// done (0: thirty seconds); DrainDelay how long /readyz answers 503
	// before that while calls are still served, so that load balancers
	// stop sending first.
	Drain, DrainDelay time.Duration
	// ReadTimeout bounds how long a request takes to arrive, its headers
	// and its body; a slower client's connection is closed (0: thirty
	// seconds). An answer that streams is
	// not bounded by it.
	ReadTimeout time.Duration
	// ApprovalWebhook is where a call that waits for one of the policy's
	// approvers is POSTed (as JSON with a text and the approval page's
	// link: a Slack or Teams incoming webhook takes it); ApprovalsURL is
	// this gateway as approvers' browsers reach it, for the links ("" for
	// Resource's origin, else the listening address).
	ApprovalWebhook, ApprovalsURL string
}

// sentence is err as a sentence: its text and a full stop.
type sentence struct{ err error }

func (s sentence) Error() string { return s.err.Error() + "." }
func (s sentence) Unwrap() error { return s.err }

// Listen serves the policy in dir ("" for the embedded default) over
// HTTP until ctx is done, as aimon-gw mcp --listen does: MCP over
// streamable HTTP at /mcp and Claude Code's HTTP hook, to the callers the
// policy's principals map, each on its surface (Options.Surface is the
// chain of a caller no principal maps); the out-of-band approval pages of
// the policy's approvers at /approvals/; /healthz, /readyz and /metrics
// for operations. The policy's directory is followed as Watch follows it.
// Once ctx is done, /readyz turns for DrainDelay, the listener closes and
// the calls in flight have Drain to finish; then Listen returns nil.
//
// Its errors are Watch's kinds: a policy that does not load wraps
// ErrPolicy and holds a policy.Errors; a Surface the policy cannot run
// wraps ErrSurface; any other error is an option's or the listener's.
func Listen(ctx context.Context, dir string, opts Options, l ListenOptions) error {
	switch {
	case l.Addr == "":
		return errors.New("ListenOptions.Addr is empty; give the address to listen on, e.g. :8443")
	case (l.TLSCert == "") != (l.TLSKey == ""):
		return errors.New("ListenOptions.TLSCert and TLSKey go together; give both, or neither for plain HTTP behind a proxy that terminates TLS")
	case l.Issuer != "" && l.Tokens != "":
		return errors.New("ListenOptions.Issuer and Tokens are two ways of knowing callers; give one")
	case l.Issuer == "" && l.Tokens == "":
		return errors.New("every caller must authenticate: give ListenOptions.Issuer and Resource (an identity provider's JWTs), or Tokens (a file of static tokens)")
	case l.Issuer != "" && l.Audience == "" && l.Resource == "":
		return errors.New("ListenOptions.Issuer needs Resource (this server's URL, the audience its tokens must name, RFC 8707), or Audience")
	}
	if err := opts.oneLog(); err != nil {
		return err
	}
	g := newGateway(ctx, opts)
	defer g.closeAll()
	iopts, err := g.setup(ctx, "")
	if err != nil {
		return err
	}
	iopts.Limits = igw.LimitsIn(iopts.Approvals)
	sandbox.Conceal(opts.Secrets) // each caller's upstream credentials are the gateway's alone (rule R8)
	warnUnbounded(g.log)
	g.closers = append(g.closers, sandbox.Sweep) // after the runtime's close, which stops the plugins
	sandbox.Conceal(l.TLSKey)                    // a tool that read it could pose as this server (rule R8)
	decisions := iopts.Decisions                 // the file itself, which the HTTP hook's exec protects
	// Operations (issue 30 item 5): /metrics counts every decision the
	// decision log records; each request's trace is its client's.
	metrics := telemetry.NewMetrics()
	iopts.Decisions = metrics.Decisions(iopts.Decisions)
	approvals := iopts.Approvals
	wrap := hookWrap(dir, opts, decisions, iopts.Limits)
	// Counted in this process's memory, which exec cannot reach, an
	// asked command is spent at the ask (rule P19).
	iopts.SpendAsks = wrap != nil && wrap.SpentAtAsk
	o := httpfront.Options{Addr: l.Addr, TLSCert: l.TLSCert, TLSKey: l.TLSKey, Version: g.version(), Resource: l.Resource,
		Reload: reload.Options{Dir: dir, LoadTimeout: opts.LoadTimeout, Secrets: opts.Secrets, Debounce: opts.Settle,
			Cache: loadcache.Open(opts.Cache, g.log), Gateway: iopts},
		Wrap: wrap, Sessions: igw.SessionsIn(approvals), Drain: l.Drain, DrainDelay: l.DrainDelay, ReadTimeout: l.ReadTimeout,
		Degraded: func(ctx context.Context) error {
			if err := approvals.Ping(ctx); err != nil {
				return fmt.Errorf("approved calls are refused, as are the calls a limit counts: %w", err)
			}
			return nil
		},
		Handlers: map[string]http.Handler{"GET /metrics": metrics.Handler()}, Middleware: g.tracing.Middleware,
		OnReady: func(gw *igw.Gateway) { metrics.Follow(func() *igw.Gateway { return gw }) }}
	if o.Drain <= 0 {
		o.Drain = 30 * time.Second
	}
	if l.Tokens != "" {
		if o.Verifier, err = authn.StaticTokens(l.Tokens); err != nil {
			return sentence{err}
		}
	} else {
		aud := l.Audience
		if aud == "" {
			aud = l.Resource
		}
		refresh := l.JWKSRefresh
		if refresh <= 0 {
			refresh = 5 * time.Minute
		}
		// An identity provider that cannot be reached keeps the replica up
		// and not ready, retrying, rather than in a crash loop.
		v, err := authn.NewOIDC(authn.OIDCConfig{Issuer: l.Issuer, Audience: aud, JWKSURL: l.JWKSURL, GroupsClaim: l.GroupsClaim, Refresh: refresh}, g.log)
		if err != nil {
			return sentence{err}
		}
		v.Start(ctx)
		o.Verifier, o.Unready, o.AuthServers = v.Verify, v.Ready, []string{l.Issuer}
		spend := o.Degraded
		o.Degraded = func(ctx context.Context) error {
			var errs []error
			if err := spend(ctx); err != nil {
				errs = append(errs, err)
			}
			if err := v.Degraded(); err != nil {
				errs = append(errs, fmt.Errorf("the identity provider's keys are not refreshed, so a key it removed is still taken: %w", err))
			}
			return errors.Join(errs...)
		}
	}
	// The out-of-band approvals of the policy's approvers (rule P15):
	// pending approvals kept where tokens are spent (so that every replica
	// sharing the store serves them), else in this process's memory.
	base := l.ApprovalsURL
	if u, err := url.Parse(l.Resource); base == "" && l.Resource != "" && err == nil {
		base = u.Scheme + "://" + u.Host
	}
	records := state.MemoryRecords()
	if st := approvals.Store(); st != nil {
		if r := state.RecordsOf(st); r != nil {
			records = r
		}
	}
	o.Approvals = oob.New(oob.Options{Records: records, Key: approvals.Derive("approval pages"), Verifier: o.Verifier,
		Webhook: l.ApprovalWebhook, BaseURL: base, TTL: opts.ApprovalTTL, Decisions: decisions,
		Secure: strings.HasPrefix(base, "https:"), Logger: opts.Logger})
	err = httpfront.Serve(ctx, o)
	var surface *httpfront.SurfaceError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &surface):
		return kindError{ErrSurface, err}
	case policyref.LoadErrors(err) != nil:
		return kindError{ErrPolicy, err}
	}
	return err
}

// hookWrap is how the HTTP hook hands Claude Code an allowed Bash command:
// through the aimon-gw binary Options.ExecBinary names, under the policy
// in dir, in its sandbox, with the cache and the decision log passed on
// for exec to protect; nil for no binary or the embedded policy. An
// approved command is spent where limits counts: in the fleet's Redis,
// which exec reaches, or else, counted in this process's memory, at the
// ask (rule P19).
func hookWrap(dir string, opts Options, decisions igw.DecisionLog, limits state.Limiter) *cchook.Wrap {
	if opts.ExecBinary == "" || dir == "" {
		return nil
	}
	pol, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	w := &cchook.Wrap{Binary: opts.ExecBinary, Policy: pol, Seal: ticket.SealOnFirstUse()}
	if opts.Cache != "" && opts.Cache != "off" {
		w.Cache, _ = filepath.Abs(opts.Cache)
	}
	if l, ok := decisions.(interface{ Path() string }); ok {
		w.Log, _ = filepath.Abs(l.Path())
	}
	if l, ok := decisions.(interface{ Synced() bool }); ok {
		w.LogSync = l.Synced()
	}
	if _, mem := limits.(*state.Memory); !mem && (strings.HasPrefix(opts.State, "redis://") || strings.HasPrefix(opts.State, "rediss://")) {
		w.State = opts.State
	} else {
		w.SpentAtAsk = true
	}
	return w
}

// version is the serverInfo version of the MCP servers (Options.Version).
func (g *Gateway) version() string {
	if g.opts.Version == "" {
		return "aimon.dev/gw"
	}
	return g.opts.Version
}
