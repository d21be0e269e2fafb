package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/decide"
	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/exec/builtin"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/front/gatefiles"
	"aimon.dev/gw/internal/runtime/decisionlog"
	igw "aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
)

// An ExecRequest is one shell command a hook answered with a command
// wrapped in aimon-gw exec (HookConfig.ExecBinary), and everything the
// hook told exec with it, each bound to the command's ticket.
type ExecRequest struct {
	// Policy is the policy's directory, Surface the chain the command was
	// decided on, Workdir the absolute directory it runs in, Command the
	// command bash -c runs.
	Policy  string
	Surface []string
	Workdir string
	Command string
	// Ticket is what the hook sealed for this command (rule P16): without
	// a valid one nothing runs. Approved says the ticket was sealed for
	// an ask, which the runtime puts to a person before it runs the
	// command; it grants nothing the ticket does not say.
	Ticket   string
	Approved bool
	// LoadTimeout bounds the policy's load (0: five seconds).
	LoadTimeout time.Duration
	// Cache is the hook's cache of compiled loads, protected in the
	// sandbox; the policy itself is loaded afresh.
	Cache string
	// Protect is the hook's decision log, protected in the sandbox; the
	// programs the sandbox refuses are recorded in it under the call's id
	// Call (rule P16). A command a person approved is recorded there
	// before it runs and its result after (rule R10), each record flushed
	// to the disk with LogSync, as the hook's are (--decision-log-sync).
	Protect, Call string
	LogSync       bool
	// Runtime is the agent runtime whose files are protected in the
	// sandbox (rule R9), found from its user's home and its project, and
	// from RuntimeEnv, the variables that move them as the hook found
	// them (NAME=PATH), besides exec's own environment. StartedAs is the
	// path the runtime started the hook by, protected with its links.
	Runtime, RuntimeHome, RuntimeProject string
	RuntimeEnv                           []string
	StartedAs                            string
	// Shadows are the places on PATH before StartedAs where the runtime's
	// shell would find a program of the gateway's bare name first: no
	// command runs that could put one there (rules R8, R9).
	Shadows []string
	// Tool is the runtime's shell tool the command is decided as; "" for
	// Bash (Gemini CLI's is run_shell_command).
	Tool string
	// Labels are the labels the hook's session held when it decided the
	// command (rule P18), as its ticket says: the command is decided, and
	// its sandbox bounded, by their flows.
	Labels []string
	// State is where the hook counts the policy's limits (its --state),
	// which an approved command is spent from (rule P19): "" for the
	// user's state directory, or the fleet's redis:// or rediss:// URL.
	// The ticket binds it.
	State string
	// Caller, CallerGroups and CallerClient are who sent the call (the
	// HTTP hook's caller): an approved command is spent from their count
	// and recorded under Caller. SpentAtAsk says the hook spent it at the
	// ask (the HTTP hook's limits are in its memory): exec spends nothing.
	// The ticket binds them.
	Caller, CallerClient string
	CallerGroups         []string
	SpentAtAsk           bool
	// Timeout bounds the command, in milliseconds, as its call asked
	// (Claude Code's Bash timeout): 0 for Bash's default, two minutes;
	// ten at most (rule R8); -1 for a command the runtime runs in the
	// background, which the runtime's signal ends. The ticket binds it.
	Timeout int
	// The command's standard streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ExitNotRun is the exit status of a command Exec does not run, as a
// shell says of a command that cannot be executed.
const ExitNotRun = 126

// An ExitError is how Exec ended other than by the command's success:
// the exit status to end with (ExitNotRun for a command not run, the
// command's own status, 2 for what the runtime gave that cannot be acted
// on) and the sentence saying why, "" when the command or its sandbox said
// why on standard error already.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Reason
}

func notRun(format string, args ...any) error {
	return &ExitError{Code: ExitNotRun, Reason: fmt.Sprintf(format, args...)}
}

// Exec runs the command of r only with the ticket the hook sealed for it
// (rule P16), decides it again as a call of the shell tool on r.Surface,
// through the one decision (rule R7), and runs it with bash -c in the
// call's sandbox (rules R6, R8), its standard streams r's: what aimon-gw
// exec does. The ticket is checked before the policy it names is even
// loaded, so a policy the agent wrote is never read. A command that ran
// and succeeded returns nil; every other end is an *ExitError.
func Exec(ctx context.Context, r ExecRequest) (err error) {
	// ran records an approved command's result once it ran, or was
	// stopped short after its run was recorded (DecideToRun).
	var ran func(isErr bool)
	var dlog *decisionlog.File
	defer func() {
		if ran != nil {
			ran(err != nil)
		}
		if dlog != nil {
			dlog.Close() // after the result's record
		}
	}()
	if len(r.Surface) == 0 {
		return &ExitError{Code: 2, Reason: "ExecRequest.Surface is empty; give the chain the hook decided the command on, such as [\"agent\"]"}
	}
	if !filepath.IsAbs(r.Workdir) {
		return &ExitError{Code: 2, Reason: fmt.Sprintf("ExecRequest.Workdir %q is not an absolute directory; give the directory the hook decided the command in", r.Workdir)}
	}
	if r.LoadTimeout < 0 {
		return &ExitError{Code: 2, Reason: fmt.Sprintf("ExecRequest.LoadTimeout %s is not a positive duration; give one such as 5s, or 0 for five seconds", r.LoadTimeout)}
	}
	if r.LoadTimeout == 0 {
		r.LoadTimeout = defaultLoadTimeout
	}
	if r.Runtime != "" {
		// What the hook sealed, and what exec's own environment says
		// (a relative variable from its working directory too).
		wd, _ := os.Getwd()
		w := gatefiles.Where{Home: r.RuntimeHome, Project: r.RuntimeProject, Env: os.Getenv, Cwd: wd}
		if err := w.Unseal(r.RuntimeEnv); err != nil {
			return &ExitError{Code: 2, Reason: fmt.Sprintf("the command was not run: --runtime-env %v (the hook sets it)", err)}
		}
		if err := gatefiles.Protect(r.Runtime, w); err != nil {
			return &ExitError{Code: 2, Reason: fmt.Sprintf("the command was not run: %v", err)}
		}
	}
	if r.StartedAs != "" {
		if !filepath.IsAbs(r.StartedAs) {
			return &ExitError{Code: 2, Reason: fmt.Sprintf("the command was not run: --started-as %q is not an absolute path (the hook sets it)", r.StartedAs)}
		}
		sandbox.Protect(sandbox.WhatStartedAs, r.StartedAs)
	}
	for _, s := range r.Shadows {
		if !filepath.IsAbs(s) || r.StartedAs == "" {
			return &ExitError{Code: 2, Reason: fmt.Sprintf("the command was not run: --shadow %q is not an absolute path given with --started-as (the hook sets both)", s)}
		}
	}
	sandbox.ProtectShadows(r.StartedAs, r.Shadows...)
	tk, err := checkTicket(r)
	if err != nil {
		return err
	}
	defer tk.Close()
	loadcache.Open(r.Cache, nil) // protected, as every cache a command names
	if r.Protect != "" {
		if abs, err := filepath.Abs(r.Protect); err == nil {
			sandbox.Protect(sandbox.WhatLog, abs)
		}
	}
	gen, closeGen, err := reload.Once(ctx, r.Policy, r.Workdir, r.LoadTimeout, discard)
	if err != nil {
		if r.Policy == "" {
			return notRun("%v", err)
		}
		return notRun("the policy in %s does not load:\n%v", r.Policy, err)
	}
	defer closeGen()
	if err := tk.Spend(ctx, gen.Revision); err != nil {
		return refuseTicket(err)
	}
	opts := igw.Options{Workdir: r.Workdir, Chain: r.Surface, Logger: discard, ClientAsks: true}
	if tk.Approved {
		// The person approved the ask, and the command runs now: the
		// call is spent from the policy's limits here, as serve spends an
		// approved call, in the state the hook counts in (rule P19). The
		// hook counted nothing at the ask, and a refused ask never runs
		// exec, so each approved call is spent once.
		opts.ClientApproved, opts.Limits = true, tk.Limits()
		if r.SpentAtAsk {
			opts.Limits = nil // spent at the ask, where the hook counts
		}
		if r.State != "" && !r.SpentAtAsk && len(gen.Limits) > 0 {
			// The fleet's store, where the hook counts: spent anywhere
			// else, the approved command would spend nothing the next
			// call's hook sees.
			l, closeLimits, err := execLimits(r.State)
			if err != nil {
				return notRun("the command was not run: %v", err)
			}
			defer closeLimits()
			opts.Limits = l
		}
	}
	if r.Protect != "" {
		// The hook recorded the call; the programs its sandbox refuses
		// are recorded beside it, and nothing runs that could not be.
		l, err := decisionlog.Open(r.Protect, decisionlog.Options{Sync: r.LogSync})
		switch {
		case err != nil && tk.Approved:
			return notRun("the command was not run: %v; a person approved it, and its run is recorded there before it starts (rule R10)", err)
		case err != nil:
			return notRun("the command was not run: %v; the programs its sandbox refuses could not be recorded there", err)
		}
		dlog = l
		if tk.Approved {
			// The hook recorded an ask, and what the person approved
			// runs here: its decision is recorded before it runs and its
			// result after, as serve records a run (rule R10).
			opts.Decisions = l
		} else {
			opts.Programs = l
		}
	}
	id := r.Call
	if id == "" {
		id = "exec"
	}
	tool := r.Tool
	if tool == "" {
		tool = "Bash"
	}
	gw := igw.New(gen, opts)
	input, _ := json.Marshal(map[string]string{"command": r.Command})
	c := igw.Call{ID: id, Name: tool, Input: input}
	if tk.Approved && (r.Caller != "" || r.CallerClient != "" || len(r.CallerGroups) > 0) {
		// The hook's caller, as its ticket says: the approved command is
		// spent from their count, and recorded under them (rules P19, R10).
		c.Principal, c.Caller = r.Caller, &policy.Claims{Subject: r.Caller, Groups: r.CallerGroups, Client: r.CallerClient}
	}
	if len(r.Labels) > 0 {
		// The hook's session as it decided the command, held to the
		// ticket (rule P18): what its labels' flows deny the command does
		// not run, write, read or start.
		c.Session = igw.NewSession()
		if err := c.Session.Gain(ctx, r.Labels, igw.Source{Tool: "a call the hook decided"}); err != nil {
			return notRun("the command was not run: its session's labels cannot be held: %v", err)
		}
	}
	var d rule.Decision
	if tk.Approved {
		_, d, ran = gw.DecideToRun(ctx, nil, c)
	} else {
		_, d = gw.Decide(nil, c)
	}
	if !d.Allowed {
		return notRun("the command was not run: %s", d.Reason)
	}
	if d.Sandbox == nil {
		return notRun("the command was not run: the policy's %s has no sandbox; give it one (sandbox: mode: \"required\")", tool)
	}
	argv := []string{"bash", "-c", r.Command}
	cmd := exec.Command(argv[0], argv[1:]...)
	if !d.Sandbox.Off {
		if err := sandbox.Available(); err != nil {
			return notRun("the command was not run: it must run in a sandbox, and %v", err)
		}
		if err := sandbox.Bounded(); err != nil {
			return notRun("the command was not run: %v", err)
		}
		if j := d.Sandbox.Exec; j != nil && tk.Approved && decide.Approved(d) {
			j.Approved = allow.SimpleCommands(r.Command) // what the person approved (rule P16)
		}
		// What the sandbox's proxy refuses goes to the command's stderr.
		d.Sandbox.Log = slog.New(slog.NewTextHandler(r.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if cmd, err = sandbox.Command(d.Sandbox, r.Workdir, argv, nil, nil); err != nil {
			if withheld := (sandbox.Withheld{}); errors.As(err, &withheld) {
				return notRun("the command was not run: %v", err)
			}
			return notRun("the command was not run: its sandbox cannot be made: %v", err)
		}
		defer sandbox.Release(cmd)
		defer sandbox.Finish(cmd)
	}
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = r.Workdir, r.Stdin, r.Stdout, r.Stderr
	if err := cmd.Start(); err != nil {
		return notRun("the command could not be started: %v", err)
	}
	err, stop := waitBounded(ctx, cmd, execTimeout(r.Timeout), !d.Sandbox.Off)
	if stop == stopTimeout {
		return &ExitError{Code: ExitTimedOut, Reason: fmt.Sprintf("the command was stopped after its timeout of %s, as every call is bounded in time (rule R8); give the call a longer timeout (at most %s), or run what takes longer in the background", execTimeout(r.Timeout), time.Duration(builtin.MaxBashTimeout)*time.Millisecond)}
	}
	if j := d.Sandbox.Exec; j != nil && !d.Sandbox.Off && len(j.Refusals()) > 0 {
		return &ExitError{Code: ExitNotRun} // the tracer said why on stderr (rule P16)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &ExitError{Code: 128 + int(ws.Signal())} // as a shell says of a killed command
		}
		return &ExitError{Code: exit.ExitCode()}
	case err != nil:
		return notRun("the command could not be waited for: %v", err)
	}
	return nil
}

// ExitTimedOut is the exit status of a command Exec stopped at its
// timeout, as timeout(1) says.
const ExitTimedOut = 124

// execGrace is how long a command has to end once it was asked to stop
// (a signal to exec, its timeout) before its sandbox is killed whole.
const execGrace = 3 * time.Second

// execTimeout is the bound of a command whose call asked for ms
// milliseconds: Bash's default for none, its maximum at most, as serve
// bounds its Bash (rule R8); none (0) for one in the background (-1).
func execTimeout(ms int) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		ms = builtin.DefaultBashTimeout
	case ms > builtin.MaxBashTimeout:
		ms = builtin.MaxBashTimeout
	}
	return time.Duration(ms) * time.Millisecond
}

// How a command's wait ended.
type execStop int

const (
	stopExited execStop = iota
	stopSignal
	stopTimeout
)

// waitBounded waits for cmd, started, to end (rules R8, R10): SIGTERM,
// SIGINT and SIGHUP sent to exec, and the end of ctx, are passed on to
// the command in its sandbox, as its timeout is (SIGTERM); what has not
// ended execGrace later is killed, its sandbox whole (sandboxed: its pids
// group; else the process started).
func waitBounded(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, sandboxed bool) (error, execStop) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	why := stopExited
	var grace <-chan time.Time
	stop := func(sig syscall.Signal, as execStop) {
		if why == stopExited {
			why = as
		}
		if sandboxed {
			sandbox.Signal(cmd, sig)
		} else {
			cmd.Process.Signal(sig)
		}
		if grace == nil {
			grace = time.After(execGrace)
		}
	}
	ctxDone := ctx.Done()
	for {
		select {
		case err := <-done:
			return err, why
		case s := <-sigs:
			stop(s.(syscall.Signal), stopSignal)
		case <-ctxDone:
			ctxDone = nil
			if why == stopExited {
				stop(syscall.SIGTERM, stopSignal)
			}
		case <-expired:
			stop(syscall.SIGTERM, stopTimeout)
		case <-grace:
			grace = make(chan time.Time) // once; Wait ends with the kill
			if sandboxed {
				sandbox.Kill(cmd)
			} else {
				cmd.Process.Kill()
			}
		}
	}
}

// execLimits is the limiter of the store spec names (ExecRequest.State):
// the fleet's Redis, as the hook's --state takes it.
func execLimits(spec string) (state.Limiter, func(), error) {
	spec, err := ticket.Unmask(ticket.Dir(), spec)
	if err != nil {
		return nil, nil, err
	}
	if !strings.HasPrefix(spec, "redis://") && !strings.HasPrefix(spec, "rediss://") {
		return nil, nil, fmt.Errorf("--state %q is not a redis:// or rediss:// URL, where the hook counts the policy's limits (the hook sets it)", spec)
	}
	st, err := state.Open(spec, "")
	if err != nil {
		return nil, nil, fmt.Errorf("the store the policy's limits are counted in cannot be opened: %v", err)
	}
	l := state.LimiterOf(st)
	if l == nil {
		st.Close()
		return nil, nil, fmt.Errorf("--state %q keeps no limits a fleet shares", spec)
	}
	return l, func() { st.Close() }, nil
}

// sealedTicket is a checked ticket and the store it is spent in.
type sealedTicket struct {
	*ticket.Ticket
	checker *ticket.Checker
}

func (t sealedTicket) Close() { t.checker.Close() }

// checkTicket checks that r carries a ticket the hook sealed for exactly
// this command line; its revision and spend are checked once the policy
// is loaded. Without one nothing runs, whatever the request says.
func checkTicket(r ExecRequest) (sealedTicket, error) {
	if r.Ticket == "" {
		return sealedTicket{}, notRun("the command was not run: it carries no ticket, and exec runs only a command the hook decided and sealed a ticket for (rule P16); send it as the agent's tool call, whose hook (aimon-gw hook claude-code, codex or gemini-cli) hands exec its ticket, or run it in a shell of your own")
	}
	policy := r.Policy
	if policy != "" {
		policy, _ = filepath.Abs(policy)
	}
	chk, err := ticket.NewChecker()
	if err != nil {
		return sealedTicket{}, notRun("the command was not run: its ticket cannot be checked: %v; exec runs only as the hook's user, outside any sandbox, once the hook has sealed a ticket", err)
	}
	t, err := chk.Check(r.Ticket, ticket.Binding{Command: r.Command, Chain: r.Surface, Workdir: r.Workdir, Policy: policy, Approved: r.Approved,
		Cache: r.Cache, Protect: r.Protect, Call: r.Call, Runtime: r.Runtime, RuntimeHome: r.RuntimeHome, RuntimeProject: r.RuntimeProject, Tool: r.Tool, Labels: r.Labels,
		RuntimeEnv: r.RuntimeEnv, StartedAs: r.StartedAs, Shadows: r.Shadows, Timeout: r.Timeout, State: r.State, LogSync: r.LogSync,
		Caller: r.Caller, CallerGroups: r.CallerGroups, CallerClient: r.CallerClient, SpentAtAsk: r.SpentAtAsk})
	if err != nil {
		chk.Close()
		return sealedTicket{}, refuseTicket(err)
	}
	return sealedTicket{t, chk}, nil
}

// refuseTicket is exec's answer to a ticket that does not hold.
func refuseTicket(err error) error {
	return notRun("the command was not run: %v; exec runs only what the hook sealed (rule P16), so send the call again as the agent's tool call for a new ticket", err)
}
