package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/sandbox"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

// Upstreams is the kind of tools of upstream MCP servers (stdio), reached
// with the official Go SDK's client. A server's process is shared by every
// tool and generation that leases it, restarted after a crash for later
// calls, and stopped when its last lease is released or the gateway stops
// (rule R4).
type Upstreams struct {
	Log *slog.Logger

	mu      sync.Mutex
	servers map[string]*upstream
	closed  bool
}

// DefaultUpstreamTimeout is a call's deadline when the server sets none.
const DefaultUpstreamTimeout = 2 * time.Minute

type upstream struct {
	u    *Upstreams
	key  string
	spec policy.Upstream
	sb   *tools.Sandbox
	refs int

	mu      sync.Mutex
	session *mcp.ClientSession
	cmd     *exec.Cmd
	tools   map[string]*mcp.Tool
	retired bool
}

// Bind leases the tool's server, starting it if needed, and imports what it
// declares of the tool (rules S3, S8).
func (u *Upstreams) Bind(ctx context.Context, t *policy.Tool) (Binding, error) {
	s, err := u.lease(t)
	if err != nil {
		return Binding{}, err
	}
	release := func() { u.release(s) }
	ctx, cancel := context.WithTimeout(ctx, DescribeTimeout)
	defer cancel()
	tool, err := s.describe(ctx, t.Upstream.Tool)
	if err != nil {
		release()
		return Binding{}, err
	}
	schema, err := json.Marshal(tool.InputSchema)
	if err != nil {
		release()
		return Binding{}, fmt.Errorf("the server %s declares an input schema for %s that is not JSON: %v", t.Upstream.Server, t.Upstream.Tool, err)
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultUpstreamTimeout
	}
	d := &policy.Declared{Description: tool.Description, InputSchema: schema, Concurrency: "sequential", Interrupt: "cooperative"}
	var impl tools.Tool = &upstreamTool{s: s, name: t.Upstream.Tool, timeout: timeout}
	if pin := PinOf(tool); !t.Upstream.NoPin && t.Upstream.Pin != "" && pin != t.Upstream.Pin {
		d.Unpinned = fmt.Sprintf("tool %s changed since it was pinned: its definition's %s is not the pin's %s; it is withheld until someone reviews the change and runs aimon-gw pin again.", t.Name, pin, t.Upstream.Pin)
		impl = tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result {
			return tools.Errorf("%s changed on its server since it was pinned, so it is not run; tell the operator. The tool was not executed.", t.Name)
		})
	}
	return Binding{Tool: impl, Declared: d, Release: release}, nil
}

// PinOf is the pin of a tool's definition: the sha256 of its name,
// description, input schema and annotations as canonical JSON.
func PinOf(t *mcp.Tool) string {
	b, _ := json.Marshal(map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema, "annotations": t.Annotations})
	// Round-trip through a generic value so that map keys at every depth
	// are sorted, whatever types the SDK used.
	var v any
	_ = json.Unmarshal(b, &v)
	b, _ = json.Marshal(v)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Definition is an upstream tool's definition as its server shows it now.
func (u *Upstreams) Definition(ctx context.Context, t *policy.Tool) (*mcp.Tool, error) {
	s, err := u.lease(t)
	if err != nil {
		return nil, err
	}
	defer u.release(s)
	return s.describe(ctx, t.Upstream.Tool)
}

// Close stops every server.
func (u *Upstreams) Close() {
	u.mu.Lock()
	u.closed = true
	all := u.servers
	u.servers = nil
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
	b, _ := json.Marshal(struct {
		U  *policy.Upstream
		Sb *tools.Sandbox
	}{t.Upstream, sb})
	key := string(b)
	s := u.servers[key]
	if s == nil {
		spec := *t.Upstream
		spec.Tool = ""
		s = &upstream{u: u, key: key, spec: spec, sb: sb}
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
	argv := s.spec.Command
	if s.sb != nil {
		var err error
		if argv, err = sandbox.Argv(s.sb, s.spec.Cwd, argv, nil, nil); err != nil {
			return nil, fmt.Errorf("the server runs in a bubblewrap sandbox and none can be made here (%v); install bubblewrap or set sandbox: mode: \"off\"", err)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.spec.Cwd
	cmd.Env = os.Environ()
	for k, v := range s.spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	// Its own process group, killed with it; and gone when the gateway is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = logWriter{s.u.Log, s.spec.Server}
	client := mcp.NewClient(&mcp.Implementation{Name: "aimon-gw", Version: "v1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, nil)
	if err != nil {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil, fmt.Errorf("the MCP server %s (%s) cannot be started: %v; check servers.%s.command", s.spec.Server, strings.Join(s.spec.Command, " "), err, s.spec.Server)
	}
	list, err := session.ListTools(ctx, nil)
	if err != nil {
		session.Close()
		return nil, fmt.Errorf("the MCP server %s does not list its tools: %v", s.spec.Server, err)
	}
	s.tools = map[string]*mcp.Tool{}
	for _, t := range list.Tools {
		s.tools[t.Name] = t
	}
	s.session, s.cmd = session, cmd
	return session, nil
}

func (s *upstream) describe(ctx context.Context, name string) (*mcp.Tool, error) {
	if _, err := s.connect(ctx); err != nil {
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
	s.session = nil
	cmd := s.cmd
	s.mu.Unlock()
	session.Close()
	if cmd != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

func (s *upstream) stop() {
	s.mu.Lock()
	s.retired = true
	session, cmd := s.session, s.cmd
	s.session = nil
	s.mu.Unlock()
	if session != nil {
		session.Close()
	}
	if cmd != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

type upstreamTool struct {
	s       *upstream
	name    string
	timeout time.Duration
}

// Run forwards a call that the gate and the permission allowed; upstream
// content passes through, and a protocol error is an error result.
func (t *upstreamTool) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	session, err := t.s.connect(ctx)
	if err != nil {
		return tools.Failure(err, "The tool %s__%s is not available: %v. The tool was not executed.", t.s.spec.Server, t.name, err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: t.name, Arguments: in})
	if err != nil {
		if ctx.Err() == nil {
			t.s.drop(session) // crashed or broke the protocol: a new session next time
		}
		return tools.Failure(err, "The MCP server %s failed the call of %s (%v); it is restarted for the next call. The call may have done part of its work.", t.s.spec.Server, t.name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		} else if b, err := json.Marshal(c); err == nil {
			texts = append(texts, string(b))
		}
	}
	r := tools.Result{Text: strings.Join(texts, "\n"), IsError: res.IsError, Structured: res.StructuredContent}
	if r.Text == "" && r.Structured != nil {
		b, _ := json.Marshal(r.Structured)
		r.Text = string(b)
	}
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
