package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/codexhook"
	"aimon.dev/gw/internal/front/geminihook"
	"aimon.dev/gw/internal/front/policyref"
	"aimon.dev/gw/internal/runtime/decisionlog"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
)

// Runtimes are the agent runtimes whose hooks Hook answers.
var Runtimes = []string{cchook.Runtime, codexhook.Runtime, geminihook.Runtime}

// MaxHookInput bounds a hook input (a call, a result, a user's prompt): a
// longer one is refused, and blocks its call. A program reading one from
// a stream reads at most MaxHookInput+1 bytes of it.
const MaxHookInput = 16 << 20

// defaultLoadTimeout bounds a load when HookConfig names no bound, as
// aimon-gw's --load-timeout does by default.
const defaultLoadTimeout = 5 * time.Second

// hookRuntime is how one runtime's hook input is read and answered.
type hookRuntime struct {
	read   func([]byte) (cchook.Input, error)
	answer func(*provision.Generation, cchook.Input, igw.Options, *cchook.Wrap) any
}

var hookRuntimes = map[string]hookRuntime{
	cchook.Runtime: {cchook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return cchook.Answer(cchook.Runtime, gen, in, o, w)
	}},
	codexhook.Runtime: {codexhook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return codexhook.Answer(gen, in, o, w)
	}},
	geminihook.Runtime: {geminihook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return geminihook.Answer(gen, in, o, w)
	}},
}

// A HookConfig is what one hook process is told: what aimon-gw hook
// RUNTIME reads from its flags. AnswerHook loads the policy for the input
// it answers, since the policy's ./ patterns are read in the input's
// project.
type HookConfig struct {
	// Runtime is the agent runtime whose hook input is answered: one of
	// Runtimes.
	Runtime string
	// Policy is the policy's directory; "" for the embedded default
	// policy. LoadTimeout bounds its load (0: five seconds).
	Policy      string
	LoadTimeout time.Duration
	// Cache is the directory of compiled loads kept between hook calls,
	// verified before each use (--cache): "" for the user's cache
	// directory, "off" for none. No command the hook lets run may write it.
	Cache string
	// BeforeLoad, when set, is called before the policy is loaded afresh
	// rather than from the cache (aimon-gw resumes its collector there).
	BeforeLoad func()
	// State is where the policy's limits are counted across hook calls
	// and what the sessions have read is kept (--state): "" for the
	// user's state directory, which no tool may read or write, or a
	// redis:// or rediss:// URL for a fleet's.
	State string
	// DecisionLog is a file the call's decision is appended to before the
	// runtime runs it (--decision-log); "" for none. DecisionLogSync
	// flushes each record to the disk; DecisionLogCalls records the
	// canonical input and session for replay, DecisionLogContent the
	// results' texts and the user's words too.
	DecisionLog                                           string
	DecisionLogSync, DecisionLogCalls, DecisionLogContent bool
	// ExecBinary is an aimon-gw binary, through whose exec an allowed
	// shell command runs, in the policy's sandbox; "" answers the command
	// as sent. The embedded default policy wraps none.
	ExecBinary string
	// Logger receives why a cached load was not used; nil for none.
	Logger *slog.Logger
}

// AnswerHook answers one hook input as a process of its own does
// (aimon-gw hook RUNTIME): it loads the policy for the input's project
// (from the cache when a record verifies), decides the input through the
// one decision as Gateway.Hook does, records it in the decision log, and
// returns the answer the runtime reads on the hook's standard output. An
// error is one sentence saying why the call is blocked; a hook command
// exits 2 with it, which every runtime takes as a block.
func AnswerHook(ctx context.Context, c HookConfig, input []byte) ([]byte, error) {
	var dlog *decisionlog.File
	if c.DecisionLog != "" {
		content := c.DecisionLogContent
		var err error
		dlog, err = decisionlog.Open(c.DecisionLog, decisionlog.Options{Sync: c.DecisionLogSync,
			Detail: decisionlog.Detail{Calls: content || c.DecisionLogCalls, Content: content}})
		if err != nil {
			return nil, fmt.Errorf("%s; give --decision-log a file the gateway can append to", err.Error())
		}
		defer dlog.Close()
	}
	if c.LoadTimeout < 0 {
		return nil, fmt.Errorf("HookConfig.LoadTimeout %s is not a positive duration; give one such as 5s, or 0 for five seconds", c.LoadTimeout)
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = defaultLoadTimeout
	}
	cache := loadcache.Open(c.Cache, c.Logger)
	if _, ok := hookRuntimes[c.Runtime]; ok && cache != nil {
		// The record is read and checked while the input is read (and
		// the user's home looked up, for the state directory): the
		// load below goes on from there (reload.OnceCached takes the
		// policy's directory absolute, as here).
		dir, err := c.Policy, error(nil)
		if dir != "" {
			dir, err = filepath.Abs(dir)
		}
		if err == nil {
			cache.Prefetch(dir)
		}
	}
	call, unread := readHook(c.Runtime, input)
	if call.rt.read == nil {
		return nil, unread // no runtime's input
	}
	switch {
	case cache != nil:
		cache.Fresh = c.BeforeLoad
	case c.BeforeLoad != nil:
		c.BeforeLoad() // every load is fresh
	}
	seal := ticket.SealOnFirstUseIn(call.stateDir)
	if unread == nil && c.ExecBinary != "" && c.Policy != "" && (call.in.ToolName == "Bash" || call.in.ToolName == geminihook.Shell) {
		// A shell command's ticket: its key is read while the policy is.
		seal = ticket.SealAhead(call.stateDir)
	}
	workdir := call.workdir()
	if unread != nil {
		workdir = "" // the input's own cannot be trusted: this process's
	}
	gen, closeGen, err := reload.OnceCached(ctx, cache, true, c.Policy, workdir, c.LoadTimeout, discard)
	switch {
	case err != nil && unread != nil:
		return nil, unread // blocked, with no policy to record it under
	case err != nil:
		return nil, fmt.Errorf("the policy does not load, so the call is blocked: %v", err)
	}
	defer closeGen()
	var policyDir string
	if c.Policy != "" {
		policyDir, _ = filepath.Abs(c.Policy)
	}
	o := igw.Options{Logger: discard, Decisions: logOrNil(dlog)}
	if unread != nil {
		return nil, call.refuse(gen, o, unread)
	}
	return call.answer(gen, o, c.State, execWrap(c.ExecBinary, policyDir, c.Cache, c.State, seal, dlog))
}

// Hook decides one hook input of an agent runtime ("claude-code" for
// Claude Code's PreToolUse hook, "codex" for Codex's, "gemini-cli" for
// Gemini CLI's BeforeTool hook) under the policy in force, and returns the
// answer the runtime reads on the hook's standard output, as aimon-gw hook
// RUNTIME answers it (AnswerHook; both answer by the same path): allow,
// deny or ask, by the one decision, recorded in the decision log. A
// PostToolUse input labels the session by its result and a
// UserPromptSubmit one keeps its prompt as the user's words (rule P18);
// both answer {} unless something was not kept. Sessions and the counts
// of the policy's limits are kept in the user's state directory, as the
// hook command keeps them. The call runs on the chain the input names (a
// subagent's), in the input's cwd. An error is a sentence saying why the
// call is blocked (an input that cannot be read); a hook command exits 2
// with it, which every runtime takes as a block.
func (g *Gateway) Hook(ctx context.Context, runtime string, input []byte) ([]byte, error) {
	call, unread := readHook(runtime, input)
	if call.rt.read == nil {
		return nil, unread // no runtime's input
	}
	gen := g.enter()
	defer gen.Exit()
	// The generation is protected already; the decision log is this one's.
	o := igw.Options{Logger: g.log, Decisions: g.decisions(), Protected: true}
	if unread != nil {
		return nil, call.refuse(gen, o, unread)
	}
	ref := policyref.Of(g.Policy())
	if wd := call.workdir(); gen.Relative() && wd != "" && wd != ref.Workdir {
		// Its "./" patterns resolve in the input's project, as aimon-gw
		// hook loads the policy for each input: a load for this one.
		at, release, err := atWorkdir(ctx, ref, wd, g.log)
		if err != nil {
			return nil, fmt.Errorf("the policy does not load for the working directory %s, so the call is blocked: %w", wd, err)
		}
		defer release()
		gen, o.Protected = at, false
	}
	return call.answer(gen, o, "", execWrap(g.opts.ExecBinary, ref.Dir, "", "", ticket.SealOnFirstUseIn(call.stateDir), g.dlog))
}

// A hookCall is one hook input read, and the runtime that sent it.
type hookCall struct {
	runtime string
	rt      hookRuntime
	in      cchook.Input
	// stateDir is the user's state directory, concealed from every tool.
	stateDir string
}

// readHook reads one hook input of runtime, as its runtime writes it. An
// input that cannot be read is an error, with the call as far as it was
// read, for the decision to refuse and record (hookCall.refuse); an
// unknown runtime is an error and a call of no runtime.
func readHook(runtime string, input []byte) (hookCall, error) {
	rt, ok := hookRuntimes[runtime]
	if !ok {
		return hookCall{}, fmt.Errorf("there is no hook of the runtime %q; give one of %v", runtime, Runtimes)
	}
	if len(input) > MaxHookInput {
		// Cut, it would be refused as JSON that does not end.
		return hookCall{runtime: runtime, rt: rt}, fmt.Errorf("the hook input is more than %d MiB, which the hook does not read; it is blocked. A prompt or a call that large is better given as a file", MaxHookInput>>20)
	}
	in, err := rt.read(input)
	if err != nil {
		return hookCall{runtime: runtime, rt: rt, in: in}, err
	}
	if dir := os.Getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(dir) {
		in.Project = dir
	}
	// No tool reads the key that seals exec's tickets, nor the limits'
	// counts and sessions kept beside it (rule R8): concealed before the
	// policy is bound.
	return hookCall{runtime: runtime, rt: rt, in: in, stateDir: ticket.Conceal()}, nil
}

// workdir is where the policy's ./ patterns are read for the input:
// the project while the runtime's shell is in it. A cd into a
// subdirectory (which carries over) narrows none of them, as Claude Code
// reads its own rules against the directory it started in.
func (h hookCall) workdir() string {
	if h.in.Project != "" && strings.HasPrefix(h.in.Cwd, strings.TrimSuffix(h.in.Project, "/")+"/") {
		return h.in.Project
	}
	return h.in.Cwd
}

// refuse refuses an input that cannot be read (why) through the one
// decision under gen, recorded once; the error is the record's sentence
// (rules R7, R10).
func (h hookCall) refuse(gen *provision.Generation, o igw.Options, why error) error {
	return errors.New(cchook.Refuse(gen, h.in, o, why.Error()))
}

// answer answers the input under gen: the one path of every command hook
// answer (AnswerHook, Gateway.Hook). Sessions and limits are kept in the
// store spec names (HookConfig.State); wrap runs allowed shell commands.
func (h hookCall) answer(gen *provision.Generation, o igw.Options, spec string, wrap *cchook.Wrap) ([]byte, error) {
	in := h.in
	if len(gen.Limits) > 0 || gen.Session != nil || len(gen.Provenance) > 0 {
		st, closeState, err := hookState(spec, h.stateDir)
		switch {
		case err != nil && len(gen.Limits) > 0:
			return nil, fmt.Errorf("%v, so the call is blocked", err)
		case err != nil:
			// Each call a flow binds is refused, saying so (rule P18).
			o.Session = cchook.Session(gen, cchook.Unreachable(err), h.runtime, "", in)
		default:
			defer closeState()
			if len(gen.Limits) > 0 {
				o.Limits = st.(state.Limiter)
			}
			// What the session has read outlives this call (rule P18).
			o.Session = cchook.Session(gen, state.SessionsOf(st), h.runtime, "", in)
		}
	}
	// Named in a log that records calls under any policy, for replay.
	o.Session = cchook.Named(o.Session, o.Decisions, h.runtime, "", in)
	switch in.HookEventName {
	case cchook.UserPromptSubmit:
		// The prompt is the user's words (rule P18), and proceeds.
		return cchook.Prompt(gen, in, o), nil
	case cchook.PostToolUse:
		return cchook.Post(gen, in, o)
	}
	out, err := json.Marshal(h.rt.answer(gen, in, o, wrap))
	if err != nil {
		return nil, fmt.Errorf("cannot encode the decision: %v", err)
	}
	return out, nil
}

// hookState is where a hook keeps what outlives its call: the counts of
// the policy's limits (rule P19) and what its sessions have read (rule
// P18). A command hook's calls are processes of their own, so not in
// memory, but in the user's state directory (dir), locked between
// processes and concealed from every tool, or in the fleet's Redis
// (spec). A directory of the user's choosing is refused: the sandbox of
// the commands the hook lets run conceals only the state directory, and a
// command that could write there could spend the counts back, or reset a
// session.
func hookState(spec, dir string) (state.Store, func(), error) {
	if spec != "" && !strings.HasPrefix(spec, "redis://") && !strings.HasPrefix(spec, "rediss://") {
		return nil, nil, fmt.Errorf("--state %q is not a redis:// or rediss:// URL; the hook keeps its state in Redis, or without --state in the user's state directory %s", spec, dir)
	}
	if spec == "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("the state directory %s, where the policy's limits are counted and sessions kept, cannot be made: %v", dir, err)
		}
		// One another user made (in /var/tmp, for nobody) could have its
		// counts spent back by them.
		if err := ticket.OwnDir(dir); err != nil {
			return nil, nil, err
		}
	}
	st, err := state.Open(spec, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("the hook's state cannot be kept: %v", err)
	}
	return st, func() { st.Close() }, nil
}

// execWrap is how a hook's answer runs an allowed shell command: through
// binary's exec under the policy in policyDir, in its sandbox; nil
// without a binary, or for a policy with no directory for exec to load.
// cache (HookConfig.Cache) is passed on when it names a directory of its
// own, and the decision log dlog too, for exec to protect; spec
// (HookConfig.State) too, where exec spends an approved command from the
// limits; seal seals the tickets (ticket.SealOnFirstUseIn, or SealAhead).
func execWrap(binary, policyDir, cache, spec string, seal func(ticket.Binding) (string, error), dlog *decisionlog.File) *cchook.Wrap {
	if binary == "" || policyDir == "" {
		return nil
	}
	// exec runs only a command the hook sealed (rule P16): a ticket under
	// the key of the user's state directory, which readHook concealed.
	w := &cchook.Wrap{Binary: binary, Policy: policyDir, State: spec, Seal: seal}
	if cache != "" && cache != "off" {
		w.Cache, _ = filepath.Abs(cache)
	}
	if dlog != nil {
		w.Log, _ = filepath.Abs(dlog.Path())
		w.LogSync = dlog.Synced()
	}
	return w
}

// logOrNil keeps a nil *decisionlog.File a nil interface.
func logOrNil(l *decisionlog.File) igw.DecisionLog {
	if l == nil {
		return nil
	}
	return l
}

// discard is the logger of a gateway made for one decision.
var discard = slog.New(slog.DiscardHandler)

// enter starts a call under the generation in force.
func (g *Gateway) enter() *provision.Generation {
	for {
		if gen := g.inner.Current(); gen.Enter() {
			return gen
		}
	}
}

// decisions is the decision log the gateway was made with.
func (g *Gateway) decisions() igw.DecisionLog {
	switch {
	case g.dlog != nil:
		return g.dlog
	case g.rec != nil:
		return g.rec
	}
	return nil
}

// atWorkdir loads and binds the policy of ref for the working directory
// wd, offline, as aimon-gw hook does; release stops what it started.
func atWorkdir(ctx context.Context, ref *policyref.Ref, wd string, log *slog.Logger) (*provision.Generation, func(), error) {
	opts := []ipolicy.Option{ipolicy.WithWorkdir(wd), ipolicy.WithTimeout(ref.Timeout), ipolicy.WithContext(ctx)}
	var pg *ipolicy.Generation
	var err error
	switch {
	case ref.FS != nil:
		pg, err = ipolicy.LoadFS(ref.FS, opts...)
	case ref.Dir != "":
		pg, err = ipolicy.Load(ref.Dir, opts...)
	default:
		return nil, nil, errors.New("the policy has no files to load again")
	}
	if err != nil {
		return nil, nil, err
	}
	return reload.OnceLoaded(ctx, pg, true, ref.Timeout, log, nil)
}
