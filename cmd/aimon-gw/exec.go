package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/front/gatefiles"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/ticket"
)

type execParams struct {
	Policy, Surface, Workdir string
	Command                  string
	// Approved says the hook sealed the ticket for an ask: the runtime
	// asked a person before it ran the updated command. It grants nothing
	// the ticket does not say.
	Approved bool
	// Ticket is what the hook sealed for this command (rule P16): without
	// a valid one exec runs nothing.
	Ticket      string
	LoadTimeout time.Duration
	// Cache is the hook's --cache, protected in the sandbox; exec itself
	// loads the policy afresh.
	Cache string
	// Protect is the hook's decision log, protected in the sandbox; the
	// programs the sandbox refuses are recorded in it under the call's id
	// Call (rule P16).
	Protect, Call string
	// Runtime is the agent runtime whose files are protected in the
	// sandbox (rule R9), found from its user's home and its project.
	Runtime, RuntimeHome, RuntimeProject string
	// Tool is the runtime's shell tool the command is decided as: Bash,
	// or Gemini CLI's run_shell_command.
	Tool           string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// exitNotRun is the exit code of a command exec does not run, as a shell
// says of a command that cannot be executed.
const exitNotRun = 126

func execCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "exec",
		Usage: "run one Bash command the hook decided, deciding it again under the policy, in the sandbox the policy derives (what the hooks run shell commands through)",
		UsageText: "aimon-gw exec --policy DIR --surface CHAIN --workdir DIR --ticket TICKET [--approved] -- COMMAND\n\n" +
			"exec runs only a command the hook (aimon-gw hook claude-code, codex or gemini-cli) decided and sealed a ticket for: bound to the command, the chain, the working directory, the policy and its revision, valid once and for minutes. " +
			"Without a valid ticket it runs nothing, whatever its flags say (exit 126); there is no way to run it by hand: run a command yourself in your own shell, or check a decision with aimon-gw check.",
		ArgsUsage: "-- COMMAND",
		Flags: append(policyFlags(),
			&cli.StringFlag{Name: "ticket", Usage: "the ticket the hook sealed for this command (the hook sets it); without it exec runs nothing"},
			&cli.BoolFlag{Name: "approved", Usage: "the ticket was sealed for a command a person is asked about (the hook sets it on an ask); it approves nothing the ticket does not"},
			&cli.StringFlag{Name: "cache", Usage: "the hook's load cache, when not the default, which no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "protect", Usage: "the hook's decision log, which no command may write, and where the programs the sandbox refuses are recorded (the hook sets it)"},
			&cli.StringFlag{Name: "call-id", Usage: "the id of the call the hook decided, for the decision log's records (the hook sets it)"},
			&cli.StringFlag{Name: "runtime", Usage: "the agent runtime (claude-code) whose settings and hooks no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-home", Usage: "the home of the user the runtime runs as (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-project", Usage: "the project directory the runtime was started in (the hook sets it)"},
			&cli.StringFlag{Name: "tool", Usage: "the runtime's shell tool the command is decided as, when not Bash (run_shell_command for Gemini CLI; the hook sets it)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one command, as one argument after --: aimon-gw exec --policy DIR -- 'git status'")
			}
			return runExec(c.Context, execParams{Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				Command: c.Args().First(), Approved: c.Bool("approved"), Ticket: c.String("ticket"), LoadTimeout: c.Duration("load-timeout"), Cache: c.String("cache"), Protect: c.String("protect"), Call: c.String("call-id"),
				Runtime: c.String("runtime"), RuntimeHome: c.String("runtime-home"), RuntimeProject: c.String("runtime-project"), Tool: c.String("tool"), Stdin: stdin, Stdout: stdout, Stderr: stderr})
		},
	}
}

// runExec runs the command only with the ticket the hook sealed for it
// (rule P16), decides it as a Bash call of the surface, through the one
// decision (rule R7), and runs it with bash -c in the call's sandbox
// (rules R6, R8), its standard streams the caller's, exiting with its
// status; a command the policy refuses exits 126 with the sentence.
func runExec(ctx context.Context, p execParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	if p.Runtime != "" {
		if err := gatefiles.Protect(p.Runtime, gatefiles.Where{Home: p.RuntimeHome, Project: p.RuntimeProject, Env: os.Getenv}); err != nil {
			return fail(exitUsage, "the command was not run: %v", err)
		}
	}
	// The ticket is checked before the policy it names is even loaded:
	// a policy the agent wrote is never read.
	tk, err := checkTicket(p, chain, workdir)
	if err != nil {
		return err
	}
	defer tk.Close()
	loadCache(p.Cache, nil) // protected, as every cache a command names
	if p.Protect != "" {
		if abs, err := filepath.Abs(p.Protect); err == nil {
			sandbox.Protect(sandbox.WhatLog, abs)
		}
	}
	gen, closeGen, err := reload.Once(ctx, p.Policy, workdir, p.LoadTimeout, discard)
	if err != nil {
		return fail(exitNotRun, "%s", loadProblem(p.Policy, err))
	}
	defer closeGen()
	if err := tk.Spend(ctx, gen.Revision); err != nil {
		return refuseTicket(err)
	}
	opts := gateway.Options{Workdir: workdir, Chain: chain, Logger: discard, ClientAsks: true}
	if p.Protect != "" {
		// The hook recorded the call; the programs its sandbox refuses
		// are recorded beside it, and nothing runs that could not be.
		l, err := decisionlog.Open(p.Protect, decisionlog.Options{})
		if err != nil {
			return fail(exitNotRun, "the command was not run: %v; the programs its sandbox refuses could not be recorded there", err)
		}
		defer l.Close()
		opts.Programs = l
	}
	id := p.Call
	if id == "" {
		id = "exec"
	}
	gw := gateway.New(gen, opts)
	input, _ := json.Marshal(map[string]string{"command": p.Command})
	tool := p.Tool
	if tool == "" {
		tool = "Bash"
	}
	_, d := gw.Decide(nil, gateway.Call{ID: id, Name: tool, Input: input})
	switch {
	case d.Ask && tk.Approved:
	case !d.Allowed:
		return fail(exitNotRun, "the command was not run: %s", d.Reason)
	}
	if d.Sandbox == nil {
		return fail(exitNotRun, "the command was not run: the policy's %s has no sandbox; give it one (sandbox: mode: \"required\")", tool)
	}
	argv := []string{"bash", "-c", p.Command}
	cmd := exec.Command(argv[0], argv[1:]...)
	if !d.Sandbox.Off {
		if err := sandbox.Available(); err != nil {
			return fail(exitNotRun, "the command was not run: it must run in a sandbox, and %v", err)
		}
		if err := sandbox.Bounded(); err != nil {
			return fail(exitNotRun, "the command was not run: %v", err)
		}
		if j := d.Sandbox.Exec; j != nil && d.Ask && tk.Approved {
			j.Approved = allow.SimpleCommands(p.Command) // what the person approved (rule P16)
		}
		// What the sandbox's proxy refuses goes to the command's stderr.
		d.Sandbox.Log = slog.New(slog.NewTextHandler(p.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if cmd, err = sandbox.Command(d.Sandbox, workdir, argv, nil, nil); err != nil {
			return fail(exitNotRun, "the command was not run: its sandbox cannot be made: %v", err)
		}
		defer sandbox.Release(cmd)
		defer sandbox.Finish(cmd)
	}
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = workdir, p.Stdin, p.Stdout, p.Stderr
	err = cmd.Run()
	if j := d.Sandbox.Exec; j != nil && !d.Sandbox.Off && len(j.Refusals()) > 0 {
		return quiet(exitNotRun) // the tracer said why on stderr (rule P16)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return quiet(exit.ExitCode())
	case err != nil:
		return fail(exitNotRun, "the command could not be started: %v", err)
	}
	return nil
}

// sealedTicket is a checked ticket and the store it is spent in.
type sealedTicket struct {
	*ticket.Ticket
	checker *ticket.Checker
}

func (t sealedTicket) Close() { t.checker.Close() }

// checkTicket checks that p carries a ticket the hook sealed for exactly
// this command line; its revision and spend are checked once the policy
// is loaded. Without one nothing runs, whatever the flags say.
func checkTicket(p execParams, chain []string, workdir string) (sealedTicket, error) {
	if p.Ticket == "" {
		return sealedTicket{}, fail(exitNotRun, "the command was not run: it carries no ticket, and exec runs only a command the hook decided and sealed a ticket for (rule P16); send it as the agent's tool call, whose hook (aimon-gw hook claude-code, codex or gemini-cli) hands exec its ticket, or run it in a shell of your own")
	}
	policy := p.Policy
	if policy != "" {
		policy, _ = filepath.Abs(policy)
	}
	chk, err := ticket.NewChecker()
	if err != nil {
		return sealedTicket{}, fail(exitNotRun, "the command was not run: its ticket cannot be checked: %v; exec runs only as the hook's user, outside any sandbox, once the hook has sealed a ticket", err)
	}
	t, err := chk.Check(p.Ticket, ticket.Binding{Command: p.Command, Chain: chain, Workdir: workdir, Policy: policy, Approved: p.Approved,
		Cache: p.Cache, Protect: p.Protect, Call: p.Call, Runtime: p.Runtime, RuntimeHome: p.RuntimeHome, RuntimeProject: p.RuntimeProject, Tool: p.Tool})
	if err != nil {
		chk.Close()
		return sealedTicket{}, refuseTicket(err)
	}
	return sealedTicket{t, chk}, nil
}

// refuseTicket is exec's answer to a ticket that does not hold.
func refuseTicket(err error) error {
	return fail(exitNotRun, "the command was not run: %v; exec runs only what the hook sealed (rule P16), so send the call again as the agent's tool call for a new ticket", err)
}
