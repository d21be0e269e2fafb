package main

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
)

// execParams are exec's flags: the request, with its surface chain and
// working directory as the flags write them.
type execParams struct {
	gateway.ExecRequest
	Surface, Workdir string
}

// exitNotRun is the exit code of a command exec does not run, as a shell
// says of a command that cannot be executed.
const exitNotRun = gateway.ExitNotRun

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
			&cli.BoolFlag{Name: "decision-log-sync", Usage: "flush each record exec writes in the hook's decision log to the disk, as the hook does (the hook sets it)"},
			&cli.StringFlag{Name: "call-id", Usage: "the id of the call the hook decided, for the decision log's records (the hook sets it)"},
			&cli.StringFlag{Name: "runtime", Usage: "the agent runtime (claude-code) whose settings and hooks no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-home", Usage: "the home of the user the runtime runs as (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-project", Usage: "the project directory the runtime was started in (the hook sets it)"},
			&cli.GenericFlag{Name: "runtime-env", Value: &repeated{}, Usage: "NAME=PATH, once for each: a variable of the runtime's that moves its settings (CLAUDE_CONFIG_DIR) as the hook found it, whose files no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "started-as", Usage: "the path the runtime started the hook by, whose symbolic links no command may repoint (the hook sets it)"},
			&cli.GenericFlag{Name: "shadow", Value: &repeated{}, Usage: "once for each: where a program of the gateway's name would be found on PATH before the gateway the runtime starts by that bare name; no command runs that could put one there (the hook sets it)"},
			&cli.StringFlag{Name: "tool", Usage: "the runtime's shell tool the command is decided as, when not Bash (run_shell_command for Gemini CLI; the hook sets it)"},
			&cli.IntFlag{Name: "timeout", Usage: "the command's bound in milliseconds, as its call asked (the hook sets it; default two minutes, at most ten; -1 for a command run in the background, which only a signal ends); at its end, or on SIGTERM, SIGINT or SIGHUP, the command is asked to stop, and its sandbox killed 3 seconds later"},
			&cli.StringFlag{Name: "labels", Usage: "the labels, comma-separated, the hook's session held when it decided the command, whose flows bound it (the hook sets it)"},
			&cli.StringFlag{Name: "caller", Usage: "the subject of the HTTP hook's caller who sent the command, whose count of the policy's limits an approved command is spent from, and under whom its run is recorded (the hook sets it)"},
			&cli.GenericFlag{Name: "caller-group", Value: &repeated{}, Usage: "once for each: a group of the HTTP hook's caller, as the limits select callers (the hook sets it)"},
			&cli.StringFlag{Name: "caller-client", Usage: "the client of the HTTP hook's caller, as the limits select callers (the hook sets it)"},
			&cli.BoolFlag{Name: "limits-spent", Usage: "the hook spent the approved command from the policy's limits at the ask, where it counts them, and exec spends nothing more (the hook sets it)"},
			&cli.StringFlag{Name: "state", Usage: "the fleet's redis:// or rediss:// URL where the hook counts the policy's limits, which an approved command is spent from (the hook sets it; default: the user's state directory)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one command, as one argument after --: aimon-gw exec --policy DIR -- 'git status'")
			}
			return runExec(c.Context, execParams{Surface: c.String("surface"), Workdir: c.String("workdir"), ExecRequest: gateway.ExecRequest{Policy: c.String("policy"),
				Command: c.Args().First(), Approved: c.Bool("approved"), Ticket: c.String("ticket"), LoadTimeout: c.Duration("load-timeout"), Cache: c.String("cache"), Protect: c.String("protect"), LogSync: c.Bool("decision-log-sync"), Call: c.String("call-id"),
				Runtime: c.String("runtime"), RuntimeHome: c.String("runtime-home"), RuntimeProject: c.String("runtime-project"),
				RuntimeEnv: *c.Generic("runtime-env").(*repeated), StartedAs: c.String("started-as"), Shadows: *c.Generic("shadow").(*repeated), Tool: c.String("tool"), Timeout: c.Int("timeout"), Labels: labelList(c.String("labels")), State: c.String("state"),
				Caller: c.String("caller"), CallerGroups: *c.Generic("caller-group").(*repeated), CallerClient: c.String("caller-client"), SpentAtAsk: c.Bool("limits-spent"), Stdin: stdin, Stdout: stdout, Stderr: stderr}})
		},
	}
}

// runExec runs the command through the gateway's exec (gateway.Exec):
// only with the ticket the hook sealed for it (rule P16), decided again as
// a Bash call of the surface through the one decision (rule R7), run with
// bash -c in the call's sandbox (rules R6, R8), its standard streams the
// caller's, exiting with its status; a command not run exits 126 with the
// sentence.
func runExec(ctx context.Context, p execParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	r := p.ExecRequest
	r.Surface, r.Workdir = chain, workdir
	err = gateway.Exec(ctx, r)
	var exit *gateway.ExitError
	switch {
	case errors.As(err, &exit) && exit.Reason == "":
		return quiet(exit.Code)
	case errors.As(err, &exit):
		return fail(exit.Code, "%s", exit.Reason)
	case err != nil:
		return fail(exitNotRun, "the command was not run: %v", err)
	}
	return nil
}

// labelList is the labels of --labels; none for "".
func labelList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// repeated is a flag given once for each of its values, which may hold
// commas (paths).
type repeated []string

func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }
func (r *repeated) String() string     { return strings.Join(*r, " ") }
