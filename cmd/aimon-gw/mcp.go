package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/sandbox"
	oob "aimon.dev/gw/internal/front/approvals"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/front/httpfront"
	"aimon.dev/gw/internal/front/telemetry"
	"aimon.dev/gw/internal/runtime/decisionlog"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
	"aimon.dev/gw/policy"
)

type mcpParams struct {
	Policy        string
	Surface       string
	Workdir       string
	LoadTimeout   time.Duration
	Secrets       string
	Settle        time.Duration
	MaxFrameBytes int
	Stdin         io.Reader
	Stdout        io.Writer
	Log           *slog.Logger
	Decisions     *gateway.DecisionLog
	// httpDecisions is --listen's decision log, which the HTTP front end
	// still takes as the internal gateway's.
	httpDecisions igw.DecisionLog
	// Transport, when set, replaces Stdin and Stdout (tests).
	Transport mcp.Transport
	// HTTP: Listen is the address ("" for stdio), the rest its TLS, who may
	// call (Issuer and Resource, or Tokens), and the approvals' key.
	Listen, TLSCert, TLSKey             string
	Issuer, Audience, Resource, JWKSURL string
	JWKSRefresh                         time.Duration
	GroupsClaim, Tokens                 string
	ApprovalKey                         string
	ApprovalTTL, Drain, DrainDelay      time.Duration
	// State is where approvals are spent (--state, serveParams.State).
	State string
	// ApprovalWebhook is where a pending approval is POSTed; ApprovalsURL
	// is this gateway as approvers reach it, for the links.
	ApprovalWebhook, ApprovalsURL string
	// Cache is the directory of compiled policies (--cache); "off" for none.
	Cache string
}

// httpFlags are mcp's flags for serving over HTTP.
func httpFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "listen", Usage: "serve MCP over streamable HTTP (and Claude Code's HTTP hook) on this address, e.g. :8443, instead of standard input and output"},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate for --listen (with --tls-key); without both, plain HTTP behind a proxy that terminates TLS"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
		&cli.StringFlag{Name: "issuer", Usage: "accept bearer JWTs of this OAuth issuer, checked against its JWKS"},
		&cli.StringFlag{Name: "resource", Usage: "this server's URL, e.g. https://gw.example.com/mcp: the audience its tokens must name (RFC 8707) and its protected-resource metadata's resource (RFC 9728)"},
		&cli.StringFlag{Name: "audience", Usage: "the audience tokens must name, when it is not --resource"},
		&cli.StringFlag{Name: "jwks-url", Usage: "the issuer's JWKS, when it is not discovered from the issuer's metadata"},
		&cli.StringFlag{Name: "secrets", Usage: "the directory of per-caller secrets (SECRET/user.SUBJECT, SECRET/group.GROUP) of servers whose identity names a secret, which no tool may read"},
		&cli.DurationFlag{Name: "jwks-refresh", Value: 5 * time.Minute, Usage: "how often the issuer's keys are fetched again, so that a key it removed is refused by every replica within this time"},
		&cli.StringFlag{Name: "groups-claim", Value: "groups", Usage: "the token claim that lists the caller's groups"},
		&cli.StringFlag{Name: "tokens", Usage: "accept the static tokens of this file (lines sha256:HEX SUBJECT [GROUP,...], mode 0600) instead of an issuer's JWTs"},
		&cli.DurationFlag{Name: "drain-delay", Value: 5 * time.Second, Usage: "on SIGTERM, how long /readyz answers 503 while calls are still served, so that load balancers stop sending first; then the listener closes and the drain begins"},
		&cli.StringFlag{Name: "approval-webhook", Usage: "POST each call that waits for one of the policy's approvers here, as JSON with a text field and the approval page's link (a Slack or Teams incoming webhook takes it)"},
		&cli.StringFlag{Name: "approvals-url", Usage: "this gateway as approvers' browsers reach it, e.g. https://gw.example.com, for the links to /approvals/ID (default: --resource's origin, else the listening address)"},
		approvalKeyFlag(), approvalTTLFlag(), stateFlag(),
	}
}

func mcpCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "mcp",
		Usage:     "serve the policy's tools to an MCP client over standard input and output",
		ArgsUsage: " ",
		Flags: append(append(append(policyFlags(),
			maxLineFlag("longest JSON-RPC frame accepted"),
			cacheFlag("starts"), drainFlag(), settleFlag(),
		), decisionLogFlags()...), httpFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "%q is an argument, and mcp takes none; pass the policy with --policy", c.Args().First())
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			d, err := drain(c, "drain")
			if err != nil {
				return err
			}
			delay, err := drain(c, "drain-delay")
			if err != nil {
				return err
			}
			settle, err := drain(c, "settle")
			if err != nil {
				return err
			}
			if c.String("listen") == "" {
				delay = 0 // stdio: no load balancer to wait for
			}
			var dlog *gateway.DecisionLog
			var hlog *decisionlog.File
			if c.String("listen") == "" {
				dlog, err = openDecisionLog(c)
			} else {
				hlog, err = decisionLog(c)
			}
			if err != nil {
				return err
			}
			closeLog := func() {
				dlog.Close()
				if hlog != nil {
					hlog.Close()
				}
			}
			defer closeLog()
			// The listener's delay, the drain, and a second for the rest.
			defer exitWithin(c.Context, delay+d+time.Second, closeLog, log)()
			return serveMCP(c.Context, mcpParams{Decisions: dlog, httpDecisions: dlogOrNil(hlog),
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				LoadTimeout: c.Duration("load-timeout"), Secrets: c.String("secrets"), Settle: settle, MaxFrameBytes: c.Int("max-line-bytes"),
				Stdin: stdin, Stdout: stdout, Log: log,
				Listen: c.String("listen"), TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
				Issuer: c.String("issuer"), Audience: c.String("audience"), Resource: c.String("resource"), JWKSURL: c.String("jwks-url"), JWKSRefresh: c.Duration("jwks-refresh"),
				GroupsClaim: c.String("groups-claim"), Tokens: c.String("tokens"), Drain: d, DrainDelay: delay,
				ApprovalKey: c.String("approval-key"), ApprovalTTL: c.Duration("approval-ttl"), State: c.String("state"), Cache: c.String("cache"),
				ApprovalWebhook: c.String("approval-webhook"), ApprovalsURL: c.String("approvals-url"),
			})
		},
	}
}

// serveMCP offers the tools the surface may use as MCP tools; every call goes
// through the same gate and permission as a line of serve. A refused or
// failed call is a tool error (isError), never a protocol error.
func serveMCP(ctx context.Context, p mcpParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	if p.Listen != "" {
		return serveMCPHTTP(ctx, p, chain, workdir)
	}
	o, err := approvalOptions(p.ApprovalKey, p.ApprovalTTL, p.State)
	if err != nil {
		return err
	}
	if a := p.httpOnly(); a != "" {
		return fail(exitUsage, "--%s is for serving over HTTP; give --listen ADDR too, or leave it out", a)
	}
	o.Surface, o.Workdir, o.Logger, o.Decisions, o.TraceFromEnv, o.MaxLineBytes, o.Version = chain, workdir, p.Log, p.Decisions, true, p.MaxFrameBytes, version()
	o.LoadTimeout, o.Settle, o.Cache, o.Secrets = p.LoadTimeout, p.Settle, p.Cache, p.Secrets
	gw, err := gateway.Watch(ctx, p.Policy, o)
	if err == nil {
		defer gw.Close()
		err = serveMCPSession(ctx, gw, p)
	}
	var exit error
	var errs policy.Errors
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gateway.ErrSurface):
		exit = fail(exitUsage, "%s", surfaceProblem(err))
	case errors.As(err, &errs):
		exit = fail(exitFinding, "%s", loadProblem(p.Policy, err))
	default:
		exit = fail(exitUsage, "%v", err)
	}
	if (errors.Is(err, gateway.ErrPolicy) || errors.Is(err, gateway.ErrSurface)) && !isTerminal(p.Stdin) {
		// The client waits for its answer to initialize: give it the
		// sentence, so that it shows why (the MCP Inspector).
		gateway.RefuseMCP(p.Stdin, p.Stdout, sentence("aimon-gw mcp", exit.Error()), 5*time.Second)
	}
	return exit
}

// serveMCPSession serves the MCP session on standard input and output, or
// on p.Transport (tests).
func serveMCPSession(ctx context.Context, gw *gateway.Gateway, p mcpParams) error {
	if p.Transport == nil {
		return gw.ServeMCP(ctx, p.Stdin, p.Stdout)
	}
	server, err := gw.MCPServer()
	if err != nil {
		return err
	}
	if err := server.Run(ctx, p.Transport); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// isTerminal: a person is typing, and no client waits for an answer.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// httpOnly names a flag given that only --listen uses; "" for none.
func (p mcpParams) httpOnly() string {
	for _, f := range []struct{ name, value string }{{"tls-cert", p.TLSCert}, {"tls-key", p.TLSKey}, {"issuer", p.Issuer},
		{"resource", p.Resource}, {"audience", p.Audience}, {"jwks-url", p.JWKSURL}, {"tokens", p.Tokens},
		{"approval-webhook", p.ApprovalWebhook}, {"approvals-url", p.ApprovalsURL}} {
		if f.value != "" {
			return f.name
		}
	}
	return ""
}

// serveMCPHTTP serves MCP over streamable HTTP, and Claude Code's HTTP
// hook, to the callers the policy's principals map, until SIGTERM; then
// it answers the calls in flight and exits 0.
func serveMCPHTTP(ctx context.Context, p mcpParams, chain []string, workdir string) error {
	approvals, closeState, err := approvals(p.ApprovalKey, p.ApprovalTTL, p.State, p.Log)
	if err != nil {
		return err
	}
	defer closeState()
	sandbox.Conceal(p.Secrets) // each caller's upstream credentials are the gateway's alone (rule R8)
	ro := reload.Options{Dir: p.Policy, LoadTimeout: p.LoadTimeout, Secrets: p.Secrets, Debounce: p.Settle, Cache: loadcache.Open(p.Cache, p.Log),
		Gateway: igw.Options{Workdir: workdir, Chain: chain, Logger: p.Log, Decisions: p.httpDecisions, Approvals: approvals, Limits: igw.LimitsIn(approvals)}}
	tracing, stopTracing, err := traced(ctx, &ro.Gateway)
	if err != nil {
		return err
	}
	defer stopTracing()
	warnUnbounded(p.Log)
	defer sandbox.Sweep() // after the runtime's close, which stops the plugins
	usage := func(format string, args ...any) error {
		return fail(exitUsage, "--listen: "+format, args...)
	}
	if (p.TLSCert == "") != (p.TLSKey == "") {
		return usage("--tls-cert and --tls-key go together; give both, or neither for plain HTTP behind a proxy that terminates TLS.")
	}
	sandbox.Conceal(p.TLSKey) // a tool that read it could pose as this server (rule R8)
	if p.Resource != "" {
		if u, err := url.Parse(p.Resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return usage("--resource %q is not an absolute http(s) URL without a fragment; give this server's URL, e.g. https://gw.example.com/mcp.", p.Resource)
		}
	}
	// Operations (issue 30 item 5): /metrics counts every decision the
	// decision log records; each request's trace is its client's.
	metrics := telemetry.NewMetrics()
	ro.Gateway.Decisions = metrics.Decisions(ro.Gateway.Decisions)
	o := httpfront.Options{Addr: p.Listen, TLSCert: p.TLSCert, TLSKey: p.TLSKey, Reload: ro, Version: version(),
		Resource: p.Resource, Wrap: hookWrap(p.Policy, p.Cache, p.httpDecisions), Sessions: igw.SessionsIn(ro.Gateway.Approvals), Drain: p.Drain, DrainDelay: p.DrainDelay,
		Degraded: func(ctx context.Context) error {
			if err := ro.Gateway.Approvals.Ping(ctx); err != nil {
				return fmt.Errorf("approved calls are refused, as are the calls a limit counts: %w", err)
			}
			return nil
		},
		Handlers: map[string]http.Handler{"GET /metrics": metrics.Handler()}, Middleware: tracing.Middleware,
		OnReady: func(gw *igw.Gateway) { metrics.Follow(func() *igw.Gateway { return gw }) }}
	switch {
	case p.Issuer != "" && p.Tokens != "":
		return usage("--issuer and --tokens are two ways of knowing callers; give one.")
	case p.Tokens != "":
		if p.Audience != "" || p.JWKSURL != "" {
			return usage("--audience and --jwks-url are for --issuer's JWTs, not --tokens.")
		}
		if o.Verifier, err = authn.StaticTokens(p.Tokens); err != nil {
			return usage("%v.", err)
		}
	case p.Issuer != "":
		aud := p.Audience
		if aud == "" {
			aud = p.Resource
		}
		if aud == "" {
			return usage("--issuer needs --resource (this server's URL, the audience its tokens must name, RFC 8707), or --audience.")
		}
		// An identity provider that cannot be reached keeps the replica up
		// and not ready, retrying, rather than in a crash loop.
		v, err := authn.NewOIDC(authn.OIDCConfig{Issuer: p.Issuer, Audience: aud, JWKSURL: p.JWKSURL, GroupsClaim: p.GroupsClaim, Refresh: p.JWKSRefresh}, ro.Gateway.Logger)
		if err != nil {
			return usage("%v.", err)
		}
		v.Start(ctx)
		o.Verifier, o.Unready, o.AuthServers = v.Verify, v.Ready, []string{p.Issuer}
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
	default:
		return usage("every caller must authenticate: give --issuer and --resource (an identity provider's JWTs), or --tokens FILE (static tokens).")
	}
	if o.Approvals, err = approvalPages(p, ro, o.Verifier); err != nil {
		return usage("%v", err)
	}
	err = httpfront.Serve(ctx, o)
	var surface *httpfront.SurfaceError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &surface):
		return fail(exitUsage, "%s", surfaceProblem(err))
	case isLoadError(err):
		return fail(exitFinding, "%s", loadProblem(p.Policy, err))
	}
	return fail(exitUsage, "--listen: %v", err)
}

// approvalPages is the out-of-band approvals of the policy's approvers
// (rule P15): pending approvals kept where tokens are spent (so that every
// replica sharing the store serves them), else in this process's memory.
func approvalPages(p mcpParams, ro reload.Options, verifier auth.TokenVerifier) (*oob.Service, error) {
	for _, f := range []struct{ name, value string }{{"approval-webhook", p.ApprovalWebhook}, {"approvals-url", p.ApprovalsURL}} {
		if f.value == "" {
			continue
		}
		if u, err := url.Parse(f.value); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--%s %q is not an absolute http(s) URL; give one such as https://example.com/path.", f.name, redactURL(f.value))
		}
	}
	base := p.ApprovalsURL
	if u, err := url.Parse(p.Resource); base == "" && p.Resource != "" && err == nil {
		base = u.Scheme + "://" + u.Host
	}
	records := state.MemoryRecords()
	if st := ro.Gateway.Approvals.Store(); st != nil {
		if r := state.RecordsOf(st); r != nil {
			records = r
		}
	}
	return oob.New(oob.Options{Records: records, Key: ro.Gateway.Approvals.Derive("approval pages"), Verifier: verifier,
		Webhook: p.ApprovalWebhook, BaseURL: base, TTL: p.ApprovalTTL, Decisions: p.httpDecisions,
		Secure: strings.HasPrefix(base, "https:"), Logger: p.Log}), nil
}

// redactURL is u without what could be a secret: a webhook's path and query.
func redactURL(u string) string {
	if x, err := url.Parse(u); err == nil && x.Host != "" {
		return x.Scheme + "://" + x.Host + "/…"
	}
	return "(an unreadable URL)"
}

// approvals seals approval tokens (rule P15) with the key in the file, or
// with one of this process's own when file is "", and spends them in the
// store spec names (rule R10). close closes the store.
func approvals(file string, ttl time.Duration, spec string, log *slog.Logger) (a *igw.Approvals, close func(), err error) {
	ticket.Conceal() // no sandbox of serve or mcp shows the key of exec's tickets either (rule R8)
	var key []byte
	if file != "" {
		if key, err = igw.ReadApprovalKey(file); err != nil {
			return nil, nil, fail(exitUsage, "%v", err)
		}
	}
	if a, err = igw.NewApprovals(key, ttl); err != nil {
		return nil, nil, fail(exitUsage, "%v", err)
	}
	if file == "" && spec == "" {
		// A key of this process's own seals tokens no other process
		// accepts: its memory is where they are spent.
		return a, func() {}, nil
	}
	dir := ""
	if spec == "" {
		if dir, err = state.DefaultDir(); err != nil {
			return nil, nil, fail(exitUsage, "there is no state directory to record spent approvals in (%v); give --state DIR or --state redis://HOST:PORT", err)
		}
	}
	st, err := state.Open(spec, dir)
	if err != nil {
		return nil, nil, fail(exitUsage, "%v", err)
	}
	if d := state.LocalDir(st); d != "" {
		sandbox.Conceal(d) // a tool that removed a spend could run an approval again (rule R8)
	} else if err := st.Ping(context.Background()); err != nil {
		// Not fatal: asked calls are refused until it answers, the rest served.
		if log == nil {
			log = slog.Default()
		}
		log.Warn("approved calls will be refused until the state store answers", "cause", err)
	}
	a.SpendIn(st)
	return a, func() { st.Close() }, nil
}

// warnUnbounded says once, at the start of serve and mcp, that sandboxed
// Bash calls will be refused: the gateway is root and can make no pids
// cgroup to bound their processes (rule R8).
func warnUnbounded(log *slog.Logger) {
	if err := sandbox.Bounded(); err != nil {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("sandboxed Bash calls will be refused", "cause", err)
	}
}

// start starts the runtime of serve and mcp; a policy that does not load
// is a finding.
func start(ctx context.Context, o reload.Options) (*reload.Runtime, error) {
	rt, err := reload.Start(ctx, o)
	if err != nil {
		return nil, fail(exitFinding, "%s", loadProblem(o.Dir, err))
	}
	return rt, nil
}

// What mcp --listen still takes as the internal gateway's (issue 47 item
// 1 moves it onto the public gateway next): the decision log, and the
// load error it tells apart.

// decisionLog opens --decision-log as the internal gateway's; nil when it
// is not given.
func decisionLog(c *cli.Context) (*decisionlog.File, error) {
	path, o := decisionLogOptions(c)
	if path == "" {
		return nil, nil
	}
	l, err := decisionlog.Open(path, decisionlog.Options{Sync: o.Sync, Detail: decisionlog.Detail{Calls: o.Calls || o.Content, Content: o.Content}})
	if err != nil {
		return nil, decisionLogProblem(err)
	}
	return l, nil
}

// dlogOrNil keeps a nil *decisionlog.File a nil interface.
func dlogOrNil(l *decisionlog.File) igw.DecisionLog {
	if l == nil {
		return nil
	}
	return l
}

// isLoadError reports whether err is a policy that does not load.
func isLoadError(err error) bool {
	var errs ipolicy.Errors
	return errors.As(err, &errs)
}
