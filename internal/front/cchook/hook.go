// Package cchook decides Claude Code's tool calls as its PreToolUse hook:
// one hook input in, one decision out (allow, deny or ask), made by the
// same gate and permission lattice as every other front end.
package cchook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"

	jsonv2 "github.com/go-json-experiment/json"

	"aimon.dev/gw/internal/core/jsonwords"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/front/gatefiles"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/ticket"
)

// Runtime is Claude Code's name among the runtimes whose files the
// gateway protects (gatefiles).
const Runtime = "claude-code"

// Input is a PreToolUse hook input as Claude Code sends it; fields it adds
// later are ignored.
type Input struct {
	SessionID     string          `json:"session_id"`
	Cwd           string          `json:"cwd"`
	HookEventName string          `json:"hook_event_name"`
	ToolName      string          `json:"tool_name"`
	ToolInput     json.RawMessage `json:"tool_input"`
	ToolUseID     string          `json:"tool_use_id"`
	// ToolResponse is a PostToolUse input's result of the call.
	ToolResponse json.RawMessage `json:"tool_response"`
	// Prompt is a UserPromptSubmit input's prompt: the user's words.
	Prompt         *string `json:"prompt"`
	AgentID        string  `json:"agent_id"`
	AgentType      string  `json:"agent_type"`
	PermissionMode string  `json:"permission_mode"`
	// Project is the directory Claude Code was started in, whose settings
	// it reads (CLAUDE_PROJECT_DIR, which it gives its hooks); Cwd when
	// not given.
	Project string `json:"-"`
	// Unread is why the front end cannot decide the input as the runtime
	// means it: the one decision refuses, and records, it (rule R7).
	Unread string `json:"-"`
	// Writes are the files the call writes besides its subject, which the
	// one decision guards (Codex's apply_patch's; decide.Call.Writes).
	Writes []string `json:"-"`
}

// Output is the hook's answer.
type Output struct {
	HookSpecificOutput Specific `json:"hookSpecificOutput"`
}

// Specific is the answer's decision, "allow", "deny" or "ask", with the
// sentence Claude Code shows.
type Specific struct {
	HookEventName            string `json:"hookEventName"`
	PermissionDecision       string `json:"permissionDecision"`
	PermissionDecisionReason string `json:"permissionDecisionReason"`
	// UpdatedInput is the canonical input Claude Code runs instead of the
	// one it sent, when they differ (rule R7).
	UpdatedInput map[string]any `json:"updatedInput,omitempty"`
}

// Chain is the surface chain of a hook input: the main agent, and the
// subagent whose type the input names when the policy declares it. A
// subagent type the policy does not declare (Claude Code's own, such as
// general-purpose) is a child without a list: bounded by the agent's
// (rules P10, P11), never refused.
func Chain(gen *policy.Generation, in Input) []string {
	if in.AgentType != "" {
		if _, ok := gen.Surfaces["subagent:"+in.AgentType]; ok {
			return []string{"agent", "subagent:" + in.AgentType}
		}
	}
	return []string{"agent"}
}

// Wrap is how the hook hands Claude Code an allowed Bash command: run
// through Binary's exec under Policy, which decides it again and runs it in
// the sandbox the policy derives (rules R6, R8). Cache is the hook's load
// cache when it is not the default one, which exec protects as it does
// the default (rule R8: a record a command wrote would be a policy).
type Wrap struct {
	Binary, Policy, Cache string
	// Home and Project are where exec finds Claude Code's files, which it
	// protects as the hook does (rule R9), Env the runtime's variables
	// that move them as the hook found them (gatefiles.Where.Sealed).
	Home, Project string
	Env           []string
	// Log is the hook's decision log, which exec protects too (rule R8:
	// no tool may rewrite what was decided), and where it records the run
	// of a command a person approved before it starts (rule R10); LogSync
	// says the hook flushes each record to the disk, as exec then does.
	Log     string
	LogSync bool
	// Shell is the runtime's name for its shell tool, whose command is
	// wrapped; "" for Claude Code's Bash.
	Shell string
	// Runtime is the runtime whose files exec protects (gatefiles); ""
	// for Claude Code.
	Runtime string
	// State is the store the hook counts the policy's limits in (its
	// --state): exec spends an approved command there (rule P19); "" for
	// the user's state directory. SpentAtAsk says the hook spends asked
	// commands at the ask instead (the HTTP hook's, which counts in its
	// own memory, gateway.Options.SpendAsks): exec spends none again.
	State      string
	SpentAtAsk bool
	// caller is who sent the call wrapped (the HTTP hook's caller), whose
	// count an approved command is spent from; nil for the user's own.
	caller *policy.Claims
	// call is the id of the call wrapped, for exec's records in Log.
	call string
	// Seal seals the ticket exec runs the command with, bound to all it
	// is told (rule P16); an error blocks the call.
	Seal func(ticket.Binding) (string, error)
}

func (w *Wrap) shell() string {
	if w.Shell == "" {
		return "Bash"
	}
	return w.Shell
}

// Answer answers one hook input of runtime (gatefiles' name of it:
// Claude Code's, Codex's and Gemini CLI's hooks answer through it) under
// gen through the gateway's one decision (rule R7): paths as Claude Code
// reads them (trimmed, "~" the user's home, relative to the input's cwd,
// which must be given), tools the policy does not define by its MCP
// entries or claudeCode: unknownTools. An allowed call whose canonical
// input differs from what the runtime sent is answered with that input,
// so what runs is what was decided; with wrap, an allowed or asked shell
// call with the command wrapped in aimon-gw exec. It protects the
// runtime's files, with every other runtime's, and names its project
// directory to be made before a sandbox is (gatefiles.Protect): once,
// where each hook protected its own and Claude Code's again (issue 43).
// It decides by a Gateway made for the one input (a command hook's
// process answers one), the same path as the HTTP hook's Gateway of
// every input.
func Answer(runtime string, gen *provision.Generation, in Input, opts gateway.Options, wrap *Wrap) Output {
	g, s := gatewayOf(gen, opts)
	return g.Answer(runtime, in, s, wrap)
}

// A Sender is who sent a hook input, and its session: what the one
// decision takes with each call rather than with the gateway, so that one
// gateway decides the inputs of every caller (the HTTP hook's). The zero
// Sender is the command hook's, whose process is the user's own.
type Sender struct {
	// Principal names the caller in the decision log; Claims are its
	// token's, which the limits select callers by (rule P19).
	Principal string
	Claims    *policy.Claims
	// Session is the input's session (Session, Named); nil for none.
	Session gateway.Session
}

// A Gateway decides (or labels by) the hook inputs of one generation,
// reading each as Claude Code writes it: paths trimmed, ~ the user's home,
// relative to the input's own cwd (each call's, gateway.Call.Workdir:
// the gateway has none of its own); tools the policy does not define by
// their MCP entries or unknownTools. It holds nothing of any one input, so
// one serves every input of its generation at once (the HTTP hook's).
type Gateway struct {
	gen *provision.Generation
	// gw is the gateway, made at its first call: an input that needs
	// none (a PostToolUse the policy labels nothing by) costs none.
	gw   func() *gateway.Gateway
	home string
	// ceiling is the callers' chain, which an input's must begin with
	// (rule R5); nil for none: the input's own is decided.
	ceiling []string
	records bool // the decision log records calls (RecordsCalls)
	// quiet is gw without the decision log: a second reading of a result
	// labels without recording it again (Label).
	quiet func() *gateway.Gateway
}

// NewGateway is the Gateway of the hook inputs under gen, with the options
// of every call: opts.Chain is a ceiling the inputs' chains must begin with
// (a caller's, rule R5), nil for none; its Workdir, Session, Principal and
// Caller are ignored, since they are each input's (Sender, the input's
// cwd). gen stays its caller's, who holds it entered while a call of the
// Gateway lasts: the Gateway decides under it, and never retires it.
func NewGateway(gen *provision.Generation, opts gateway.Options) *Gateway {
	home, _ := os.UserHomeDir()
	opts.Workdir, opts.Session, opts.Principal, opts.Caller = "", nil, "", nil
	opts.Paths = gateway.PathForm{Home: home, Trim: true}
	opts.ClientTools, opts.ClientAsks = unknown(gen.Generation), true
	g := &Gateway{gen: gen, home: home, ceiling: opts.Chain, records: gateway.RecordsCalls(opts.Decisions)}
	// The gateway's chain is the ceiling; without one, the root, which
	// every input's chain begins with.
	g.gw = sync.OnceValue(func() *gateway.Gateway { return gateway.New(gen, opts) })
	quiet := opts
	quiet.Decisions = nil
	g.quiet = sync.OnceValue(func() *gateway.Gateway { return gateway.New(gen, quiet) })
	return g
}

// gatewayOf is the Gateway of one input decided with opts (the command
// hook's), and its sender.
func gatewayOf(gen *provision.Generation, opts gateway.Options) (*Gateway, Sender) {
	return NewGateway(gen, opts), Sender{Principal: opts.Principal, Claims: opts.Caller, Session: opts.Session}
}

// call is the gateway's call of in, sent by s, in the input's cwd.
func (s Sender) call(id string, in Input) gateway.Call {
	return gateway.Call{ID: id, Name: in.ToolName, Workdir: in.Cwd, Principal: s.Principal, Caller: s.Claims, Session: s.Session}
}

// Answer is Answer by g, of one input of runtime that s sent, with wrap
// (nil: the shell's command answered as sent).
func (g *Gateway) Answer(runtime string, in Input, s Sender, wrap *Wrap) Output {
	gen, home := g.gen, g.home
	chain := Chain(gen.Generation, in)
	// The files that make the runtime call the gateway are protected as
	// the policy is: no tool switches the gate off (rule R9). Another
	// runtime's project is its cwd, whatever CLAUDE_PROJECT_DIR says.
	projects := []string{in.Project}
	if in.Project == "" {
		in.Project = in.Cwd
		projects[0] = in.Cwd
	} else if runtime != Runtime && in.Cwd != in.Project {
		projects = append(projects, in.Cwd)
	}
	for _, project := range projects {
		if err := gatefiles.Protect(runtime, gatefiles.Where{Home: home, Project: project, Env: os.Getenv, Cwd: processCwd()}); err != nil {
			return Blocked(fmt.Sprintf("%s is refused: %v, so the files that make it call the gateway cannot be protected.", in.ToolName, err))
		}
	}
	// A leading cd moves Claude Code's shell, outside the sandbox; what
	// follows it is decided, and runs, in the directory it moves to.
	cdDir, cdFrom := "", in.Cwd
	// A bare cd is answered by moving the shell, allowed by the one
	// decision with that answer's sentence, and recorded (R10).
	var moves *rule.Decision
	var moved map[string]any
	// Nothing moves for an input the decision below refuses unread or
	// above the caller's chain.
	within := g.ceiling == nil || policy.Extends(g.ceiling, chain)
	if wrap != nil && wrap.Shell == "" && in.ToolName == wrap.shell() && in.Cwd != "" && in.Unread == "" && within {
		var call map[string]any
		if json.Unmarshal(in.ToolInput, &call) == nil {
			cmd, _ := call["command"].(string)
			if written, rest, ok := leadingCd(cmd); ok {
				switch dir, read, why := cdTarget(gen, chain, in, home, wrap.shell(), written); {
				case why != "":
					in.Unread = why // refused, and recorded, by the one decision (R7)
				case rest == "":
					call["command"] = cdPrefix(dir, cdFrom)
					moves = &rule.Decision{Allowed: true, Rule: read.Rule, Entries: read.Entries, Effective: read.Effective,
						Reason: fmt.Sprintf("%s cd %s moves Claude Code's working directory to %s, in the project.", wrap.shell(), written, dir)}
					moved = call
				default:
					call["command"] = rest
					in.ToolInput, _ = json.Marshal(call)
					in.Cwd, cdDir = dir, dir
				}
			}
		}
	}
	id := in.ToolUseID
	if id == "" {
		id = "hook"
	}
	// The command exec runs, its ticket sealed before the decision is
	// recorded: a ticket that cannot be sealed refuses the call in the
	// decision, and the record says so (rules P16, R10).
	var wrapped string
	var complete func(rule.Decision) rule.Decision
	if wrap != nil && in.ToolName == wrap.shell() && moves == nil {
		w := *wrap
		w.call = id
		w.caller = s.Claims
		if s.Principal != "" && (w.caller == nil || w.caller.Subject == "") {
			c := policy.Claims{Subject: s.Principal}
			if s.Claims != nil {
				c.Groups, c.Client = s.Claims.Groups, s.Claims.Client
			}
			w.caller = &c
		}
		w.Home, w.Project = home, in.Project
		w.Env = gatefiles.Where{Home: home, Project: in.Project, Env: os.Getenv, Cwd: processCwd()}.Sealed()
		complete = func(d rule.Decision) rule.Decision {
			cmd, ok := d.Input["command"].(string)
			if d.Sandbox == nil || d.Sandbox.Off || !ok {
				return d
			}
			var err error
			if wrapped, err = w.command(chain, in.Cwd, cmd, d.Ask, gen.Revision, d.Sandbox.Labels, timeoutMS(d.Input["timeout"], d.Input["run_in_background"])); err != nil {
				refused := rule.Refused(rule.P16, fmt.Sprintf("%s is refused: the hook cannot seal the ticket its sandbox runs the command with: %v.", in.ToolName, strings.TrimSuffix(err.Error(), ".")))
				refused.Effective, refused.Entries = d.Effective, d.Entries
				return refused
			}
			return d
		}
	}
	// An input without tool_input, or with null, is refused as serve
	// refuses a call without input (rule R7): Claude Code always sends
	// an object, {} for a tool without parameters.
	c := s.call(id, in)
	c.Input, c.Unread, c.Writes, c.Moves = in.ToolInput, in.Unread, in.Writes, moves
	// The runtime runs it: what it may read labels the session at this
	// decision, since a failed call's PostToolUse never comes (rule P18).
	c.Handed = true
	if in.Cwd == "" && c.Unread == "" {
		c.Unread = "The hook input has no cwd, so the paths of the call cannot be read as Claude Code reads them; the call is blocked. Run the hook from Claude Code, which always sends cwd."
	}
	_, d := g.gw().DecideIn(context.Background(), g.gen, chain, c, complete)
	out := Blocked(d.Reason)
	switch {
	case d.Allowed:
		out.HookSpecificOutput.PermissionDecision = "allow"
	case d.Ask:
		out.HookSpecificOutput.PermissionDecision = "ask"
	default:
		return out
	}
	if moves != nil {
		out.HookSpecificOutput.UpdatedInput = moved
		return out
	}
	updated := d.Input
	if wrapped != "" {
		updated = maps.Clone(updated)
		updated["command"] = wrapped
	}
	if cdDir != "" {
		if updated == nil {
			json.Unmarshal(in.ToolInput, &updated)
		}
		if cmd, ok := updated["command"].(string); ok {
			updated = maps.Clone(updated)
			updated["command"] = cdPrefix(cdDir, cdFrom) + " && " + cmd
		}
	}
	if changed(in.ToolInput, updated) {
		out.HookSpecificOutput.UpdatedInput = updated
	}
	return out
}

// command is cmd run through aimon-gw exec with the ticket sealed for it
// under revision, every word quoted for the shell Claude Code starts, so
// that it sees the command as one argument.
func (w *Wrap) command(chain []string, cwd, cmd string, asked bool, revision string, labels []string, timeout int) (string, error) {
	b := ticket.Binding{Command: cmd, Chain: chain, Workdir: cwd, Policy: w.Policy, Revision: revision, Approved: asked, Cache: w.Cache, Protect: w.Log, Labels: labels, Timeout: timeout}
	if w.Log != "" {
		b.Call = w.call
	}
	words := []string{w.Binary, "exec", "--policy", w.Policy, "--surface", strings.Join(chain, ","), "--workdir", cwd}
	if asked {
		words = append(words, "--approved")
		switch {
		case w.SpentAtAsk:
			// Spent at the ask, where the hook counts (rule P19).
			words = append(words, "--limits-spent")
			b.SpentAtAsk = true
		case w.State != "":
			// Where the hook counts the limits, which exec spends the
			// approved command from (rule P19).
			// A password in its URL is kept in the state directory, not
			// in the command the runtime shows and logs.
			shown, err := ticket.Mask(ticket.Dir(), w.State)
			if err != nil {
				return "", err
			}
			words = append(words, "--state", shown)
			b.State = shown
		}
		if c := w.caller; c != nil {
			// Whose count it is spent from, and under whom exec records
			// its run: the caller the hook decided for.
			if c.Subject != "" {
				words = append(words, "--caller", c.Subject)
			}
			for _, g := range c.Groups {
				words = append(words, "--caller-group", g)
			}
			if c.Client != "" {
				words = append(words, "--caller-client", c.Client)
			}
			b.Caller, b.CallerGroups, b.CallerClient = c.Subject, c.Groups, c.Client
		}
	}
	if w.Cache != "" {
		words = append(words, "--cache", w.Cache)
	}
	if w.Log != "" {
		words = append(words, "--protect", w.Log, "--call-id", w.call)
		if w.LogSync {
			words = append(words, "--decision-log-sync")
			b.LogSync = true
		}
	}
	if w.Project != "" {
		runtime := w.Runtime
		if runtime == "" {
			runtime = Runtime
		}
		words = append(words, "--runtime", runtime, "--runtime-home", w.Home, "--runtime-project", w.Project)
		b.Runtime, b.RuntimeHome, b.RuntimeProject = runtime, w.Home, w.Project
		for _, kv := range w.Env {
			words = append(words, "--runtime-env", kv)
		}
		b.RuntimeEnv = w.Env
	}
	// The path the runtime started this hook by, when it goes through a
	// symbolic link: exec refuses commands that could repoint the link
	// (rules R8, R9). A real path is the binary's, which exec protects.
	// Started by a bare name, the places on PATH before the one it was
	// found at: exec refuses commands that could put a program there.
	shadows := sandbox.Shadows()
	if started := sandbox.StartedAs(); started != "" && (sandbox.RealPath(started) != started || len(shadows) > 0) {
		words = append(words, "--started-as", started)
		b.StartedAs = started
		for _, s := range shadows {
			words = append(words, "--shadow", s)
		}
		b.Shadows = shadows
	}
	if w.Shell != "" {
		// exec decides the command as the runtime's shell tool, whose
		// entries the policy lists (run_shell_command(git status)).
		words = append(words, "--tool", w.Shell)
		b.Tool = w.Shell
	}
	if timeout != 0 {
		// The call's own bound, which exec keeps (rule R8).
		words = append(words, "--timeout", strconv.Itoa(timeout))
	}
	if len(labels) > 0 {
		// The session's labels when the hook decided: exec bounds the
		// command by their flows as the decision did (rule P18).
		words = append(words, "--labels", strings.Join(labels, ","))
	}
	if w.Seal == nil {
		return "", errors.New("it was given no key to seal tickets with")
	}
	t, err := w.Seal(b)
	if err != nil {
		return "", err
	}
	words = append(words, "--ticket", t, "--", cmd)
	for i, word := range words {
		words[i] = "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
	}
	return strings.Join(words, " "), nil
}

// changed reports whether the canonical input differs from the one sent.
func changed(sent json.RawMessage, canon map[string]any) bool {
	if canon == nil {
		return false
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(sent))
	dec.UseNumber()
	if dec.Decode(&m) != nil {
		return true
	}
	return !reflect.DeepEqual(m, canon)
}

func unknown(gen *policy.Generation) string {
	if gen.UnknownTools == "ask" {
		return "ask"
	}
	return "deny"
}

// ReadInput reads a PreToolUse hook input, or a PostToolUse one, whose
// result labels the session, or a UserPromptSubmit one, whose prompt is
// the user's words (rule P18). An error is a sentence saying why the call
// (or the prompt) is blocked: not such an input with a tool_name (or a
// prompt), an input for another event, a cwd that is not an absolute
// directory. An input without cwd is read: the one decision refuses, and
// records, it.
// Names are read exactly, as Claude Code writes them (TOOL_NAME is not
// tool_name), and a name given twice, at any depth, refuses the input
// rather than have its last value win.
func ReadInput(data []byte) (Input, error) {
	in, err := readInput(data)
	if err != nil {
		// json v2 reads it again for the words of what is wrong.
		in = Input{}
		if err = jsonv2.Unmarshal(data, &in); err == nil {
			err = errors.New("it cannot be read token by token")
		}
		return in, fmt.Errorf("the hook input is not a PreToolUse input that can be read one way only (%s); the call is blocked.", jsonwords.Problem(err))
	}
	switch {
	case in.HookEventName == UserPromptSubmit && in.Prompt == nil:
		return in, errors.New(`the UserPromptSubmit hook input has no "prompt" (names are read exactly as Claude Code writes them), so the user's words cannot be kept; the prompt is blocked. Run the hook from Claude Code, which sends the prompt.`)
	case in.HookEventName == UserPromptSubmit:
	case in.ToolName == "":
		return in, errors.New(`the hook input has no "tool_name" (names are read exactly as Claude Code writes them); the call is blocked.`)
	case in.HookEventName != "" && in.HookEventName != "PreToolUse" && in.HookEventName != PostToolUse:
		return in, fmt.Errorf("the hook input is for the %s event, and aimon-gw answers only PreToolUse, PostToolUse and UserPromptSubmit; the call is blocked. Configure it under hooks.PreToolUse (and hooks.PostToolUse, whose results label the session, and hooks.UserPromptSubmit, whose prompts are the user's words) in settings.json.", in.HookEventName)
	}
	return in, CheckCwd(in.Cwd)
}

// CheckCwd is ReadInput's check of an input's cwd, for a front that reads
// its runtime's input itself: none, or an absolute directory.
func CheckCwd(cwd string) error {
	if st, err := os.Stat(cwd); cwd != "" && (err != nil || !st.IsDir() || !filepath.IsAbs(cwd)) {
		return fmt.Errorf("the hook input's cwd %q is not an absolute directory; the call is blocked.", cwd)
	}
	return nil
}

// Refuse refuses, through the one decision, a hook input that cannot be
// read as its runtime wrote it (why, ReadInput's sentence), and records
// it once (rules R7, R10); it returns the sentence the runtime is answered
// with, the record's.
func Refuse(gen *provision.Generation, in Input, opts gateway.Options, why string) string {
	g, s := gatewayOf(gen, opts)
	return g.Refuse(in, s, why)
}

// Refuse is Refuse by g, of an input s sent.
func (g *Gateway) Refuse(in Input, s Sender, why string) string {
	id := in.ToolUseID
	if id == "" {
		id = "hook"
	}
	// On the caller's chain, else the input's as far as it was read.
	surface := g.ceiling
	if surface == nil {
		surface = Chain(g.gen.Generation, in)
	}
	c := s.call(id, in)
	c.Workdir, c.Unread = "", why // its cwd is not known to be one
	_, d := g.gw().DecideIn(context.Background(), g.gen, surface, c, nil)
	return d.Reason
}

// Blocked is the answer that blocks a call with a sentence.
func Blocked(reason string) Output {
	return Output{Specific{HookEventName: "PreToolUse", PermissionDecision: "deny", PermissionDecisionReason: reason}}
}

// processCwd is the hook process's working directory, where the runtime
// started it; "" when it cannot be told.
func processCwd() string {
	wd, _ := os.Getwd()
	return wd
}

// timeoutMS is a shell call's timeout in milliseconds, as its input
// gives it (Claude Code's Bash: "timeout"); 0 for none or one that is no
// positive whole number; -1 for a command run in the background, which
// runs until the runtime stops it (its KillShell, the session's end: a
// signal exec passes on), as Claude Code bounds it by no timeout.
func timeoutMS(v, background any) int {
	if b, _ := background.(bool); b {
		return -1
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case json.Number:
		f, _ = n.Float64()
	}
	if f < 1 || f > 1<<31 {
		return 0
	}
	return int(f)
}
