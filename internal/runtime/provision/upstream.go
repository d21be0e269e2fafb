package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// Upstreams is the kind of tools of upstream MCP servers (stdio, or
// streamable HTTP), reached with the official Go SDK's client (each call
// through the relay on its connection, relay.go, httprelay.go). A
// server's process is shared by every
// tool and generation that leases it, restarted after a crash for later
// calls, and stopped when its last lease is released or the gateway stops
// (rule R4).
type Upstreams struct {
	Log *slog.Logger
	// Retry has a server that cannot be started or reached tried again,
	// with back-off, until it answers; OnChange is then called, so that a
	// reload offers its tools again. Off for a one-shot decision.
	Retry bool
	// Offline binds tools without starting or reaching their servers, for
	// decisions that run no tool (vet, the hook): each is declared as its
	// server's pins know it, its input as open as the policy leaves it.
	Offline bool
	// PinsFirst binds from the pins the tools whose server's pins hold
	// their definitions, without starting the server, and starts the
	// others' servers (check, test): a decision of the reviewed policy.
	PinsFirst bool
	// Wait bounds starting or reaching a server and listing its tools
	// (--load-timeout), when the server sets no timeout of its own; 0 for
	// DescribeTimeout.
	Wait time.Duration
	// Secrets is the directory of per-caller secrets (--secrets), for a
	// server whose identity names one.
	Secrets string

	exchanges exchanges // tokens received by token exchange, by caller
	mu        sync.Mutex
	servers   map[string]*upstream
	down      map[string]error // by server key: why it is down, while it is retried
	stop      chan struct{}    // closed by Close: ends the retries
	closed    bool
	warned    map[string]bool // servers without pins, warned of
	onChange  func(server string)
	sdkCalls  bool // calls through the SDK's client, not the relay: the tests' other path
}

// RetryMin and RetryMax bound the back-off between tries of a server that
// is down.
var RetryMin, RetryMax = 500 * time.Millisecond, 30 * time.Second

// OnChange has f called after a server said its tools changed
// (notifications/tools/list_changed) and one of their definitions differs:
// a reload then re-checks them against their pins.
func (u *Upstreams) OnChange(f func(server string)) {
	u.mu.Lock()
	u.onChange = f
	u.mu.Unlock()
}

// DefaultUpstreamTimeout is a call's deadline when the server sets none.
const DefaultUpstreamTimeout = 2 * time.Minute

// MaxMessage bounds the bytes the gateway reads of one message from an
// upstream server, over stdio (the SDK's own bound), an HTTP response or
// an event stream alike; MaxResult bounds the text it passes on of one
// result, as Bash's output is bounded (rule R8).
const MaxMessage = mcp.DefaultMaxLineLength

var MaxResult = 1 << 20

// errTooLarge is an HTTP response body past MaxMessage.
var errTooLarge = errors.New("the answer exceeds the most the gateway reads of one message")

// tooLarge reports whether a call failed because the server's answer was
// past MaxMessage, on any transport.
func tooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, errTooLarge.Error()) || strings.Contains(msg, "exceeded the configured maximum line length") || strings.Contains(msg, "SSE event exceeded")
}

type upstream struct {
	u    *Upstreams
	key  string
	spec policy.Upstream
	sb   *tools.Sandbox
	refs int
	// wait bounds a start or listing of the server that no call waits
	// for (a retry, a relist): its timeout, else --load-timeout (R10).
	wait time.Duration

	mu       sync.Mutex
	session  *mcp.ClientSession
	relay    *relayConn // the session's connection, which carries the calls
	cmd      *exec.Cmd
	tools    map[string]*mcp.Tool
	pins     map[string]string // PinOf each of tools
	headed   map[string]bool   // the tools whose input binds a parameter to an HTTP header (x-mcp-header)
	retired  bool
	inflight int // calls running
	relists  coalescer
	notices  atomic.Int64 // tools/list_changed notifications received
}

// A coalescer runs a function in the background when triggered, one run
// at a time: triggers while a run is under way make one more run after
// it, never one each, so a burst of change notifications costs at most
// two re-lists and no memory per notification (rule R8).
type coalescer struct {
	mu             sync.Mutex
	running, again bool
	wg             sync.WaitGroup
}

func (c *coalescer) trigger(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		c.again = true
		return
	}
	c.running = true
	c.wg.Go(func() {
		for {
			f()
			c.mu.Lock()
			if !c.again {
				c.running = false
				c.mu.Unlock()
				return
			}
			c.again = false
			c.mu.Unlock()
		}
	})
}

// Bind leases the tool's server, starting it if needed, and imports what it
// declares of the tool (rules S3, S8).
// A server that cannot be started or reached, or does not list the tool,
// does not fail the binding: the tool is withheld, saying why (rule R4).
func (u *Upstreams) Bind(ctx context.Context, t *policy.Tool) (Binding, error) {
	if u.Offline || u.PinsFirst && fromPins(t.Upstream) {
		return u.bindOffline(t)
	}
	if up := t.Upstream; !up.NoPin && len(up.Pins) == 0 && u.warnOnce(up.Server) {
		u.log().Warn("an upstream server has no pins, so its tools are offered unreviewed; run aimon-gw pin on the policy, or set pin: false", "server", up.Server)
	}
	s, err := u.lease(t)
	if err != nil {
		return Binding{}, err
	}
	release := func() { u.release(s) }
	ctx, cancel := u.waiting(ctx, t)
	defer cancel()
	tool, err := u.describe(ctx, s, t.Upstream.Tool)
	if err != nil {
		release()
		u.log().Warn("an upstream tool is withheld: its MCP server is unavailable", "tool", t.Name, "server", t.Upstream.Server, "cause", err)
		return withheld(t, sentence(err)), nil
	}
	d, err := declare(t, tool)
	if err != nil {
		release()
		return Binding{}, err
	}
	pin := PinOf(tool)
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultUpstreamTimeout
	}
	var impl tools.Tool = &upstreamTool{s: s, name: t.Upstream.Tool, timeout: timeout, bound: pin}
	if d.Unpinned = unpinned(t, pin); d.Unpinned != "" {
		u.log().Warn("an upstream tool is withheld: it does not match its pin", "tool", t.Name, "server", t.Upstream.Server, "why", d.Unpinned)
		impl = tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
			return tools.Errorf("%s changed on its server since it was pinned, so it is not run; tell the operator. The tool was not executed.", t.Name)
		})
	}
	return Binding{Tool: impl, Declared: d, Release: release}, nil
}

// Warm starts or reaches the servers of ts side by side, each within its
// wait, so that a server that does not answer delays a load by its own
// bound once, not once for each server before it (rule R10); one that
// fails is known down when its tools are bound. release gives back what
// Warm leased, once the tools are bound.
func (u *Upstreams) Warm(ctx context.Context, ts []*policy.Tool) (release func()) {
	var mu sync.Mutex
	var leased []*upstream
	var wg sync.WaitGroup
	seen := map[string]bool{}
	for _, t := range ts {
		up := t.Upstream
		if up == nil || u.Offline || u.PinsFirst && fromPins(up) || seen[up.Server] {
			continue
		}
		seen[up.Server] = true
		wg.Go(func() {
			s, err := u.lease(t)
			if err != nil {
				return
			}
			mu.Lock()
			leased = append(leased, s)
			mu.Unlock()
			ctx, cancel := u.waiting(ctx, t)
			defer cancel()
			u.reach(ctx, s)
		})
	}
	wg.Wait()
	return func() {
		for _, s := range leased {
			u.release(s)
		}
	}
}

// unanswered says a wait that ran out in words: how long it was, and what
// sets it.
func unanswered(ctx context.Context, err error) error {
	d, ok := ctx.Value(waitKey{}).(time.Duration)
	if !ok || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("it did not answer within %s (its timeout, or --load-timeout)", d)
}

type waitKey struct{}

// waiting is ctx bounded by u.wait(t), which it carries for unanswered.
func (u *Upstreams) waiting(ctx context.Context, t *policy.Tool) (context.Context, context.CancelFunc) {
	return bounded(ctx, u.wait(t))
}

// bounded is ctx bounded by d, which it carries for unanswered.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(ctx, waitKey{}, d), d)
}

// wait is how long the gateway waits for t's server to start (or answer)
// and list its tools: the server's timeout, else Wait (--load-timeout),
// else DescribeTimeout; never longer than either (rule R10).
func (u *Upstreams) wait(t *policy.Tool) time.Duration {
	d := DescribeTimeout
	if u.Wait > 0 {
		d = min(d, u.Wait)
	}
	if t.Timeout > 0 {
		d = min(d, t.Timeout)
	}
	return d
}

// warnOnce reports whether what is said of server is said for the first
// time in this process.
func (u *Upstreams) warnOnce(server string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.warned[server] {
		return false
	}
	if u.warned == nil {
		u.warned = map[string]bool{}
	}
	u.warned[server] = true
	return true
}

// openInput is the input schema of a tool whose server has not declared
// one: any object, which the policy's input may narrow, with the field
// its permission subject names (rule P2).
func openInput(t *policy.Tool) []byte {
	if t.Subject == nil {
		return []byte(`{"type":"object"}`)
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": map[string]any{t.Subject.Field: map[string]any{"type": "string"}}})
	return b
}

// withheld binds a tool whose server is unavailable: it is declared with
// an open input and refuses to run, saying why.
func withheld(t *policy.Tool, why string) Binding {
	return Binding{
		Tool: tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
			return tools.Errorf("%s is withheld: its MCP server %s is unavailable (%s). The tool was not executed.", t.Name, t.Upstream.Server, strings.TrimSuffix(why, "."))
		}),
		Declared: &policy.Declared{InputSchema: openInput(t), Concurrency: "sequential", Interrupt: "cooperative", Unavailable: why},
	}
}

// declare is what a tool's server says of it, as the gateway declares it:
// its description, input schema and hints (rules S3, S8).
func declare(t *policy.Tool, tool *mcp.Tool) (*policy.Declared, error) {
	schema, err := json.Marshal(tool.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("the server %s declares an input schema for %s that is not JSON: %v", t.Upstream.Server, t.Upstream.Tool, err)
	}
	d := &policy.Declared{Description: tool.Description, InputSchema: schema, Concurrency: "sequential", Interrupt: "cooperative"}
	if a := tool.Annotations; a != nil {
		d.Hints = &policy.Hints{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint, Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
	}
	return d, nil
}

// bindOffline binds a tool without its server, for a decision that runs
// none: declared as its pin has it, so that it is decided as serve would
// decide it while the server holds to its pin; with no pinned definition,
// with an open input (rule S8), held to its server's pins.
func (u *Upstreams) bindOffline(t *policy.Tool) (Binding, error) {
	impl := tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
		return tools.Errorf("%s was decided without starting its MCP server %s, so it is not run here. The tool was not executed.", t.Name, t.Upstream.Server)
	})
	if def := t.Upstream.Pins[t.Upstream.Tool].Definition; def != nil {
		var tool mcp.Tool
		if err := json.Unmarshal(def, &tool); err != nil {
			return Binding{}, fmt.Errorf("the definition pinned for %s cannot be read as an MCP tool: %v; run aimon-gw pin again", t.Name, err)
		}
		d, err := declare(t, &tool)
		return Binding{Tool: impl, Declared: d}, err
	}
	d := &policy.Declared{InputSchema: openInput(t), Concurrency: "sequential", Interrupt: "cooperative"}
	d.Unpinned = unpinned(t, t.Upstream.Pin())
	return Binding{Tool: impl, Declared: d}, nil
}

// fromPins reports whether the server's pins hold its tools' definitions,
// so that a decision needs no server.
func fromPins(u *policy.Upstream) bool {
	if u.NoPin {
		return false
	}
	for _, p := range u.Pins {
		if p.Definition != nil {
			return true
		}
	}
	return false
}

// unpinned says why a tool whose definition has the given pin is withheld;
// "" when it is not. A server that has pins holds every tool to one: a
// tool it lists without a pin appeared after the review.
func unpinned(t *policy.Tool, pin string) string {
	u := t.Upstream
	switch {
	case u.NoPin || len(u.Pins) == 0:
		return ""
	case u.Pin() == "":
		return fmt.Sprintf("tool %s has no pin among the server's: it appeared after the server was reviewed; it is withheld until someone reviews it and runs aimon-gw pin again.", t.Name)
	case pin != u.Pin():
		return fmt.Sprintf("tool %s changed since it was pinned: its definition's %s is not the pin's %s; it is withheld until someone reviews the change and runs aimon-gw pin again.", t.Name, pin, u.Pin())
	}
	return ""
}

// List leases the server, starting it if needed, and returns the names of
// the tools it lists; release gives the lease back.
// Offline, the names are those the server's pins list.
func (u *Upstreams) List(ctx context.Context, server *policy.Tool) ([]string, func(), error) {
	if u.Offline || u.PinsFirst && fromPins(server.Upstream) {
		return server.Upstream.PinnedTools(), func() {}, nil
	}
	s, err := u.lease(server)
	if err != nil {
		return nil, func() {}, err
	}
	release := func() { u.release(s) }
	ctx, cancel := u.waiting(ctx, server)
	defer cancel()
	if err := u.reach(ctx, s); err != nil {
		release()
		u.log().Warn("an upstream server's tools are withheld: it is unavailable", "server", server.Upstream.Server, "cause", err)
		return nil, func() {}, err
	}
	s.mu.Lock()
	names := slices.Sorted(maps.Keys(s.tools))
	s.mu.Unlock()
	return names, release, nil
}

// PinOf is the pin of a tool's definition: the sha256 of its name,
// description, input schema and annotations (and title and output schema,
// when it has them) as canonical JSON.
func PinOf(t *mcp.Tool) string {
	_, digest := PinnedDefinition(t)
	return digest
}

// PinnedDefinition is what a pin holds of a tool: its definition as
// canonical JSON, and its digest.
func PinnedDefinition(t *mcp.Tool) (json.RawMessage, string) {
	b, _ := json.Marshal(t)
	def, digest, _ := policy.PinnedDefinition(b)
	return def, digest
}

// Definition is an upstream tool's definition as its server shows it now.
func (u *Upstreams) Definition(ctx context.Context, t *policy.Tool) (*mcp.Tool, error) {
	s, err := u.lease(t)
	if err != nil {
		return nil, err
	}
	defer u.release(s)
	return u.describe(ctx, s, t.Upstream.Tool)
}

// reach connects to the server unless it is known to be down and is
// being retried; a server that fails to connect is then retried (Retry).
func (u *Upstreams) reach(ctx context.Context, s *upstream) error {
	u.mu.Lock()
	err := u.down[s.key]
	u.mu.Unlock()
	if err != nil {
		return err
	}
	if _, err = s.connect(ctx); err != nil {
		u.retry(s, err)
	}
	return err
}

// retry records that a server is down, so that its other tools do not
// wait for it again, and with Retry tries it again with back-off in the
// background until it answers or the gateway stops; then OnChange has its
// tools provisioned again. Only one retry runs per server.
func (u *Upstreams) retry(s *upstream, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.down[s.key] != nil {
		return
	}
	if u.down == nil {
		u.down = map[string]error{}
	}
	u.down[s.key] = err
	if !u.Retry {
		return
	}
	if u.stop == nil {
		u.stop = make(chan struct{})
	}
	key, spec, sb, wait, stop := s.key, s.spec, s.sb, s.wait, u.stop
	go func() {
		for delay := RetryMin; ; delay = min(2*delay, RetryMax) {
			select {
			case <-time.After(delay):
			case <-stop:
				return
			}
			probe := &upstream{u: u, key: key, spec: spec, sb: sb, wait: wait}
			ctx, cancel := bounded(context.Background(), wait)
			_, err := probe.connect(ctx)
			cancel()
			probe.stop()
			u.mu.Lock()
			if err != nil {
				u.down[key] = err
				u.mu.Unlock()
				u.log().Debug("an upstream server is still unavailable", "server", spec.Server, "cause", err, "next", 2*delay)
				continue
			}
			delete(u.down, key)
			f := u.onChange
			u.mu.Unlock()
			u.log().Info("an upstream server answers again; its tools are provisioned again", "server", spec.Server)
			if f != nil {
				f(spec.Server)
			}
			return
		}
	}()
}

// Settle stops the servers that start on first use ("call") and run no
// call: provisioning started them only to list their tools, which they
// keep. The next call starts the server again.
func (u *Upstreams) Settle() {
	u.mu.Lock()
	var idle []*upstream
	for _, s := range u.servers {
		if s.spec.Start == "call" {
			idle = append(idle, s)
		}
	}
	u.mu.Unlock()
	for _, s := range idle {
		s.mu.Lock()
		session := s.session
		if s.inflight > 0 || session == nil {
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		s.drop(session)
	}
}

// Close stops every server.
func (u *Upstreams) Close() {
	u.mu.Lock()
	u.closed = true
	all := u.servers
	u.servers = nil
	if u.stop != nil {
		close(u.stop)
		u.stop = nil
	}
	u.mu.Unlock()
	for _, s := range all {
		s.stop()
	}
}

func (u *Upstreams) lease(t *policy.Tool) (*upstream, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errors.New("the gateway is shutting down")
	}
	if u.servers == nil {
		u.servers = map[string]*upstream{}
	}
	sb := pluginSandbox(&policy.Tool{Sandbox: t.Sandbox, PolicyDir: t.PolicyDir, Plugin: &policy.Plugin{Command: t.Upstream.Command}})
	// One process per server (and sandbox), whichever of its tools leases it.
	spec := *t.Upstream
	spec.Tool = ""
	b, _ := json.Marshal(struct {
		U  *policy.Upstream
		Sb *tools.Sandbox
	}{&spec, sb})
	key := string(b)
	s := u.servers[key]
	if s == nil {
		s = &upstream{u: u, key: key, spec: spec, sb: sb, wait: u.wait(t)}
		u.servers[key] = s
	}
	s.refs++
	return s, nil
}

func (u *Upstreams) release(s *upstream) {
	u.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last && u.servers[s.key] == s {
		delete(u.servers, s.key)
	}
	u.mu.Unlock()
	if last {
		s.stop()
	}
}

// connect starts the server and opens a session, when none is open.
func (s *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired {
		return nil, errors.New("the server was removed from the policy by a reload")
	}
	if s.session != nil {
		return s.session, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "aimon-gw", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			// Not on the connection's own goroutine: listing waits for it.
			s.notices.Add(1)
			s.relists.trigger(s.relist)
		},
	})
	var session *mcp.ClientSession
	var relay *relayConn
	var cmd *exec.Cmd
	var err error
	if s.spec.URL != "" {
		session, relay, err = s.reach(ctx, client)
	} else {
		session, relay, cmd, err = s.start(ctx, client)
	}
	if err != nil {
		return nil, err
	}
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		session.Close()
		return nil, fmt.Errorf("the MCP server %s does not list its tools: %v", s.spec.Server, unanswered(ctx, err))
	}
	if s.setTools(list.Tools) {
		// A server started again lists other tools than before: calls of
		// a changed one are refused, and a reload re-checks the pins.
		go s.changed()
	}
	s.session, s.relay, s.cmd = session, relay, cmd
	return session, nil
}

// start starts a stdio server and opens a session with it.
func (s *upstream) start(ctx context.Context, client *mcp.Client) (*mcp.ClientSession, *relayConn, *exec.Cmd, error) {
	env, err := s.environ()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := CheckServer(&s.spec); err != nil {
		return nil, nil, nil, err
	}
	argv := s.spec.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	if s.sb != nil {
		if cmd, err = sandbox.Command(s.sb, s.spec.Cwd, argv, env, func(name string) bool { _, ok := s.spec.Env[name]; return ok }); err != nil {
			return nil, nil, nil, fmt.Errorf("the server runs in a bubblewrap sandbox and none can be made here (%v); install bubblewrap and allow user namespaces, or set sandbox: mode: \"off\"", err)
		}
		defer sandbox.Release(cmd)
	}
	cmd.Dir = s.spec.Cwd
	// Its own process group, killed with it; and gone when the gateway is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = logWriter{s.u.Log, s.spec.Server}
	transport := &relayTransport{t: &stdioTransport{cmd: cmd, terminate: time.Second}}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		sandbox.Finish(cmd)
		return nil, nil, nil, fmt.Errorf("the MCP server %s (%s) cannot be started: %v; check servers.%s.command", s.spec.Server, strings.Join(s.spec.Command, " "), unanswered(ctx, err), s.spec.Server)
	}
	return session, transport.conn, cmd, nil
}

// passedEnv are the gateway's variables every stdio server sees, as a
// sandboxed command does (rule R6); LC_* too.
var passedEnv = []string{"PATH", "HOME", "LANG", "TERM", "TMPDIR"}

// environ is a stdio server's environment: passedEnv from the gateway's,
// and what the server's env sets, ${NAME} there being the gateway's
// variable. Nothing else of the gateway's (its secrets) reaches it.
func (s *upstream) environ() ([]string, error) {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(passedEnv, name) || strings.HasPrefix(name, "LC_") {
			if _, set := s.spec.Env[name]; !set {
				env = append(env, kv)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.spec.Env)) {
		v, err := expandEnv(s.spec.Env[k])
		if err != nil {
			return nil, fmt.Errorf("the MCP server %s's env %s %v; set it in the gateway's environment", s.spec.Server, k, err)
		}
		env = append(env, k+"="+v)
	}
	return env, nil
}

// reach opens a session with a streamable-HTTP server, its headers sent
// with every request, and the relay on its connection (httprelay.go).
func (s *upstream) reach(ctx context.Context, client *mcp.Client) (*mcp.ClientSession, *relayConn, error) {
	headers := http.Header{}
	for k, v := range s.spec.Headers {
		val, err := expandEnv(v)
		if err != nil {
			return nil, nil, fmt.Errorf("the MCP server %s's header %s %v; set it in the gateway's environment", s.spec.Server, k, err)
		}
		headers.Set(k, val)
	}
	relay := &relayConn{http: true, pending: map[string]chan relayAnswer{}}
	transport := &captureTransport{t: &mcp.StreamableClientTransport{Endpoint: s.spec.URL, MaxRetries: 2, MaxEventSize: MaxMessage,
		HTTPClient: &http.Client{Transport: headerTransport{headers, http.DefaultTransport, relay}, CheckRedirect: sameOrigin}}}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the MCP server %s at %s cannot be reached: %v; check servers.%s.url and its headers", s.spec.Server, s.spec.URL, err, s.spec.Server)
	}
	relay.Connection = transport.conn
	return session, relay, nil
}

// sameOrigin refuses a redirect to another origin (scheme, host, port):
// the server's headers, its secrets, are set on every request, so they
// would follow it there.
func sameOrigin(req *http.Request, via []*http.Request) error {
	from := via[0].URL
	if req.URL.Scheme != from.Scheme || req.URL.Host != from.Host {
		return fmt.Errorf("the server redirects to %s://%s, another origin than its url's, and its headers are never sent there; set its url to the endpoint it redirects to if that is meant", req.URL.Scheme, req.URL.Host)
	}
	if len(via) >= 10 {
		return errors.New("the server redirects more than 10 times")
	}
	return nil
}

// envRef is ${NAME} in a header or env value.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces each ${NAME} with the gateway's environment variable;
// one that is not set is an error, never an empty secret.
func expandEnv(v string) (string, error) {
	var missing string
	out := envRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		val, ok := os.LookupEnv(name)
		if !ok && missing == "" {
			missing = name
		}
		return val
	})
	if missing != "" {
		return "", fmt.Errorf("names ${%s}, which is not set", missing)
	}
	return out, nil
}

// headerTransport sets headers on every request, and takes the answers
// to the relay's calls off their responses.
type headerTransport struct {
	h     http.Header
	next  http.RoundTripper
	relay *relayConn
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	// A call of a server reached with each caller's identity carries the
	// caller's credential, in place of any header of the gateway's.
	if c, ok := r.Context().Value(credentialKey{}).(*credential); ok {
		r.Header.Set(c.header, c.value)
	}
	call, relayed := r.Context().Value(relayCallKey{}).(relayCall)
	if !relayed && t.relay != nil {
		t.relay.noteMeta(r)
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A JSON answer is read whole; an event stream is bounded per
		// event by the SDK (MaxEventSize), or the relay (events).
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: int64(MaxMessage)}
	}
	if err == nil && relayed && resp.StatusCode/100 == 2 {
		return call.c.take(call.id, resp), nil
	}
	return resp, err
}

// boundedBody fails a read past its bound instead of holding the rest.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one more: a body of exactly the bound is whole
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errTooLarge
	}
	return n, err
}

// setTools records what the server lists; s.mu is held.
func (s *upstream) setTools(list []*mcp.Tool) (changed bool) {
	tools, pins, headed := map[string]*mcp.Tool{}, map[string]string{}, map[string]bool{}
	for _, t := range list {
		tools[t.Name], pins[t.Name] = t, PinOf(t)
		if s.spec.URL == "" {
			continue // headers are HTTP's
		}
		if b, err := json.Marshal(t.InputSchema); err != nil || bytes.Contains(b, []byte("x-mcp-header")) {
			headed[t.Name] = true
		}
	}
	changed = s.pins != nil && !maps.Equal(s.pins, pins)
	s.tools, s.pins, s.headed = tools, pins, headed
	return changed
}

// relist reads the tools again after the server said they changed (of the
// session open now). A call
// of a tool whose definition differs from the one it was bound with is
// refused from then on, and OnChange asks for a reload to re-check pins.
func (s *upstream) relist() {
	s.mu.Lock()
	session := s.session
	s.mu.Unlock()
	if session == nil {
		return // a new session lists the tools when it opens
	}
	ctx, cancel := bounded(context.Background(), s.wait)
	defer cancel()
	list, err := session.ListTools(ctx, nil)
	s.mu.Lock()
	if s.session != session {
		s.mu.Unlock()
		return
	}
	if err != nil {
		// What the server lists cannot be known: no tool of it runs until
		// it is listed again (the next session lists it).
		s.pins = map[string]string{}
		s.mu.Unlock()
		s.u.log().Warn("an MCP server said its tools changed and then did not list them; its calls are refused until it restarts", "server", s.spec.Server, "cause", err)
		s.drop(session)
		return
	}
	changed := s.setTools(list.Tools)
	s.mu.Unlock()
	if changed {
		s.changed()
	}
}

// changed says that the server's tools changed, and asks for a reload.
func (s *upstream) changed() {
	s.u.log().Warn("an MCP server's tools changed; calls of a changed tool are refused until a reload re-checks its pin", "server", s.spec.Server)
	s.u.mu.Lock()
	f := s.u.onChange
	s.u.mu.Unlock()
	if f != nil {
		f(s.spec.Server)
	}
}

func (u *Upstreams) log() *slog.Logger {
	if u.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return u.Log
}

func (u *Upstreams) describe(ctx context.Context, s *upstream, name string) (*mcp.Tool, error) {
	if err := u.reach(ctx, s); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[name]
	if !ok {
		var names []string
		for n := range s.tools {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("the MCP server %s serves %s, not %q; fix servers.%s.expose", s.spec.Server, strings.Join(names, ", "), name, s.spec.Server)
	}
	return t, nil
}

// drop closes a session that failed, so the next call starts a new one.
func (s *upstream) drop(session *mcp.ClientSession) {
	s.mu.Lock()
	if s.session != session {
		s.mu.Unlock()
		return
	}
	s.session, s.relay = nil, nil
	cmd := s.cmd
	s.mu.Unlock()
	session.Close()
	if cmd != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		sandbox.Finish(cmd)
	}
}

func (s *upstream) stop() {
	s.mu.Lock()
	s.retired = true
	session, cmd := s.session, s.cmd
	s.session, s.relay = nil, nil
	s.mu.Unlock()
	if session != nil {
		session.Close()
	}
	if cmd != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		sandbox.Finish(cmd)
	}
}

type upstreamTool struct {
	s       *upstream
	name    string
	timeout time.Duration
	bound   string // the pin of the definition the gate was made from
}

// Run forwards a call that the gate and the permission allowed; upstream
// content passes through, and a protocol error is an error result.
func (t *upstreamTool) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// Counted before the server may start, so that Settle leaves it be.
	t.s.mu.Lock()
	t.s.inflight++
	t.s.mu.Unlock()
	defer func() {
		t.s.mu.Lock()
		t.s.inflight--
		t.s.mu.Unlock()
	}()
	session, err := t.s.connect(ctx)
	if err != nil {
		return tools.Failure(err, "The tool %s__%s is not available: %v. The tool was not executed.", t.s.spec.Server, t.name, err)
	}
	t.s.mu.Lock()
	now := t.s.pins[t.name]
	t.s.mu.Unlock()
	if now != t.bound {
		// A rug pull after the load: what was reviewed and gated is not
		// what the server would now run.
		return tools.Errorf("The tool %s__%s changed on its server since the gateway loaded it, so it is not run until a reload checks it against its pin; tell the operator. The tool was not executed.", t.s.spec.Server, t.name)
	}
	if t.s.spec.Identity != nil {
		cred, err := t.s.credentialFor(ctx)
		if err != nil {
			return tools.Errorf("The tool %s__%s was not run: %v.", t.s.spec.Server, t.name, err)
		}
		ctx = context.WithValue(ctx, credentialKey{}, cred)
		tell(ctx, cred.who)
	}
	r, err := t.s.call(ctx, session, t.name, in)
	if err != nil {
		if ctx.Err() == nil {
			t.s.drop(session) // crashed or broke the protocol: a new session next time
		}
		if tooLarge(err) {
			return tools.Failure(err, "The MCP server %s answered the call of %s with more than %d bytes, the most the gateway reads of one answer, so the answer was dropped unread; the server is restarted for the next call. Ask for less at once (a narrower range, a smaller file). The call may have done its work.", t.s.spec.Server, t.name, MaxMessage)
		}
		return tools.Failure(err, "The MCP server %s failed the call of %s (%v); it is restarted for the next call. The call may have done part of its work.", t.s.spec.Server, t.name, err)
	}
	if r.Structured != nil {
		b, _ := json.Marshal(r.Structured)
		if len(b) > MaxResult {
			r.Structured = nil // cut, it would not be JSON: the text says so
			r.Text += fmt.Sprintf("\n[The structured content of the result, %d bytes, was left out: more than %d.]", len(b), MaxResult)
		} else if r.Text == "" {
			r.Text = string(b)
		}
	}
	return capResult(r, t.s.spec.Server+"__"+t.name)
}

// call calls the tool on the session: through the relay on its
// connection, else through the SDK's client (when u.sdkCalls says so, or
// over HTTP a tool whose input binds a parameter to a header, which the
// SDK's client sets from the definition it keeps).
func (s *upstream) call(ctx context.Context, session *mcp.ClientSession, name string, in tools.Input) (tools.Result, error) {
	s.mu.Lock()
	relay := s.relay
	if s.session != session || s.u.sdkCalls || (relay != nil && relay.http && s.headed[name]) {
		relay = nil
	}
	s.mu.Unlock()
	if relay != nil {
		raw, err := relay.call(ctx, name, in)
		if err != nil {
			return tools.Result{}, err
		}
		return readResult(raw)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: in})
	if err != nil {
		return tools.Result{}, err
	}
	return fromSDK(res), nil
}

// capResult cuts a result's text at MaxResult bytes (on a rune boundary),
// saying so, as Bash's output is cut (rule R8).
func capResult(r tools.Result, tool string) tools.Result {
	if len(r.Text) <= MaxResult {
		return r
	}
	n := MaxResult
	for n > 0 && !utf8.RuneStart(r.Text[n]) {
		n--
	}
	r.Text = r.Text[:n] + fmt.Sprintf("\n[The result of %s was cut at %d of its %d bytes; ask for less at once.]", tool, n, len(r.Text))
	return r
}

// logWriter sends a server's stderr to the log, a line at a time.
type logWriter struct {
	log    *slog.Logger
	server string
}

func (w logWriter) Write(p []byte) (int, error) {
	if w.log != nil {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			w.log.Info("MCP server stderr", "server", w.server, "line", line)
		}
	}
	return len(p), nil
}
