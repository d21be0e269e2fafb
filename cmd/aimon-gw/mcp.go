package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
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
	// ReadTimeout bounds how long a request takes to arrive (--read-timeout).
	ReadTimeout time.Duration
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
		&cli.DurationFlag{Name: "read-timeout", Value: 30 * time.Second, Usage: "how long a request may take to arrive, its headers and its body; a slower client's connection is closed (an answer that streams is not bounded by it)"},
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
			readTimeout, err := drain(c, "read-timeout")
			if err != nil {
				return err
			}
			if c.IsSet("read-timeout") && c.String("listen") == "" {
				return fail(exitUsage, "--read-timeout is for serving over HTTP; give --listen ADDR too, or leave it out")
			}
			if c.String("listen") == "" {
				delay = 0 // stdio: no load balancer to wait for
			}
			dlog, err := openDecisionLog(c)
			if err != nil {
				return err
			}
			defer dlog.Close()
			// The listener's delay, the drain, and a second for the rest.
			defer exitWithin(c.Context, delay+d+time.Second, func() { dlog.Close() }, log)()
			return serveMCP(c.Context, mcpParams{Decisions: dlog,
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				LoadTimeout: c.Duration("load-timeout"), Secrets: c.String("secrets"), Settle: settle, MaxFrameBytes: c.Int("max-line-bytes"),
				Stdin: stdin, Stdout: stdout, Log: log,
				Listen: c.String("listen"), TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
				Issuer: c.String("issuer"), Audience: c.String("audience"), Resource: c.String("resource"), JWKSURL: c.String("jwks-url"), JWKSRefresh: c.Duration("jwks-refresh"),
				GroupsClaim: c.String("groups-claim"), Tokens: c.String("tokens"), Drain: d, DrainDelay: delay, ReadTimeout: readTimeout,
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
	resume := loadGC()
	gw, err := gateway.Watch(ctx, p.Policy, o)
	resume()
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
	o, err := approvalOptions(p.ApprovalKey, p.ApprovalTTL, p.State)
	if err != nil {
		return err
	}
	if err := p.listenProblem(); err != nil {
		return err
	}
	o.Surface, o.Workdir, o.Logger, o.Decisions, o.TraceFromEnv, o.Version = chain, workdir, p.Log, p.Decisions, true, version()
	o.LoadTimeout, o.Settle, o.Cache, o.Secrets = p.LoadTimeout, p.Settle, p.Cache, p.Secrets
	if bin, err := os.Executable(); err == nil {
		o.ExecBinary = bin // the HTTP hook's Bash commands run through its exec
	}
	err = gateway.Listen(ctx, p.Policy, o, gateway.ListenOptions{Addr: p.Listen, TLSCert: p.TLSCert, TLSKey: p.TLSKey, Resource: p.Resource,
		Tokens: p.Tokens, Issuer: p.Issuer, Audience: p.Audience, JWKSURL: p.JWKSURL, GroupsClaim: p.GroupsClaim, JWKSRefresh: p.JWKSRefresh,
		Drain: p.Drain, DrainDelay: p.DrainDelay, ReadTimeout: p.ReadTimeout, ApprovalWebhook: p.ApprovalWebhook, ApprovalsURL: p.ApprovalsURL})
	var errs policy.Errors
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gateway.ErrSurface):
		return fail(exitUsage, "%s", surfaceProblem(err))
	case errors.As(err, &errs):
		return fail(exitFinding, "%s", loadProblem(p.Policy, err))
	}
	return fail(exitUsage, "--listen: %v", err)
}

// listenProblem is the usage error of --listen's flags, given together as
// they cannot be; nil when they can.
func (p mcpParams) listenProblem() error {
	usage := func(format string, args ...any) error {
		return fail(exitUsage, "--listen: "+format, args...)
	}
	if (p.TLSCert == "") != (p.TLSKey == "") {
		return usage("--tls-cert and --tls-key go together; give both, or neither for plain HTTP behind a proxy that terminates TLS.")
	}
	if p.Resource != "" {
		if u, err := url.Parse(p.Resource); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
			return usage("--resource %q is not an absolute http(s) URL without a fragment; give this server's URL, e.g. https://gw.example.com/mcp.", p.Resource)
		}
	}
	switch {
	case p.Issuer != "" && p.Tokens != "":
		return usage("--issuer and --tokens are two ways of knowing callers; give one.")
	case p.Tokens != "":
		if p.Audience != "" || p.JWKSURL != "" {
			return usage("--audience and --jwks-url are for --issuer's JWTs, not --tokens.")
		}
	case p.Issuer != "":
		if p.Audience == "" && p.Resource == "" {
			return usage("--issuer needs --resource (this server's URL, the audience its tokens must name, RFC 8707), or --audience.")
		}
	default:
		return usage("every caller must authenticate: give --issuer and --resource (an identity provider's JWTs), or --tokens FILE (static tokens).")
	}
	for _, f := range []struct{ name, value string }{{"approval-webhook", p.ApprovalWebhook}, {"approvals-url", p.ApprovalsURL}} {
		if f.value == "" {
			continue
		}
		if u, err := url.Parse(f.value); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return usage("--%s %q is not an absolute http(s) URL; give one such as https://example.com/path.", f.name, redactURL(f.value))
		}
	}
	return nil
}

// redactURL is u without what could be a secret: a webhook's path and query.
func redactURL(u string) string {
	if x, err := url.Parse(u); err == nil && x.Host != "" {
		return x.Scheme + "://" + x.Host + "/…"
	}
	return "(an unreadable URL)"
}
