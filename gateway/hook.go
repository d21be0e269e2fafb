package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/cchook"
	"aimon.dev/gw/internal/front/codexhook"
	"aimon.dev/gw/internal/front/geminihook"
	"aimon.dev/gw/internal/front/policyref"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/ticket"
)

// Runtimes are the agent runtimes whose hooks Hook answers.
var Runtimes = []string{cchook.Runtime, codexhook.Runtime, geminihook.Runtime}

// hookRuntime is how one runtime's hook input is read and answered.
type hookRuntime struct {
	read   func([]byte) (cchook.Input, error)
	decide func(*provision.Generation, cchook.Input, igw.Options, *cchook.Wrap) any
}

var hookRuntimes = map[string]hookRuntime{
	cchook.Runtime: {cchook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return cchook.DecideWrapped(gen, in, o, w)
	}},
	codexhook.Runtime: {codexhook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return codexhook.Decide(gen, in, o, w)
	}},
	geminihook.Runtime: {geminihook.ReadInput, func(gen *provision.Generation, in cchook.Input, o igw.Options, w *cchook.Wrap) any {
		return geminihook.Decide(gen, in, o, w)
	}},
}

// Hook decides one hook input of an agent runtime ("claude-code" for
// Claude Code's PreToolUse hook, "codex" for Codex's, "gemini-cli" for
// Gemini CLI's BeforeTool hook) under the policy in force, and returns the
// answer the runtime reads on the hook's standard output, as aimon-gw hook
// RUNTIME answers it: allow, deny or ask, by the one decision, recorded in
// the decision log. A PostToolUse input labels the session by its result
// and a UserPromptSubmit one keeps its prompt as the user's words (rule
// P18); both answer {} unless something was not kept. The call runs on
// the chain the input names (a subagent's), in the input's cwd. An error is a sentence saying why the
// call is blocked (an input that cannot be read); a hook command exits 2
// with it, which every runtime takes as a block.
func (g *Gateway) Hook(ctx context.Context, runtime string, input []byte) ([]byte, error) {
	rt, ok := hookRuntimes[runtime]
	if !ok {
		return nil, fmt.Errorf("there is no hook of the runtime %q; give one of %v", runtime, Runtimes)
	}
	in, err := rt.read(input)
	if err != nil {
		return nil, err
	}
	if dir := os.Getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(dir) {
		in.Project = dir
	}
	gen := g.enter()
	defer gen.Exit()
	// The generation is protected already; the decision log is this one's.
	o := igw.Options{Logger: g.log, Decisions: g.decisions(), Protected: true}
	if ref := policyref.Of(g.Policy()); gen.Relative() && in.Cwd != "" && in.Cwd != ref.Workdir {
		// Its "./" patterns resolve in the runtime's cwd, as aimon-gw
		// hook loads the policy for each input: a load for this one.
		at, release, err := atWorkdir(ctx, ref, in.Cwd, g.log)
		if err != nil {
			return nil, fmt.Errorf("the policy does not load for the working directory %s, so the call is blocked: %w", in.Cwd, err)
		}
		defer release()
		gen, o.Protected = at, false
	}
	if gen.Session != nil || len(gen.Provenance) > 0 {
		// What the session has read, and the user's words, outlive the
		// call (rule P18), kept where aimon-gw hook keeps them.
		store, err := ticket.Sessions()
		if err != nil {
			store = cchook.Unreachable(err)
		}
		o.Session = cchook.Session(gen, store, runtime, "", in)
	}
	o.Session = cchook.Named(o.Session, o.Decisions, runtime, "", in) // for replay
	switch in.HookEventName {
	case cchook.UserPromptSubmit:
		// The prompt is the user's words (rule P18), and proceeds.
		return cchook.Prompt(gen, in, o), nil
	case cchook.PostToolUse:
		return cchook.Post(gen, in, o)
	}
	out, err := json.Marshal(rt.decide(gen, in, o, g.wrap()))
	if err != nil {
		return nil, fmt.Errorf("the decision cannot be encoded: %w", err)
	}
	return out, nil
}

// enter starts a call under the generation in force.
func (g *Gateway) enter() *provision.Generation {
	for {
		if gen := g.inner.Current(); gen.Enter() {
			return gen
		}
	}
}

// wrap is how the hook's answer runs an allowed shell command, through
// Options.ExecBinary's exec under the policy; nil without one, or for a
// policy with no directory for exec to load.
func (g *Gateway) wrap() *cchook.Wrap {
	dir := policyref.Of(g.Policy()).Dir
	if g.opts.ExecBinary == "" || dir == "" {
		return nil
	}
	// exec runs only a command the hook sealed (rule P16): a ticket under
	// the key of the user's state directory, as aimon-gw hook seals it.
	seal := func(b ticket.Binding) (string, error) {
		s, err := ticket.NewSealer()
		if err != nil {
			return "", err
		}
		return s.Seal(b), nil
	}
	w := &cchook.Wrap{Binary: g.opts.ExecBinary, Policy: dir, Seal: seal}
	if g.dlog != nil {
		w.Log, _ = filepath.Abs(g.dlog.Path())
	}
	return w
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
