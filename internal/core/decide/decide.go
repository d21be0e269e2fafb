// Package decide is the one decision of a tool call (rule R7), which every
// front end reaches through the gateway: the tool (P9, P11, P13), the gate
// (S4, S9), the canonical call (R7), the lattice (P1–P14), the guards
// (R6, R8, R9), the session's flows and provenance (P18), a person's
// approval (P15), the sandbox a command runs in (R6, P17) and the limits
// (P19, last). It is pure over the policy's generation and a Call, which
// is no protocol's type: what it asks of the file system is asked of an
// FS, and what holds state (sessions, approval tokens, limits' counts) is
// behind interfaces the runtime implements. It records and runs nothing:
// the gateway records each decision before anything acts on it (R10).
package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/tools"
)

// A Call is one call as a front end read it.
type Call struct {
	ID, Name string
	// Workdir is the working directory the call is read and decided in
	// (its relative paths, a search's default directory, a command's
	// sandbox): a hook input's cwd, when one gateway decides the calls of
	// many directories (the HTTP hook); "" for the gateway's own.
	Workdir string
	// Input is the call's input as JSON.
	Input json.RawMessage
	// Decoded is the input when the front end's reader decoded it in the
	// same pass (the line protocol's), and InputErr why the gate could not.
	Decoded  map[string]any
	InputErr error
	// Unread is why the front end could not read the call as its client
	// meant it (a hook input without a working directory); the call is
	// refused with that sentence (rule R7).
	Unread string
	// Refusal is a refusal the front end made before the decision (a
	// sealed session handle that fails verification, rule P18): the one
	// decision refuses with it, and records it with its rule.
	Refusal *rule.Decision
	// Moves is, for a call the front end answers by moving its client's
	// shell (Claude Code's bare "cd DIR", a directory the front end found
	// in the project and the lists let be read), the allow it answers
	// with, its sentence the answer's: the one decision allows the call
	// with it once the tool is found and listed, and records it (R10).
	Moves *rule.Decision
	// Writes are the files the client writes besides the subject, as it
	// will (absolute; Codex's apply_patch's): each is refused as a write of
	// a path subject is where the gateway reads or runs (rules R8, R9).
	Writes []string
	// Approvals are tokens a person gave for this call (rule P15).
	Approvals []string
	// Handed says the front end hands the call to its client to run once
	// it is allowed or asked (a hook's): the decision labels the session
	// as the call's result would (rule P18), since the front end may never
	// see the result (a failure, a crash of the hook's post step).
	Handed bool
	// Principal is who called, when the front end knows (HTTP): the
	// decision log records it.
	Principal string
	// Caller is who called as the limits select callers (rule P19): the
	// claims of its token, when the front end knows them.
	Caller *policy.Claims
	// Session is the caller's session (rule P18), when the gateway's
	// callers each have one (HTTP); nil for the gateway's own.
	Session Session
}

// Prepared is a call whose tool, effective list and input are known well
// enough to tell whether it may join a parallel batch. When the call was
// decided before its input is gated (refused, or a client's own tool),
// Settled holds that decision.
type Prepared struct {
	Call
	Chain []string
	Gen   *policy.Generation
	Tool  *policy.Tool
	Eff   *allow.Effective
	Ceil  Ceiling
	// In is the input as the gate decoded it.
	In      tools.Input
	Settled *rule.Decision
	// At is when the call's decision began, when that was read (the
	// limits' clock, rule P19); zero otherwise.
	At time.Time
	// Bound is Eff with the flows of the labels the session held when
	// the call was decided (rule P18), which its sandbox and the programs
	// its command starts are held to (Decide sets it for a sandboxed
	// tool); nil for Eff alone.
	Bound *allow.Effective
}

// Programs is what the programs a command of p starts are judged by
// (rule P16): its entries with its session's flows.
func (p *Prepared) Programs() *allow.Effective {
	if p.Bound != nil {
		return p.Bound
	}
	return p.Eff
}

// Settle settles p's decision before its input is gated.
func (p *Prepared) Settle(d rule.Decision) { p.Settled = &d }

// Ceiling is a chain's side-effect ceiling (rule P13) and the surface
// that sets it; Effect "" is none.
type Ceiling struct{ Effect, By string }

// CeilingOf is chain's ceiling under gen.
func CeilingOf(gen *policy.Generation, chain []string) Ceiling {
	e, by := gen.Ceiling(chain)
	return Ceiling{e, by}
}

// Listed is the names of the tools the surface may use, sorted: those with
// an entry (rule P9) within the ceiling (rule P13).
func Listed(gen *policy.Generation, eff *allow.Effective, ceil Ceiling) []string {
	var names []string
	for _, n := range gen.Sorted() {
		if t := gen.Tools[n]; eff.Listed(n) && !policy.Above(t.Effect, ceil.Effect) && t.Unpinned == "" && t.Unavailable == "" {
			names = append(names, n)
		}
	}
	return names
}

// A Decider decides calls for one front end: the options of the gateway
// that serves it (gateway.Options says what each means), and what answers
// its questions of the world.
type Decider struct {
	Workdir     string
	Paths       PathForm
	ClientTools string // "deny" or "ask"; "" when the client runs no tools of its own
	// ClientAsks: the client asks a person itself, so its asks carry no
	// token; one it then runs itself is spent from the limits at the ask.
	ClientAsks bool
	// ClientApproved says the client's person approved this asked call
	// before it ran (the hook's exec of an approved ticket): the ask is
	// allowed as approved, and counted against the limits as an approved
	// call of serve is, here where it runs (rule P19), never at the ask.
	ClientApproved bool
	// SpendAsks spends every ask of the client's at the ask, a sandboxed
	// command's too: the HTTP hook's, whose limits are counted in its own
	// memory, which the exec that runs an approved command cannot reach
	// (rule P19).
	SpendAsks bool
	// CannotAsk names a front end whose client cannot ask a person
	// (Codex's hook): an ask is refused there, by P15, in this decision,
	// so that what it answers is what the decision log records.
	CannotAsk string
	FS        FS
	Approvals Approvals    // nil: no person can be asked, an ask is refused (P15)
	Limits    Limiter      // nil decides no limit (P19)
	Log       *slog.Logger // the sandboxes'
	// MaxHideWalk bounds the entries the P17 walk visits for one command;
	// 0 means 200,000.
	MaxHideWalk int
}

// Approvals opens a person's approval token for a call, spending it, and
// seals a new one for an asked call (rule P15).
type Approvals interface {
	Open(token, tool string, in tools.Input, chain []string, revision, workdir string) error
	Seal(tool string, in tools.Input, chain []string, revision, workdir string) (string, time.Time)
}

// ErrNotThisCall is what Approvals.Open says of a token sealed for another
// call: looked past, as a batch's tokens are each for one of its calls.
var ErrNotThisCall = errors.New("the approval token was given for another call")

// A Limiter spends from the limits that select an allowed call (rule
// P19): it returns d, or the refusal of a limit that allows no more. The
// call is passed by value, so that deciding it allocates nothing more.
type Limiter interface {
	Limit(p Prepared, d rule.Decision) rule.Decision
}

// Refuse is the decision that refuses a call by id, its sentence ending
// as every refused call's does.
func Refuse(id rule.ID, why string) rule.Decision { return rule.Refused(id, NotExecuted(why)) }

// Prepare finds the tool and checks that the surface lists it (rule P9).
// eff is the chain's effective list, computed once per line; chainErr is
// why the chain cannot run.
func (dc *Decider) Prepare(gen *policy.Generation, chain []string, eff *allow.Effective, ceil Ceiling, chainErr error, c Call) Prepared {
	p := Prepared{Call: c, Chain: chain, Gen: gen, Eff: eff, Ceil: ceil}
	switch {
	case c.Unread != "":
		p.Settle(rule.Refused(rule.R7, c.Unread))
		return p
	case c.Refusal != nil:
		p.Settle(*c.Refusal)
		return p
	}
	if chainErr != nil {
		p.Settle(Refuse(rule.P11, chainErr.Error()))
		return p
	}
	t, ok := gen.Tools[c.Name]
	if !ok {
		if dc.ClientTools != "" {
			p.Settle(clientTool(gen, chain, dc.ClientTools, c.Name))
			return p
		}
		p.Settle(rule.Refused(rule.P9, unknownTool(c.Name, Listed(gen, eff, ceil))))
		return p
	}
	p.Tool = t
	if code, why := t.Withheld(); why != "" {
		p.Settle(Refuse(code, why))
		return p
	}
	if policy.Above(t.Effect, ceil.Effect) {
		// Neither listed nor allowed, whatever the lists say (rule P13).
		d := rule.Refused(rule.P13, aboveCeiling(t.Name, t.Effect, ceil.Effect, ceil.By))
		d.Ceiling = ceil.Effect
		p.Settle(d)
		return p
	}
	if !eff.Listed(c.Name) {
		// Not allowed, a different sentence from unknown (rule P9).
		p.Settle(eff.Unlisted(c.Name))
		return p
	}
	if c.Moves != nil {
		p.Settle(*c.Moves)
		return p
	}
	if len(c.Input) == 0 && c.Decoded == nil {
		p.Settle(rule.Refused(rule.R2, noInput(c.Name)))
		return p
	}
	if c.InputErr != nil {
		p.Settle(rule.Refused(rule.S4, badInput(c.Name, c.InputErr)))
		return p
	}
	in := c.Decoded
	if in == nil {
		var err error
		if in, err = gate.Decode(c.Input, gate.DefaultLimits); err != nil {
			p.Settle(rule.Refused(rule.S4, badInput(c.Name, err)))
			return p
		}
	}
	p.In = in
	return p
}

// Decide gates a prepared call's input and decides its permission: the
// call's one decision.
func (dc *Decider) Decide(p *Prepared) rule.Decision {
	if p.Settled != nil {
		return *p.Settled
	}
	mode := p.Tool.Validation
	// The gate (rules S4, S9).
	var vs []tools.Violation
	var violations []string
	if mode != rule.Off {
		vs = p.Tool.Gate.Check(p.In)
		for _, x := range vs {
			violations = append(violations, x.Sentence)
		}
	}
	if len(vs) > 0 && mode == rule.Enforce {
		d := rule.Refused(rule.S9, tools.Sentences(vs, false))
		d.Violations, d.Mode = violations, mode
		return d
	}
	// The canonical call (rule R7): what permission is decided on is what
	// runs. A subject the tool leaves out stands for its declared default
	// (Glob and Grep search the working directory), so the decision is
	// about what the tool will do (rule P2).
	in, why := Canonical(p.Tool, p.In, dc.Workdir, dc.Paths)
	if why != "" {
		d := rule.Refused(rule.R7, why)
		d.Violations, d.Mode = violations, mode
		return d
	}
	// Permission (rules P2–P11).
	d := p.Eff.DecideAsWritten(p.Name, in, Written(p.Tool, p.In), dc.Workdir)
	d = dc.flows(p, in, d)      // what the session has read (rule P18)
	d = dc.provenance(p, in, d) // where its arguments came from (rule P18)
	if d.Allowed || d.Ask {
		d = dc.reach(p, in, dc.secret(p, in, dc.protectWrites(p, dc.protectSubject(p.Tool, in, dc.leading(p, in, dc.landing(p, in, d))))))
	}
	d.Effective, d.Violations, d.Mode, d.Ceiling = p.Eff.Entries(p.Name), violations, mode, p.Ceil.Effect
	d.Input = in
	if d.Ask {
		d = dc.approve(p, d)
	}
	if p.Tool.Sandbox != nil {
		// What the session's labels deny or ask for binds the command's
		// writes, reads and programs as it binds the call (rules P18,
		// P14, P16, P17): one decision, from the same lists.
		bound, labels, err := dc.bound(p)
		if err != nil && (d.Allowed || d.Ask) {
			d = rule.Refused(rule.P18, fmt.Sprintf("%s was not run: a flow of the policy bounds its sandbox by what the session has read, and the session's labels cannot be read (%v); try again once the state store answers.", p.Name, strings.TrimSuffix(err.Error(), ".")))
		}
		p.Bound = bound
		d.Sandbox = dc.Sandbox(p.Gen, bound, p.Tool)
		d.Sandbox.Labels = labels
		if !d.Sandbox.Off {
			// What labels the session does not hold yet name, its
			// commands do not read (rule P18): a Read of it labels.
			for _, h := range p.Gen.LabelHidden(labels, dc.Workdir) {
				if !slices.Contains(d.Sandbox.Hidden, h) {
					d.Sandbox.Hidden = append(d.Sandbox.Hidden, h)
				}
			}
		}
		if d.Allowed || d.Ask {
			if why := dc.hideFiles(p.Gen, bound, d.Sandbox); why != "" {
				d = rule.Refused(rule.P17, fmt.Sprintf("%s %s.", p.Name, why))
			}
		}
		// Claude Code's Bash may ask to leave its sandbox; only a policy
		// whose sandbox is off lets it (rule R8).
		if off, _ := in["dangerouslyDisableSandbox"].(bool); off && !d.Sandbox.Off && (d.Allowed || d.Ask) {
			d = rule.Refused(rule.R8, fmt.Sprintf("%s was not run: it asks to run outside its sandbox (dangerouslyDisableSandbox), which this policy does not allow; run it without that, or turn the tool's sandbox off in the policy.", p.Name))
		}
	}
	// Limits last, once nothing else refuses: a refused call spends
	// nothing (rule P19).
	if dc.Limits != nil && len(p.Gen.Limits) > 0 {
		switch {
		case d.Allowed:
			d = dc.Limits.Limit(*p, d)
		case d.Ask && dc.ClientAsks && (d.Sandbox == nil || d.Sandbox.Off || dc.SpendAsks):
			d = dc.spendAsk(p, d)
		}
	}
	return d
}

// spendAsk spends d, an ask of a call the client runs itself once its
// person says yes, at the ask, from the limits it would spend approved:
// no exec of ours runs it to spend it there (a sandboxed command's does),
// and the approval is never seen, so the count at the ask is the one that
// holds (rule P19). One the person refuses is spent all the same, on the
// side of the limit; one the limit allows no more is refused, not asked.
func (dc *Decider) spendAsk(p *Prepared, d rule.Decision) rule.Decision {
	a := p.Eff.Approved(p.Name, d.Input, Written(p.Tool, p.In), dc.Workdir)
	if !a.Allowed {
		return d
	}
	as := d
	as.Allowed, as.Ask, as.Entries = true, false, a.Entries
	if l := dc.Limits.Limit(*p, as); !l.Allowed {
		return l
	}
	return d
}

// Approved reports whether a person's approval let d, an asked call, run
// (rule P15): the programs its command starts are then judged as approved.
func Approved(d rule.Decision) bool { return d.Allowed && d.Rule == rule.P15 }

// The sentences the decision says to a model about a call, one
// constructor per kind, so that a fix to one is one edit. Refusals of a
// call end with NotExecuted; a listing never does.

// NotExecuted ends the sentence of a refused call.
func NotExecuted(s string) string {
	s = strings.TrimSpace(s)
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s + " The tool was not executed."
}

func unknownTool(name string, names []string) string {
	if name == "" {
		return fmt.Sprintf("The call names no tool; give the tool's name in its \"name\". Available tools: %s.", strings.Join(names, ", "))
	}
	msg := fmt.Sprintf("Unknown tool '%s'.", name)
	if near := tools.Closest(name, names); near != "" {
		msg += fmt.Sprintf(" Did you mean '%s'?", near)
	}
	return msg + fmt.Sprintf(" Available tools: %s.", strings.Join(names, ", "))
}

func noInput(tool string) string {
	return NotExecuted(fmt.Sprintf("The call to '%s' has no input; send its parameters as a JSON object (a tool_use block's \"input\", an OpenAI call's \"arguments\").", tool))
}

func badInput(tool string, err error) string {
	return NotExecuted(fmt.Sprintf("The input of '%s' cannot be used: %s.", tool, strings.TrimSuffix(err.Error(), ".")))
}

// cannotAsk is the refusal of an ask (reason) where front cannot ask a
// person.
func cannotAsk(reason, front string) string {
	reason = strings.TrimSpace(reason)
	if reason != "" && !strings.HasSuffix(reason, ".") {
		reason += "."
	}
	return fmt.Sprintf("%s The policy asks a person to approve this call, and %s cannot ask one, so the call is refused; approve it where a person can be asked (aimon-gw mcp with an elicitation client), or change the policy.", reason, front)
}

func aboveCeiling(tool, effect, ceiling, by string) string {
	return fmt.Sprintf("%s is not allowed on this surface: its side effect is %s, above the ceiling %s that %s sets (max-effect), so it is neither listed nor allowed here whatever the lists say.", tool, effect, ceiling, by)
}

// approve turns an ask into an allow when the call carries a token a person
// gave for it, and otherwise seals a new token into the decision (P15).
func (dc *Decider) approve(p *Prepared, d rule.Decision) rule.Decision {
	if dc.CannotAsk != "" {
		// The ask entries that decided stay the record's entries.
		d.Ask, d.Rule, d.Reason = false, rule.P15, cannotAsk(d.Reason, dc.CannotAsk)
		return d
	}
	if dc.ClientApproved {
		return dc.approved(p, d)
	}
	if dc.ClientAsks {
		return d
	}
	a := dc.Approvals
	if a == nil {
		d.Reason += " No person can be asked through this front end, so the call is refused."
		return d
	}
	var why error
	for _, tok := range p.Approvals {
		err := a.Open(tok, p.Name, d.Input, p.Chain, p.Gen.Revision, dc.Workdir)
		if err == nil {
			return dc.approved(p, d)
		}
		if why == nil && !errors.Is(err, ErrNotThisCall) {
			why = err
		}
	}
	if why != nil {
		d.Reason = fmt.Sprintf("The approval given with the call was not accepted: %s. %s", why, d.Reason)
	}
	d.Approval, _ = a.Seal(p.Name, d.Input, p.Chain, p.Gen.Revision, dc.Workdir)
	return d
}

// approved is d, an asked call a person approved, allowed (rule P15).
func (dc *Decider) approved(p *Prepared, d rule.Decision) rule.Decision {
	// The allow entries, not the ask entries, are what the approved call
	// runs under (its anchors among them).
	a := p.Eff.Approved(p.Name, d.Input, Written(p.Tool, p.In), dc.Workdir)
	if !a.Allowed {
		return a
	}
	d.Allowed, d.Ask, d.Rule, d.Entries = true, false, rule.P15, a.Entries
	d.Reason = fmt.Sprintf("%s is allowed: a person approved this call. (%s)", p.Name, d.Reason)
	return d
}

// FS is what the decision asks of the file system, which the runtime
// answers (the host's, with the gateway's protected and concealed paths):
// where a path a client opens itself really leads, what a search below a
// directory would read, what a write would overwrite of the gateway's,
// and which files a command's sandbox hides.
type FS interface {
	// LandsAt is where path leads once its links are followed, a dangling
	// link where it points (a client writes there).
	LandsAt(path string) string
	// RealPath is path with its links resolved as far as it exists.
	RealPath(path string) string
	// IsDir reports whether path is a directory.
	IsDir(path string) bool
	// Concealing is the secret of the gateway's (a key that seals its
	// tickets or approvals) that one of paths is or holds; "" for none.
	Concealing(paths ...string) string
	// ConcealedBelow is such a secret below the directory dir; "" for none.
	ConcealedBelow(dir string) string
	// WriteRefusal is why a write at path is refused, because the gateway
	// reads or runs what it names (rule R8), or it is a file that makes a
	// runtime call the gateway (gate, rule R9); "" when it may be written.
	WriteRefusal(path string) (why string, gate bool)
	// Existing is path, or its nearest ancestor that exists.
	Existing(path string) string
	// Home is the user's home directory, "" when it is not known.
	Home() string
	// WalkDir walks the tree at root as fs.WalkDir does.
	WalkDir(root string, fn fs.WalkDirFunc) error
}

// Bounds on a line's surface chain: chains come from callers, and each
// distinct one is remembered by the generation (issue 11).
const (
	MaxChainRefs  = 16
	MaxChainBytes = 4096
)

// LineChain is the surface chain a call runs on (rule R5): ceiling, the
// chain of the gateway that decides it (rooted), or the call's own, which
// must begin with the whole of ceiling and may only go deeper. surface nil
// means the call gave none. The error is the R5 refusal's sentence.
func LineChain(ceiling, surface []string) ([]string, error) {
	if surface == nil {
		return ceiling, nil
	}
	size := 0
	for _, r := range surface {
		size += len(r)
	}
	if len(surface) > MaxChainRefs || size > MaxChainBytes {
		return nil, fmt.Errorf("The line's surface chain has %d references (%d bytes); at most %d references and %d bytes are accepted. Send the chain of the run that made the call.", len(surface), size, MaxChainRefs, MaxChainBytes)
	}
	line := policy.Rooted(surface)
	if !policy.Extends(ceiling, line) {
		return nil, fmt.Errorf("The call's surface chain %s does not begin with this gateway's chain %s, which a call may only extend; send a chain that starts with it, or none.", show(line), show(ceiling))
	}
	return line, nil
}

func show(chain []string) string { return "[" + strings.Join(chain, ", ") + "]" }
