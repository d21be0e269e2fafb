// Package httpfront serves the gateway over HTTP: MCP over streamable
// HTTP, stateless so that any replica can answer any request, with the
// go-sdk's own handler (a tools/call it would take as sent is answered by
// the chain's server directly, direct.go), and Claude Code's HTTP hook,
// both for callers the
// policy's principals map to a surface chain, each request with a bearer
// token (an OAuth 2.1 resource server, RFC 9728 metadata); beside them
// /healthz and /readyz, and what the caller adds (Handlers, Middleware).
package httpfront

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/approvals"
	"aimon.dev/gw/internal/front/authn"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/mcpfront"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
)

// Paths of the endpoints.
const (
	MCPPath      = "/mcp"
	HookPath     = "/hooks/claude-code"
	MetadataPath = "/.well-known/oauth-protected-resource"
)

// Options configure Serve.
type Options struct {
	// Listener, when set, is served instead of listening on Addr.
	Addr     string
	Listener net.Listener
	// TLSCert and TLSKey are PEM files; both "" for plain HTTP (behind a
	// proxy that terminates TLS).
	TLSCert, TLSKey string
	// Reload starts the gateway; its Gateway.Chain is the ceiling of every
	// principal's chain (rule R5).
	Reload  reload.Options
	Version string
	// Verifier tells who calls (authn.OIDC or authn.StaticTokens).
	Verifier auth.TokenVerifier
	// Resource is this server's URL, the audience of its tokens (RFC
	// 8707); AuthServers the issuers its metadata names (RFC 9728). With
	// Resource "" no metadata is served.
	Resource    string
	AuthServers []string
	// Wrap is how the HTTP hook hands Claude Code an allowed Bash command
	// (cchook.Wrap); nil answers it unwrapped.
	Wrap *cchook.Wrap
	// Sessions keep the HTTP hook's sessions, each caller's apart (rule
	// P18): the fleet's state store, so that any replica continues one.
	// Nil refuses every call a flow binds, saying so.
	Sessions state.Sessions
	// Handlers are served beside the gateway's, unauthenticated, by
	// http.ServeMux pattern ("/metrics"): what a deployment adds.
	Handlers map[string]http.Handler
	// Middleware wraps every request's handler (metrics, tracing); nil for
	// none. It sees the request before authentication.
	Middleware func(http.Handler) http.Handler
	// ReadTimeout bounds how long a request takes to arrive, its headers
	// and its body, from its first byte; a slower client's connection is
	// closed (slowloris, rule R10). 0 means DefaultReadTimeout. It does
	// not bound the answer: a response that streams (a
	// subscriptions/listen, a call waiting for its approval) lasts as long
	// as it needs.
	ReadTimeout time.Duration
	// Drain is how long the calls in flight have to finish once ctx is
	// done (SIGTERM); 0 means 30 s.
	Drain time.Duration
	// DrainDelay is how long, once ctx is done, /readyz answers 503 while
	// every endpoint still serves, so that load balancers take the replica
	// out before its listener closes (a rolling restart loses no call).
	DrainDelay time.Duration
	// Degraded, when set, says what a part that some calls need cannot
	// do now (the state store approvals are spent in), each error a
	// sentence of what is refused: /readyz names it, and stays 200, since
	// the other calls are still served.
	Degraded func(context.Context) error
	// Unready, when set, says why no call can be served yet (an identity
	// provider not reached): /readyz and the gateway's endpoints answer
	// 503 with it until it is nil.
	Unready func() error
	// Approvals, when set, has the asks its policy's approvers cover
	// approved out of band, on the pages it serves at /approvals/ (rule
	// P15).
	Approvals *approvals.Service
	// OnListen is told the address once the listener is open.
	OnListen func(net.Addr)
	// OnReady is told the gateway once a policy is in force (metrics
	// follow it from then on); reloads swap generations inside it.
	OnReady func(*gateway.Gateway)
	// viaSDK hands every request to the SDK's handler, tools/call too:
	// the other side of the tests that compare the two paths.
	viaSDK bool
}

// The bounds of a connection (rule R10: every wait is bounded).
const (
	// DefaultReadTimeout is Options.ReadTimeout's default.
	DefaultReadTimeout = 30 * time.Second
	// IdleTimeout is how long a kept-alive connection waits for its next
	// request before it is closed.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers (a bearer JWT is a few
	// KiB); longer ones are answered 431.
	MaxHeaderBytes = 64 << 10
)

// Serve serves until ctx is done, then stops taking requests and lets the
// calls in flight finish (at most Drain), and returns. It listens first,
// so that /healthz answers while the policy loads; /readyz and the
// gateway's endpoints answer 503 until a policy is in force.
func Serve(ctx context.Context, o Options) error {
	log := o.Reload.Gateway.Logger
	if log == nil {
		log = slog.Default()
		o.Reload.Gateway.Logger = log
	}
	if o.Verifier == nil {
		return errors.New("the HTTP front needs a token verifier")
	}
	if o.Drain <= 0 {
		o.Drain = 30 * time.Second
	}
	var tlsConfig *tls.Config
	if o.TLSCert != "" || o.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return fmt.Errorf("cannot load the TLS certificate and key: %v", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln := o.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", o.Addr); err != nil {
			return fmt.Errorf("cannot listen on %s: %v", o.Addr, err)
		}
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	// Calls outlive ctx by the drain; listen streams (which never end on
	// their own) end with it.
	calls, stopCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCalls()
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	f := &front{o: o, log: log, listens: ctx}
	// ReadTimeout bounds a request's headers and body, not its answer:
	// net/http lifts the connection's read deadline once the body has been
	// read to its end (it then watches the connection for the client's
	// going away), and HTTP/2's bounds the stream's body only, so a stream
	// of server-sent events outlives it (TestR10HTTPSlowRequestsAreCutOff).
	srv := &http.Server{Handler: f.mux(), ReadTimeout: o.ReadTimeout, ReadHeaderTimeout: o.ReadTimeout, IdleTimeout: IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if o.OnListen != nil {
		o.OnListen(ln.Addr())
	}
	if o.Approvals != nil {
		scheme := "http"
		if tlsConfig != nil {
			scheme = "https"
		}
		o.Approvals.SetBaseURL(scheme + "://" + ln.Addr().String())
	}
	log.Info("listening", "addr", ln.Addr().String(), "tls", tlsConfig != nil)

	surfaces, rt, err := mcpfront.Start(ctx, calls, o.Reload, o.Version)
	if err != nil {
		srv.Close()
		return err
	}
	defer rt.Close()
	if o.Approvals != nil {
		o.Approvals.Attach(rt.Gateway())
		surfaces.SetOutOfBand(o.Approvals)
	}
	if _, err := rt.Gateway().Tools(nil); err != nil {
		srv.Close()
		return &SurfaceError{err}
	}
	f.surfaces, f.gw = surfaces, rt.Gateway()
	if o.OnReady != nil {
		o.OnReady(f.gw)
	}
	f.ready.Store(true)
	select {
	case err := <-served:
		return fmt.Errorf("the HTTP server stopped: %v", err)
	case <-ctx.Done():
	}
	f.stopping.Store(true)
	if o.DrainDelay > 0 {
		log.Info("shutting down: /readyz answers 503 while calls are still served", "drain_delay", o.DrainDelay)
		select {
		case <-time.After(o.DrainDelay):
		case err := <-served:
			return fmt.Errorf("the HTTP server stopped: %v", err)
		}
	}
	f.ready.Store(false)
	log.Info("shutting down: answering the calls in flight", "drain", o.Drain)
	sctx, cancel := context.WithTimeout(context.Background(), o.Drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("calls were still in flight when the drain ended; cancelling them", "error", err)
		stopCalls()
		srv.Close()
	}
	return nil
}

// A SurfaceError is a process chain (--surface) that cannot run under the
// policy: every caller would be refused.
type SurfaceError struct{ Err error }

func (e *SurfaceError) Error() string { return e.Err.Error() }
func (e *SurfaceError) Unwrap() error { return e.Err }

// front is the server's state: nil surfaces until the policy is in force.
type front struct {
	o        Options
	log      *slog.Logger
	listens  context.Context
	surfaces *mcpfront.Surfaces
	gw       *gateway.Gateway
	ready    atomic.Bool
	stopping atomic.Bool
	calls    inFlight
	infoOnce sync.Once
	info     []byte // serverInfo's
	hooks    atomic.Pointer[hookGateways]
}

// hookGateways are the HTTP hook's gateways of one generation, one for
// each callers' chain (nil: none, a PostToolUse's), which decide every
// request with its own cwd and session: made once for the generation, not
// for each request (issue 47 item 2).
type hookGateways struct {
	gen *provision.Generation
	mu  sync.Mutex
	by  map[string]*cchook.Gateway
}

func (f *front) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", f.readyz)
	var metaURL string
	if f.o.Resource != "" {
		meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: f.o.Resource, AuthorizationServers: f.o.AuthServers,
			BearerMethodsSupported: []string{"header"}, ResourceName: "aimon-gw",
		})
		mux.Handle(MetadataPath, meta)
		// RFC 9728 §3.1: the metadata of https://host/mcp is at
		// /.well-known/oauth-protected-resource/mcp.
		if u, err := url.Parse(f.o.Resource); err == nil {
			if p := strings.TrimSuffix(u.Path, "/"); p != "" {
				mux.Handle(MetadataPath+p, meta)
			}
			metaURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: MetadataPath + strings.TrimSuffix(u.Path, "/")}).String()
		}
	}
	bearer := f.authenticate(metaURL)
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		s, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true, Logger: f.log})
	mux.Handle(MCPPath, f.serving(bearer(f.principal(f.mcp(sdk)))))
	mux.Handle("POST "+HookPath, f.serving(bearer(f.principal(http.HandlerFunc(f.hook)))))
	if f.o.Approvals != nil {
		mux.Handle("/approvals/", f.serving(f.o.Approvals.Handler()))
	}
	for pattern, h := range f.o.Handlers {
		mux.Handle(pattern, h)
	}
	if f.o.Middleware != nil {
		return f.o.Middleware(mux)
	}
	return mux
}

// authenticate is the SDK's RequireBearerToken with the verifier, whose
// 401 always says how to authenticate (WWW-Authenticate, RFC 6750) and
// why, in a sentence.
func (f *front) authenticate(metaURL string) func(http.Handler) http.Handler {
	require := auth.RequireBearerToken(f.o.Verifier, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metaURL,
		// A static token has no expiry; a JWT's the verifier checks.
		AllowMissingExpiration: true})
	challenge := "Bearer"
	if metaURL != "" {
		challenge = fmt.Sprintf("Bearer resource_metadata=%q", metaURL)
	}
	return func(next http.Handler) http.Handler {
		inner := require(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if fields := strings.Fields(r.Header.Get("Authorization")); len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
				w.Header().Set("WWW-Authenticate", challenge)
				http.Error(w, "The request carries no bearer token; send Authorization: Bearer TOKEN with a token for this gateway.", http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(challenged{w, challenge}, r)
		})
	}
}

// challenged adds the challenge to a 401 that has none.
type challenged struct {
	http.ResponseWriter
	challenge string
}

func (c challenged) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", c.challenge)
	}
	c.ResponseWriter.WriteHeader(code)
}

// Flush lets the SDK stream (server-sent events) through the wrapper.
func (c challenged) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c challenged) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (f *front) readyz(w http.ResponseWriter, r *http.Request) {
	switch {
	case f.stopping.Load():
		http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
	case !f.ready.Load():
		http.Error(w, "not ready: the policy is not in force yet", http.StatusServiceUnavailable)
	case f.unready() != nil:
		http.Error(w, "not ready: "+f.unready().Error(), http.StatusServiceUnavailable)
	default:
		cur := f.gw.Current()
		commit := ""
		if c := cur.Commit(); c != "" {
			commit = ", git commit " + c
		}
		fmt.Fprintf(w, "ready: generation %d, revision %s%s\n", cur.Number, cur.Revision, commit)
		if f.o.Degraded != nil {
			if err := f.o.Degraded(r.Context()); err != nil {
				fmt.Fprintf(w, "degraded: %v\n", err)
			}
		}
	}
}

// unready is why no call can be served yet; nil when they can.
func (f *front) unready() error {
	if f.o.Unready == nil {
		return nil
	}
	return f.o.Unready()
}

// serving answers 503 until a policy is in force, and once shutting down.
func (f *front) serving(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.ready.Load() {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "The gateway is not ready: its policy is not in force (loading, or shutting down); try again, or another replica.", http.StatusServiceUnavailable)
			return
		}
		if err := f.unready(); err != nil {
			w.Header().Set("Retry-After", "5")
			http.Error(w, fmt.Sprintf("The gateway is not ready: %v; try again, or another replica.", err), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var discard = slog.New(slog.DiscardHandler)

type principalKey struct{}
type serverKey struct{}

// caller is who called and the chain the policy maps it to.
type caller struct {
	claims policy.Claims
	chain  []string
}

// principal maps the token's claims to a surface chain under the policy in
// force: a caller the policy does not map, or whose chain the process
// chain does not admit (rule R5), is refused with 403 and a sentence.
func (f *front) principal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		claims, ok := authn.Claims(auth.TokenInfoFromContext(r.Context()))
		if !ok {
			http.Error(w, "The request carries no caller's claims; this is a bug.", http.StatusInternalServerError)
			return
		}
		chain, _, err := f.gw.Current().Principal(claims)
		if err == nil {
			chain, err = f.gw.LineChain(chain)
		}
		if err != nil {
			f.log.Warn("caller refused", "caller", claims.String(), "reason", err)
			http.Error(w, sentence(err), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, caller{claims, chain})))
	})
}

func sentence(err error) string {
	s := err.Error()
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// mcp hands the request to the SDK with the server of the caller's chain.
// A subscriptions/listen stream (list_changed) ends when the server shuts
// down; every other request is answered first.
func (f *front) mcp(sdk http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.Context().Value(principalKey{}).(caller)
		s, err := f.surfaces.Server(c.chain)
		if err != nil {
			http.Error(w, sentence(fmt.Errorf("%s runs on %s, which cannot run under this policy: %w", c.claims, strings.Join(c.chain, ","), err)), http.StatusForbidden)
			return
		}
		ctx := context.WithValue(r.Context(), serverKey{}, s)
		if r.Method == http.MethodPost {
			m, refusal := peek(r)
			if refusal != nil {
				// Read as stdio reads it: a frame stdio refuses is refused
				// here too, under its own id, and never decided.
				w.Header().Set("Content-Type", "application/json")
				if m.ID == nil {
					w.WriteHeader(http.StatusBadRequest)
				}
				w.Write(refusal)
				return
			}
			if m.Method != "tools/call" && unreadable(w, r, m) {
				return
			}
			switch m.Method {
			case "subscriptions/listen":
				var stop func() bool
				ctx, stop = mergeCancel(ctx, f.listens)
				defer stop()
			case "tools/call":
				// The SDK detaches the call from this request; the
				// carrier ends it when the client goes away or cancels
				// it, as over stdio.
				carrier, done := f.calls.start(r.Context(), c.claims.String(), m.ID)
				defer done()
				if !f.o.viaSDK && f.direct(carrier, w, r, c, m) {
					return
				}
				if unreadable(w, r, m) {
					return
				}
				ctx = mcpfront.WithCarrier(ctx, carrier)
			case "notifications/cancelled":
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				if json.Unmarshal(m.Params, &p) == nil {
					f.calls.cancel(c.claims.String(), p.RequestID)
				}
			}
		}
		sdk.ServeHTTP(w, r.WithContext(ctx))
	})
}

// peek reads the request's message with the reader stdio uses, keeping
// the body for the SDK: the frame, or the JSON-RPC error response that
// refuses it; neither for a body too long to read here (the SDK answers
// it).
func peek(r *http.Request) (mcpfront.Frame, []byte) {
	body, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	if err != nil || len(body) > mcp.DefaultMaxRequestBodyBytes {
		return mcpfront.Frame{}, nil
	}
	return mcpfront.ReadFrame(body)
}

// inFlight are the tools/call requests being answered, by caller and
// request id, so that a notifications/cancelled, which stateless HTTP
// carries in a request of its own, reaches the call it names. A caller
// can cancel only its own calls.
type inFlight struct {
	mu    sync.Mutex
	calls map[callKey][]*flight
}

type callKey struct{ caller, id string }

type flight struct{ cancel context.CancelFunc }

// start registers a call; its context ends with the request, or when the
// caller cancels it; done unregisters it.
func (f *inFlight) start(req context.Context, caller string, id json.RawMessage) (context.Context, func()) {
	ctx, cancel := context.WithCancel(req)
	k := callKey{caller, canonicalID(id)}
	fl := &flight{cancel}
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[callKey][]*flight{}
	}
	f.calls[k] = append(f.calls[k], fl)
	f.mu.Unlock()
	return ctx, func() {
		cancel()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls[k] = slices.DeleteFunc(f.calls[k], func(x *flight) bool { return x == fl })
		if len(f.calls[k]) == 0 {
			delete(f.calls, k)
		}
	}
}

// cancel ends the caller's calls of that request id.
func (f *inFlight) cancel(caller string, id json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.calls[callKey{caller, canonicalID(id)}] {
		fl.cancel()
	}
}

// canonicalID spells a JSON-RPC id once: 7, 7.0 and "7" stay apart as the
// SDK keeps them, "\u0037" and "7" do not.
func canonicalID(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// mergeCancel is ctx, also cancelled when other is done.
func mergeCancel(ctx, other context.Context) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return ctx, func() bool { cancel(); return stop() }
}

// hook answers Claude Code's HTTP hook as aimon-gw hook claude-code does,
// under the generation in force. Claude Code takes a non-2xx answer as a
// non-blocking error and runs the tool, so an input that cannot be read
// is answered 200 with a deny; the caller's chain bounds the input's.
func (f *front) hook(w http.ResponseWriter, r *http.Request) {
	c := r.Context().Value(principalKey{}).(caller)
	w.Header().Set("Content-Type", "application/json")
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	var out cchook.Output
	// An input that cannot be read is refused by the one decision, and
	// recorded (rules R7, R10).
	switch in, rerr := cchook.ReadInput(data); {
	case err != nil:
		out = f.refuseHook(cchook.Input{}, c, fmt.Sprintf("The hook input cannot be read (%v); the call is blocked.", err))
	case rerr != nil:
		// Recorded in the command hook's words, answered as a sentence.
		out = f.refuseHook(in, c, rerr.Error())
	case in.HookEventName == cchook.PostToolUse || in.HookEventName == cchook.UserPromptSubmit:
		f.postHook(w, in, c)
		return
	default:
		out = f.answerHook(in, c)
	}
	_ = json.NewEncoder(w).Encode(out)
}

// refuseHook refuses an HTTP hook input that cannot be read (why) by the
// one decision under the generation in force, recorded once with the
// caller's principal, and answers with the record's sentence, capitalized.
func (f *front) refuseHook(in cchook.Input, c caller, why string) cchook.Output {
	cur := f.enter()
	defer cur.Exit()
	return cchook.Blocked(sentence(errors.New(f.hookGateway(cur, c.chain).Refuse(in, cchook.Sender{Principal: c.claims.Subject, Claims: &c.claims}, why))))
}

// enter starts a hook input's decision under the generation in force.
func (f *front) enter() *provision.Generation {
	for {
		// One retired by a reload a moment ago is passed: the next is
		// in force.
		if cur := f.gw.Current(); cur.Enter() {
			return cur
		}
	}
}

// hookGateway is the gateway of the HTTP hook's requests under cur, the
// generation the request entered, whose callers' chain is ceiling (nil for
// none). Its logs would only say again which policy is in force; its
// decisions are the front's decision log's.
func (f *front) hookGateway(cur *provision.Generation, ceiling []string) *cchook.Gateway {
	hs := f.hooks.Load()
	if hs == nil || hs.gen != cur {
		fresh := &hookGateways{gen: cur, by: map[string]*cchook.Gateway{}}
		// A request that entered a generation a reload has since
		// replaced is decided under it still, by a gateway of its own
		// that replaces none of the newer's.
		if hs == nil || hs.gen.Number <= cur.Number {
			f.hooks.CompareAndSwap(hs, fresh)
		}
		if hs = f.hooks.Load(); hs.gen != cur {
			hs = fresh
		}
	}
	key := "\x01" // no chain
	if ceiling != nil {
		key = strings.Join(ceiling, "\x00")
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	g := hs.by[key]
	if g == nil {
		g = cchook.NewGateway(cur, gateway.Options{Logger: discard, Decisions: f.o.Reload.Gateway.Decisions, Protected: true,
			Limits: f.o.Reload.Gateway.Limits, SpendAsks: f.o.Reload.Gateway.SpendAsks, Chain: ceiling})
		hs.by[key] = g
	}
	return g
}

// answerHook answers a PreToolUse input by the one decision, in its own
// cwd, under the generation in force. The caller's chain is the ceiling
// of the input's, refused and recorded by the one decision (R5).
func (f *front) answerHook(in cchook.Input, c caller) cchook.Output {
	cur := f.enter()
	defer cur.Exit()
	wd := f.o.Reload.Gateway.Workdir
	if in.Cwd != wd && cur.Relative() {
		in.Unread = fmt.Sprintf("The policy has ./ patterns, which this gateway resolved against its working directory %s, and the input's cwd is %s; the call is blocked. Write absolute patterns, or use the command hook.", wd, in.Cwd)
	}
	s := cchook.Sender{Principal: c.claims.Subject, Claims: &c.claims, Session: f.hookSession(cur, in, c)}
	return f.hookGateway(cur, c.chain).Answer(cchook.Runtime, in, s, f.o.Wrap)
}

// hookSession is the session of an HTTP hook input, the caller's own: a
// session id another caller sends names another session (rule P18).
func (f *front) hookSession(cur *provision.Generation, in cchook.Input, c caller) gateway.Session {
	store := f.o.Sessions
	if store == nil {
		store = cchook.Unreachable(errors.New("this gateway keeps no sessions"))
	}
	return cchook.Named(cchook.Session(cur, store, cchook.Runtime, c.claims.Subject, in), f.o.Reload.Gateway.Decisions, cchook.Runtime, c.claims.Subject, in)
}

// postHook labels the session of a PostToolUse input by its result (rule
// P18); a label that cannot be kept is answered 200 with Claude Code's
// block, whose reason the model reads, since any other answer it ignores.
// A UserPromptSubmit input's prompt is kept as the caller's words in its
// session, and proceeds (cchook.Prompt).
func (f *front) postHook(w http.ResponseWriter, in cchook.Input, c caller) {
	cur := f.enter()
	defer cur.Exit()
	g, s := f.hookGateway(cur, nil), cchook.Sender{Principal: c.claims.Subject, Session: f.hookSession(cur, in, c)}
	if in.HookEventName == cchook.UserPromptSubmit {
		w.Write(append(g.Prompt(in, s), '\n'))
		return
	}
	if cur.Relative() && in.Cwd != f.o.Reload.Gateway.Workdir {
		s.Session = nil // its ./ patterns are not this cwd's: answerHook refuses the calls
	}
	out, err := g.Post(in, s)
	if err != nil {
		out, _ = json.Marshal(map[string]string{"decision": "block", "reason": sentence(err)})
	}
	w.Write(append(out, '\n'))
}
