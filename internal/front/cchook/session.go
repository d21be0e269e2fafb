package cchook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/state"
)

// PostToolUse is the hook event whose input carries a tool's result: the
// hook labels the session by it (rule P18), and decides nothing.
const PostToolUse = "PostToolUse"

// Session is the session of a hook input (rule P18): the runtime's own
// session id (Claude Code's session_id, which its subagents share, so a
// subagent's reading labels its caller's session), kept in store under
// the runtime's name and scope (the HTTP hook's caller; "" for the command
// hook, whose store is the user's own), so that the labels outlive the
// process of one call. Nil when the policy has neither sessions nor a
// provenance of arguments. An input
// without a session id gets a session that cannot be read: a call a flow
// binds is refused, never decided as if nothing had been read.
func Session(gen *provision.Generation, store state.Sessions, runtime, scope string, in Input) gateway.Session {
	if gen.Session == nil && len(gen.Provenance) == 0 {
		return nil
	}
	if in.SessionID == "" {
		return gateway.StoredSession(noSession(runtime), "")
	}
	if store == nil {
		store = Unreachable(errors.New("the hook has no state store to keep the session's labels in"))
	}
	return gateway.StoredSession(store, storedID(runtime, scope, in))
}

// storedID names the session of in in a store and the decision log.
func storedID(runtime, scope string, in Input) string {
	return runtime + "\x00" + scope + "\x00" + in.SessionID
}

// Named is s, the session of a hook input (Session), or when the policy
// keeps none and the decision log records calls (--decision-log-calls),
// a session that only names the input's session id in the log, as
// Session would, and keeps nothing in any store: so that replay
// re-decides the session under a candidate that labels its results or
// reads its user's words (rule P18), and a plain policy touches no state.
// Nil for an input without a session id: its records name no session.
func Named(s gateway.Session, decisions gateway.DecisionLog, runtime, scope string, in Input) gateway.Session {
	if s != nil || in.SessionID == "" || !gateway.RecordsCalls(decisions) {
		return s
	}
	return gateway.StoredSession(state.MemorySessions(), storedID(runtime, scope, in))
}

// noSession is the store of a hook input that names no session.
func noSession(runtime string) state.Sessions {
	return Unreachable(fmt.Errorf("the hook input names no session_id, so what the session has read is not known; run the hook from %s, which sends one", runtime))
}

// Unreachable is a store of sessions that answers err: the hook's, when
// its state directory cannot be opened.
func Unreachable(err error) state.Sessions { return unreachable{err} }

type unreachable struct{ err error }

func (u unreachable) AddLabel(context.Context, string, string, []byte, time.Time) error { return u.err }
func (u unreachable) Labels(context.Context, string) (map[string][]byte, error)         { return nil, u.err }
func (u unreachable) AddWords(context.Context, string, []byte, time.Time) error         { return u.err }
func (u unreachable) Words(context.Context, string) ([][]byte, error)                   { return nil, u.err }

// Label gives the session of a PostToolUse input the labels that its
// call's result gives (rule P18), reading the call as the PreToolUse hook
// did (paths as Claude Code writes them, in its cwd, on its chain). An
// error is a sentence: the label could not be kept.
func Label(gen *provision.Generation, in Input, opts gateway.Options) ([]string, error) {
	g, s := gatewayOf(gen, opts)
	return g.Label(in, s)
}

// Label is Label by g, of an input s sent.
func (g *Gateway) Label(in Input, s Sender) ([]string, error) {
	if s.Session == nil && !g.records {
		return nil, nil
	}
	chain := Chain(g.gen.Generation, in)
	call := s.call(in.ToolUseID, in)
	call.Input = in.ToolInput
	// A label not kept is answered with the sentence its result's
	// record holds (gateway.Unkept).
	labels, err := g.gw().LabelIn(context.Background(), g.gen, chain, call, string(in.ToolResponse))
	if inner := unwrapped(call.Input); err == nil && string(inner) != string(call.Input) {
		// Both readings label: a command made to look wrapped gets the
		// labels of all it says. The decision log records the result
		// once, above.
		var more []string
		call.Input = inner
		more, err = g.quiet().LabelIn(context.Background(), g.gen, chain, call, string(in.ToolResponse))
		labels = append(labels, more...)
	}
	return labels, err
}

// unwrapped is a Bash input whose command the hook wrapped in aimon-gw
// exec (Wrap.command) with its command as decided: the runtime may report
// the input it ran, and the labels are of what was asked too.
func unwrapped(input json.RawMessage) json.RawMessage {
	var call map[string]any
	if json.Unmarshal(input, &call) != nil {
		return input
	}
	cmd, _ := call["command"].(string)
	i := strings.LastIndex(cmd, " '--' '")
	if i < 0 || !strings.Contains(cmd[:i], " 'exec' ") || !strings.HasSuffix(cmd, "'") {
		return input
	}
	inner := cmd[i+len(" '--' '") : len(cmd)-1]
	if strings.Contains(strings.ReplaceAll(inner, `'\''`, ""), "'") {
		return input // not one quoted word
	}
	call["command"] = strings.ReplaceAll(inner, `'\''`, "'")
	out, _ := json.Marshal(call)
	return out
}

// Post answers a PostToolUse input: its result labels the session (rule
// P18), and the answer ({}) asks the runtime for nothing. An error is a
// sentence; the hook exits 2 with it, which the runtime shows the model.
func Post(gen *provision.Generation, in Input, opts gateway.Options) (json.RawMessage, error) {
	g, s := gatewayOf(gen, opts)
	return g.Post(in, s)
}

// Post is Post by g, of an input s sent.
func (g *Gateway) Post(in Input, s Sender) (json.RawMessage, error) {
	if _, err := g.Label(in, s); err != nil {
		return nil, err
	}
	return json.RawMessage("{}"), nil
}

// UserPromptSubmit is the hook event whose input carries the prompt the
// user submitted: the user's own words, which arguments the policy's
// provenance names may come from (rule P18).
const UserPromptSubmit = "UserPromptSubmit"

// MaxPrompt bounds what the hook keeps of one prompt as the user's words.
const MaxPrompt = state.MaxWords

// taskReport begins the prompt by which Claude Code hands the model a
// background task's report: what a subagent read, not the user's words.
const taskReport = "<task-notification>"

// Prompt answers a UserPromptSubmit input: when the policy requires
// arguments to come from somewhere, its prompt is kept in the session as
// the user's words (rule P18); the answer lets the prompt proceed. A
// prompt not kept whole (past MaxPrompt, whose first MaxPrompt bytes are
// kept; past the session's bound; a store that does not answer) proceeds
// too, and the answer's systemMessage tells the user what was not kept:
// a value only it holds is refused later, never let through. Under a
// policy that keeps none, the prompt is only recorded, when the decision
// log records calls.
func Prompt(gen *provision.Generation, in Input, opts gateway.Options) json.RawMessage {
	g, s := gatewayOf(gen, opts)
	return g.Prompt(in, s)
}

// Prompt is Prompt by g, of an input s sent.
func (g *Gateway) Prompt(in Input, s Sender) json.RawMessage {
	text := *in.Prompt
	keep := len(g.gen.Provenance) > 0 && s.Session != nil
	if !keep && !g.records || text == "" || strings.HasPrefix(text, taskReport) {
		return json.RawMessage("{}")
	}
	var note string
	if len(text) > MaxPrompt {
		cut := MaxPrompt
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		note = fmt.Sprintf("aimon-gw kept the first %d KiB of this prompt's %d KiB as your words; a value the policy requires to come from your words is refused if only the rest holds it: give it in a shorter prompt.", cut>>10, len(text)>>10)
		text = text[:cut]
	}
	if !keep {
		// Recorded as what a policy that reads them would keep, and
		// kept nowhere: this one reads none of the user's words.
		g.gw().RecordUserWords(s.Session, text)
		return json.RawMessage("{}")
	}
	if err := g.gw().KeepUserWords(context.Background(), s.Session, text); err != nil {
		note = fmt.Sprintf("aimon-gw did not keep this prompt as your words (%s); a value the policy requires to come from your words is refused until a prompt is kept.", strings.TrimSuffix(err.Error(), "."))
	}
	if note == "" {
		return json.RawMessage("{}")
	}
	out, _ := json.Marshal(map[string]string{"systemMessage": note})
	return out
}
