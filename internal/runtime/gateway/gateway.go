// Package gateway serves tool calls: it decodes the line protocol, finds the
// tool, gates its input, decides permission and runs it, replying to every
// call exactly once (rule R2).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/tools"
)

// Options configure a Gateway.
type Options struct {
	// Workdir is the working directory tools run in; "" for none.
	Workdir string
	// Approvals seals the line protocol's asks into tokens (rule P15); nil
	// refuses an ask, since no person can be asked.
	Approvals *Approvals
	// ClientAsks is set by a front end whose client asks a person itself
	// (Claude Code's hook answers "ask"): its asks carry no token.
	ClientAsks bool
	// ClientApproved says the client's person approved the asked call
	// before it runs (the hook's exec of an approved ticket): it is
	// allowed as approved and counted against the limits (rule P19).
	ClientApproved bool
	// SpendAsks spends a client's asks at the ask, a sandboxed command's
	// too (decide.Decider.SpendAsks): the HTTP hook's, whose limits the
	// exec that runs an approved command cannot reach.
	SpendAsks bool
	// CannotAsk names a front end whose client cannot ask a person
	// (Codex's hook, "Codex's hook"): the decision refuses its asks (rule
	// P15), and records that refusal; "" for a front end that can ask.
	CannotAsk string
	// ClientTools is what a front end whose client runs tools of its own
	// (Claude Code's hook) answers for a tool the policy does not define:
	// "deny" or "ask"; an MCP tool named mcp__SERVER[__TOOL] is decided by
	// the lists' entries for it. "" refuses such a tool as unknown (P9).
	ClientTools string
	// Paths is how the front end's client writes path subjects (rule R7).
	Paths PathForm
	// Chain is the default surface chain of a line (PROTOCOL.md, "The surface").
	Chain []string
	// Protected says that a resident gateway protects the generation's
	// files and these options' already (rule R8): a gateway made for one
	// decision beside it (the HTTP hook) does not resolve them again.
	Protected bool
	// Principal is who calls through this gateway (the HTTP hook), for a
	// call that names none (Call.Principal); the decision log records it.
	Principal string
	// MaxLineBytes bounds one input line; 0 means 16 MiB.
	MaxLineBytes int
	// Logger receives the gateway's logs; nil means slog.Default().
	Logger *slog.Logger
	// Decisions records every decided call (--decision-log); nil for none.
	// While it cannot be written, no call is allowed.
	Decisions DecisionLog
	// Programs records, where Decisions is nil, the programs a call's
	// sandbox refused where they started (rule P16): the hook's exec
	// records them in the hook's log, whose call the hook recorded.
	Programs DecisionLog
	// LastReload says why the newest policy edit was rejected, and when;
	// "" when it went in force. Nil when the policy is not reloaded.
	LastReload func() (problem string, at time.Time)
	// Trace observes the steps of each call (telemetry); nil for none.
	Trace Tracer
	// Limits keeps the counts of the policy's limits (rule P19): memory
	// for one process, the state store for a fleet. Nil decides no limit
	// (check and test, which run nothing).
	Limits state.Limiter
	// Caller is who calls through this gateway (the HTTP hook) for the
	// limits, for a call that names none (Call.Caller).
	Caller *policy.Claims
	// Session is the one session the gateway serves (serve, MCP over
	// stdio: NewSession; a hook's call: StoredSession): the results of
	// its calls label it, and the policy's flows decide by those labels
	// (rule P18). A gateway that callers share (HTTP) keeps none and
	// takes each call's own (Call.Session); nil for none.
	Session Session
}

// PathForm is how a front end's client writes a path subject
// (decide.PathForm).
type PathForm = decide.PathForm

// A DecisionLog records decided calls (decisionlog.File is one).
type DecisionLog interface {
	Log(decisionlog.Record) error
	Err() error
}

// Gateway serves one session. Its policy generation can be swapped while it
// serves; each line is decided under the generation it started with (rule R3).
type Gateway struct {
	opts  Options
	log   *slog.Logger
	files *tools.FileSet
	pool  *pool // rule K3: one for the gateway, sized by the generation in force
	cur   atomic.Pointer[provision.Generation]
	swaps sync.Mutex     // held by Swap, Advance and Close
	seal  sealedSessions // the HTTP callers' sessions (rule P18)
	// hideWalk bounds the P17 walk (decide.Decider.MaxHideWalk), for its test.
	hideWalk int
}

// decider is the one decision with the gateway's options, as they are now,
// for a call in the working directory wd (Call.Workdir, the gateway's own
// when the call names none).
func (g *Gateway) decider(wd string) decide.Decider {
	dc := decide.Decider{Workdir: wd, Paths: g.opts.Paths, ClientTools: g.opts.ClientTools, ClientAsks: g.opts.ClientAsks, ClientApproved: g.opts.ClientApproved, SpendAsks: g.opts.SpendAsks, CannotAsk: g.opts.CannotAsk, FS: hostFS{}, Log: g.log, MaxHideWalk: g.hideWalk}
	if g.opts.Approvals != nil {
		dc.Approvals = g.opts.Approvals
	}
	if g.opts.Limits != nil {
		dc.Limits = limits{g}
	}
	return dc
}

// New returns a gateway serving gen, which it owns from then on: a Swap
// retires it, and so does Close.
func New(gen *provision.Generation, opts Options) *Gateway {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 16 << 20
	}
	opts.Chain = policy.Rooted(opts.Chain)
	g := &Gateway{opts: opts, log: opts.Logger, files: tools.NewFileSet(), pool: newPool(gen.Parallel.MaxConcurrency)}
	if g.log == nil {
		g.log = slog.Default()
	}
	if !opts.Protected {
		protectGateway(opts)
	}
	g.Swap(gen)
	return g
}

// Swap puts gen in force for every line that starts after it returns, and
// retires the generation it replaces: that one releases what it alone held
// once its calls in flight have finished (rule R3).
func (g *Gateway) Swap(gen *provision.Generation) *provision.Generation {
	g.swaps.Lock()
	defer g.swaps.Unlock()
	var n int64 = 1
	old := g.cur.Load()
	if old != nil {
		n = old.Number + 1
	}
	if gen.Number == 0 { // numbered once, before any line can see it
		gen.Number, gen.LoadedAt = n, time.Now()
	}
	if !g.opts.Protected {
		protect(gen)
	}
	g.pool.resize(gen.Parallel.MaxConcurrency)
	g.cur.Store(gen)
	if old != nil && old != gen {
		old.Retire()
	}
	switch {
	case !g.log.Enabled(context.Background(), slog.LevelInfo):
		// Nothing to say, and no commit to read for it.
	case gen.Commit() != "":
		g.log.Info("policy in force", "generation", gen.Number, "revision", gen.Revision, "commit", gen.Commit(), "tools", len(gen.Tools))
	default:
		g.log.Info("policy in force", "generation", gen.Number, "revision", gen.Revision, "tools", len(gen.Tools))
	}
	return gen
}

// Advance puts next, the generation that completes prev once one more of
// its MCP servers answered (provision.ProvisionNow), in force in prev's
// place, under prev's number: the same policy, one server's tools more.
// It reports false, and retires next, when prev is no longer in force (a
// reload replaced it, or the gateway closed).
func (g *Gateway) Advance(prev, next *provision.Generation) bool {
	g.swaps.Lock()
	defer g.swaps.Unlock()
	if g.cur.Load() != prev || prev.Retired() {
		next.Retire()
		return false
	}
	next.Number, next.LoadedAt = prev.Number, prev.LoadedAt
	next.CommitOf(prev)
	g.cur.Store(next)
	prev.Retire()
	g.log.Info("an MCP server answered or ran out of its bound: its tools are in force, or withheld saying why", "generation", next.Number, "waiting", next.Waits(""), "unavailable", len(next.Unavailable))
	return true
}

// Await holds a call of one of names while the generation in force waits
// for the first answer of that tool's MCP server (provision.Generation.Waits),
// or with no name a listing while it waits for any: until the server has
// answered or run out of its bound, or ctx ends. A call is then decided in
// the generation that follows, on the tool as its server declares it (or
// refused saying why), never on the open input it is withheld with
// meanwhile (rules R4, R10). It reports whether it waited.
func (g *Gateway) Await(ctx context.Context, names ...string) bool {
	waited := false
	for {
		cur := g.cur.Load()
		if !waits(cur, names) {
			return waited
		}
		select {
		case <-cur.Superseded():
			if g.cur.Load() == cur {
				return waited // closed
			}
			waited = true
		case <-ctx.Done():
			return waited
		}
	}
}

// awaitLine is Await for a line: a listing waits for every server, a
// line of calls for the servers of the tools it calls.
func (g *Gateway) awaitLine(ctx context.Context, req *request, calls []Call) {
	if req.Type == "list_tools" {
		g.Await(ctx)
		return
	}
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Name
	}
	if len(names) > 0 {
		g.Await(ctx, names...)
	}
}

func waits(cur *provision.Generation, names []string) bool {
	if len(names) == 0 {
		return cur.Waits("")
	}
	for _, n := range names {
		if n != "" && cur.Waits(n) {
			return true
		}
	}
	return false
}

// Current returns the generation in force.
func (g *Gateway) Current() *provision.Generation { return g.cur.Load() }

// LastReload says why the newest policy edit was rejected, and when; ""
// when it went in force, or when the policy is not reloaded.
func (g *Gateway) LastReload() (problem string, at time.Time) {
	if g.opts.LastReload == nil {
		return "", time.Time{}
	}
	return g.opts.LastReload()
}

// enter returns the generation in force with a call entered in it; the
// caller exits it when the line is answered.
func (g *Gateway) enter() *provision.Generation {
	for {
		c := g.cur.Load()
		if c.Enter() {
			return c
		}
	}
}

// Close retires the generation in force; it releases what it holds once
// the calls in flight have finished.
func (g *Gateway) Close() {
	g.swaps.Lock()
	defer g.swaps.Unlock()
	g.cur.Load().Retire()
}

// env is the context of a call in this session, in the working directory
// wd (rule C5).
func (g *Gateway) env(id, wd string, chain []string) *tools.Env {
	return &tools.Env{Workdir: wd, Chain: chain, CallID: id, Files: g.files, Log: g.log}
}

// Handle answers one line. It never fails: a bad line gets an error line.
func (g *Gateway) Handle(ctx context.Context, line []byte) []byte {
	return g.handle(ctx, line, string(line), nil)
}

// The forms of a line that carries calls, each answered in its own form.
type form int

const (
	notCalls     form = iota // list_tools, status
	toolUseForm              // an Anthropic tool_use block
	messageForm              // an Anthropic assistant message
	chatForm                 // a Chat Completions assistant message
	responseForm             // a Responses object
	functionForm             // a Responses function_call item
	userForm                 // a user message: the user's own words
)

// userText is the text of a user message: its content as a string, or
// its text blocks.
func userText(req *request) []string {
	out := slices.Clone(req.texts)
	for _, b := range req.Content {
		if b.Type == "text" && b.Text != "" {
			out = append(out, b.Text)
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// lineCalls is the one reading of a line's calls, for serve and check
// alike, appended to buf; err is the sentence that answers a line that
// cannot be read.
func lineCalls(req *request, buf []Call) ([]Call, form, error) {
	switch {
	case req.Role != "" && req.Type != "" && req.Type != "message":
		// "message" is the type of a Messages API response, which is an
		// assistant message passed through as it came.
		return nil, 0, fmt.Errorf("the line has both \"role\" (a message) and \"type\" %q (a single item); send one of the forms, not both", req.Type)
	case req.Role == "user" && !req.hasToolCalls:
		// The user's own words (rule P18): what arguments may come from.
		if len(userText(req)) == 0 {
			return nil, 0, errors.New("a user message needs its text: content as a string, or text blocks ({\"type\":\"text\",\"text\":\"...\"})")
		}
		return nil, userForm, nil
	case req.Role != "" || req.hasContent || req.hasToolCalls:
		if req.Role != "assistant" {
			return nil, 0, fmt.Errorf("a message line must have role \"assistant\" (the model's response, as it came) or \"user\" (the user's own words), not %q", req.Role)
		}
		if req.hasToolCalls {
			// A Chat Completions message (form 4): one batch of its tool_calls.
			calls := buf
			for _, c := range req.ToolCalls {
				calls = append(calls, openaiInput(c.ID, c.Name, c.args))
			}
			if len(calls) == 0 {
				return nil, 0, errors.New("the assistant message has no tool call (its tool_calls is empty), so there is nothing to answer; send only messages that call tools")
			}
			return calls, chatForm, nil
		}
		if req.Content == nil {
			return nil, 0, errors.New("an assistant message needs a content array of blocks")
		}
		calls := buf
		for _, b := range req.Content {
			if b.Type == "tool_use" {
				calls = append(calls, Call{ID: b.ID, Name: b.Name, Input: b.Input, Decoded: b.decoded, InputErr: b.inputErr})
			}
		}
		if len(calls) == 0 {
			return nil, 0, errors.New("the assistant message has no tool_use block, so there is nothing to answer; send only messages that call tools")
		}
		return calls, messageForm, nil
	case req.Object == "response":
		// A Responses object (form 5): its function_call items are one batch.
		calls := buf
		for _, item := range req.Output {
			if item.Type == "function_call" {
				calls = append(calls, openaiInput(item.CallID, item.Name, item.args))
			}
		}
		if len(calls) == 0 {
			return nil, 0, errors.New("the response has no function_call item, so there is nothing to answer; send only responses that call tools")
		}
		return calls, responseForm, nil
	case req.Type == "function_call":
		return append(buf, openaiInput(req.CallID, req.Name, req.args)), functionForm, nil
	case req.Type == "tool_use":
		return append(buf, Call{ID: req.ID, Name: req.Name, Input: req.Input, Decoded: req.decoded, InputErr: req.inputErr}), toolUseForm, nil
	case req.Type == "list_tools", req.Type == "status":
		return nil, notCalls, nil
	case req.Type == "":
		return nil, 0, errors.New("the line has neither \"type\" nor \"role\": send an assistant message, a tool_use block, {\"type\":\"list_tools\"} or {\"type\":\"status\"}")
	default:
		return nil, 0, fmt.Errorf("unknown line type %q: the forms are an assistant message (Anthropic or OpenAI), \"tool_use\", \"function_call\", a response object, \"list_tools\" and \"status\"", req.Type)
	}
}

// handle is Handle of line, which the caller also holds as the string
// text (decodeText), appending the reply to dst (serve's output buffer),
// encoded without encoding/json. A line of one call, the common one,
// allocates only what its input and its tool need.
func (g *Gateway) handle(ctx context.Context, line []byte, text string, dst []byte) []byte {
	var req request
	if err := decodeText(line, text, &req); err != nil {
		g.log.Warn("bad line", "error", err)
		return errorReply("%s.", err)
	}
	var one [1]Call
	calls, f, err := lineCalls(&req, one[:0])
	if err != nil {
		return errorReply("%s.", err)
	}
	if f == userForm {
		return g.userLine(&req)
	}
	if f != notCalls && g.opts.Trace != nil {
		tool := calls[0].Name
		if len(calls) > 1 {
			tool = ""
		}
		var end func(Outcome)
		ctx, end = g.step(ctx, StepCall, tool)
		defer end(Outcome{})
	}
	for i := range calls {
		calls[i].Approvals = req.Approvals
	}
	if g.cur.Load().Waits("") {
		g.awaitLine(ctx, &req, calls)
	}
	cur := g.enter()
	defer cur.Exit()
	chain, chainErr := g.LineChain(req.Surface)
	if chainErr != nil {
		g.log.Warn("line refused", "rule", "R5", "reason", chainErr)
	}
	var rs []result
	switch {
	case f == notCalls && chainErr != nil:
		return errorReply("%s", chainErr)
	case f == notCalls && req.Type == "list_tools":
		return g.listTools(cur, chain, req.Format, req.Strict)
	case f == notCalls:
		return g.status(cur)
	case chainErr != nil:
		// Refused together: the line's chain is wider than the process's.
		rs = g.refuseLine(cur, req.Surface, calls, chainErr)
	default:
		var one [1]result
		rs = g.batch(ctx, cur, chain, calls, one[:0])
	}
	switch f {
	case chatForm:
		return appendChatToolMessages(dst, rs)
	case messageForm:
		return appendUserMessage(dst, rs)
	case responseForm:
		return appendFunctionOutputs(dst, rs, false)
	case functionForm:
		return appendFunctionOutputs(dst, rs[:1], true)
	}
	return appendResult(dst, rs[0])
}

// ReadCalls reads one line as serve reads it: its calls, and the surface
// chain it names (nil for none); err is the sentence serve would answer
// the line with. Check reads its calls through it, so both read alike.
func ReadCalls(line []byte) ([]Call, []string, error) {
	req, err := decode(line)
	if err != nil {
		return nil, nil, err
	}
	calls, f, err := lineCalls(req, nil)
	if err == nil && (f == notCalls || f == userForm) {
		err = fmt.Errorf("the line is %q, which carries no call; send a tool call", req.Type)
	}
	if err != nil {
		return nil, nil, err
	}
	for i := range calls {
		calls[i].Approvals = req.Approvals
	}
	return calls, req.Surface, nil
}

// statusReply is the answer to {"type":"status"}: the generation in force
// and, when the newest policy edit was rejected, why.
type statusReply struct {
	Type        string    `json:"type"`
	Generation  int64     `json:"generation"`
	Revision    string    `json:"revision"`
	LoadedAt    time.Time `json:"loaded_at"`
	Tools       int       `json:"tools"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Unpinned are the upstream tools withheld because their definitions
	// changed since they were pinned, with how.
	Unpinned []string `json:"unpinned,omitempty"`
	// Unavailable are the upstream servers that could not be started or
	// reached at the last load, with their withheld tools (rule R4).
	Unavailable []provision.Unavailable `json:"unavailable,omitempty"`
}

func (g *Gateway) status(cur *provision.Generation) []byte {
	r := statusReply{Type: "status", Generation: cur.Number, Revision: cur.Revision, LoadedAt: cur.LoadedAt.UTC(), Tools: len(cur.Tools), Unavailable: cur.Unavailable}
	for _, n := range cur.Names() {
		if u := cur.Tools[n].Unpinned; u != "" {
			r.Unpinned = append(r.Unpinned, u)
		}
	}
	if r.LastError, r.LastErrorAt = g.LastReload(); r.LastError != "" {
		r.LastErrorAt = r.LastErrorAt.UTC()
	}
	return marshal(r)
}
