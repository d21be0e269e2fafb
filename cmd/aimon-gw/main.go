// Command aimon-gw is a tool gateway for LLM agents: it gates, permits and
// runs the tool calls an agent sends, under policies written in CUE.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
)

func main() { os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr)) }

// Exit codes: 0 success, 1 a finding (a policy problem, a denied call), 2 a
// usage or operational error.
const (
	exitFinding = 1
	exitUsage   = 2
)

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	commands := []*cli.Command{
		serveCommand(stdin, stdout),
		vetCommand(stdout),
		checkCommand(stdin, stdout),
		mcpCommand(stdin, stdout),
		versionCommand(stdout),
		hookCommand(stdin, stdout),
		execCommand(stdin, stdout, stderr),
		importCommand(stdout, stderr),
		testCommand(stdout),
		replayCommand(stdout),
		initCommand(stdout),
		pinCommand(stdout),
		completionCommand(stdout),
		manCommand(stdout),
	}
	command := "aimon-gw" // the command running, which names its failure
	withGlobalFlags(commands, "aimon-gw", &command)
	app := &cli.App{
		Name:      "aimon-gw",
		Usage:     "a tool gateway for LLM agents, with policies in CUE",
		Reader:    stdin,
		Writer:    stderr, // help and usage go to standard error: standard output is the protocol's (rule R1)
		ErrWriter: stderr,
		// The completion scripts ask the binary for the words
		// (--generate-bash-completion), answered on standard output.
		EnableBashCompletion: true,
		Version:              version(),
		Flags:                globalFlags(),
		Commands:             commands,
		CommandNotFound: func(c *cli.Context, name string) {
			var names []string
			for _, cmd := range commands {
				names = append(names, cmd.Name)
			}
			fmt.Fprintf(c.App.ErrWriter, "aimon-gw: there is no command %q; the commands are %s and %s (aimon-gw --help).\n", name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
			notFound = true
		},
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError("aimon-gw"),
	}
	notFound = false
	if len(args) > 0 && args[len(args)-1] == "--generate-bash-completion" {
		app.Writer = stdout // the words a completion script reads
	}
	cli.VersionPrinter = func(*cli.Context) { fmt.Fprintln(stdout, "aimon-gw", version()) }
	err := app.RunContext(ctx, args)
	if notFound {
		return exitUsage
	}
	if err == nil {
		return 0
	}
	var f *failure
	if errors.As(err, &f) {
		if f.msg != "" {
			fmt.Fprintln(stderr, sentence(command, f.msg))
		}
		return f.code
	}
	// The command-line library's own refusals (usageError, CommandNotFound)
	// name their command already.
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := ec.Error(); msg != "" {
			fmt.Fprintln(stderr, msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(stderr, sentence(command, err.Error()))
	return exitUsage
}

// logger is the slog logger on standard error at the level given by
// --log-level, as text or, with --log-format json, JSON.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if l := globalString(c, "log-level"); level.UnmarshalText([]byte(l)) != nil {
		return nil, fail(exitUsage, "--log-level %q is not a level; use debug, info, warn or error", l)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f := globalString(c, "log-format"); f {
	case "", "text":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	default:
		return nil, fail(exitUsage, "--log-format %q is not a format; use text or json", f)
	}
}

// globalFlags are accepted before or after any command and mean the same
// everywhere.
func globalFlags() []cli.Flag { return []cli.Flag{logLevelFlag(), logFormatFlag()} }

// withGlobalFlags gives every command and subcommand the global flags,
// checks them before the command runs (so a bad --log-level is refused
// by every command alike), makes a usage error one sentence, and sets
// *running to the name of the command about to run.
func withGlobalFlags(cmds []*cli.Command, path string, running *string) {
	for _, cmd := range cmds {
		name := path + " " + cmd.Name
		for _, f := range globalFlags() {
			if !slices.ContainsFunc(cmd.Flags, func(g cli.Flag) bool { return g.Names()[0] == f.Names()[0] }) {
				cmd.Flags = append(cmd.Flags, f)
			}
		}
		before, leaf := cmd.Before, len(cmd.Subcommands) == 0 // cli adds "help" to Subcommands later
		cmd.Before = func(c *cli.Context) error {
			*running = name
			if leaf { // a subcommand's flags and arguments are its own
				if _, err := logger(c); err != nil {
					return err
				}
				if err := flagAfterArgument(c, cmd.Flags, name); err != nil {
					return err
				}
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
		cmd.OnUsageError = usageError(name)
		if !leaf && cmd.Action == nil {
			cmd.Action = noSubcommand(name, cmd.Subcommands)
		}
		// --help serves a command without subcommands; a "help"
		// subcommand would only crowd completions and the man page.
		cmd.HideHelpCommand = cmd.HideHelpCommand || leaf
		withGlobalFlags(cmd.Subcommands, name, running)
	}
}

// noSubcommand is the action of a command that only has subcommands (hook,
// import), run when none of them is named: a usage error that names them,
// where the command-line library printed the command's help and exited 0
// without one, and named the top-level commands for an unknown one.
func noSubcommand(name string, subs []*cli.Command) cli.ActionFunc {
	return func(c *cli.Context) error {
		var names []string
		for _, sub := range subs {
			names = append(names, sub.Name)
		}
		list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
		if c.NArg() == 0 {
			return fail(exitUsage, "name one of %s: %s %s (see %s --help)", list, name, names[0], name)
		}
		return fail(exitUsage, "there is no %q; give one of %s (see %s --help)", c.Args().First(), list, name)
	}
}

// globalString is a global flag's value where it was given nearest the
// command (after it wins over before it), or its default.
func globalString(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if ctx.App != nil && slices.Contains(ctx.LocalFlagNames(), name) {
			return ctx.String(name)
		}
	}
	return c.String(name)
}

// flagAfterArgument refuses a flag of the command written after one of
// its arguments, where the flag package leaves it as an argument.
func flagAfterArgument(c *cli.Context, flags []cli.Flag, command string) error {
	for _, arg := range c.Args().Slice() {
		name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !strings.HasPrefix(arg, "-") || name == "" {
			continue
		}
		for _, f := range flags {
			if slices.Contains(f.Names(), name) {
				return fail(exitUsage, "%s is written after an argument, where it is not read; put flags before the arguments (see %s --help)", arg, command)
			}
		}
	}
	return nil
}

// usageError turns the flag package's complaint into a sentence that says
// what to write and where to look. The flag package words it for Go
// programmers ("flag needs an argument: -policy", "invalid value "x" for
// flag -drain: parse error"); the sentence names the flag as it is
// written (--policy) and the kind of value it takes.
func usageError(command string) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, _ bool) error {
		return cli.Exit(fmt.Sprintf("%s: %s; see %s --help.", command, flagProblem(c, err.Error()), command), exitUsage)
	}
}

// flagProblem is the flag package's message msg in words.
func flagProblem(c *cli.Context, msg string) string {
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return fmt.Sprintf("there is no flag --%s", strings.TrimLeft(name, "-"))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		name = strings.TrimLeft(name, "-")
		return fmt.Sprintf("--%s is given no value; write the value after it (--%s VALUE)", name, name)
	}
	// invalid value "x" for flag -name: why; invalid boolean value "x" for -name: why
	if rest, ok := strings.CutPrefix(msg, "invalid boolean value "); ok {
		if value, rest, ok := strings.Cut(rest, " for -"); ok {
			name, _, _ := strings.Cut(strings.TrimLeft(rest, "-"), ":")
			return fmt.Sprintf("--%s=%s is not true or false: write --%s or --%s=false", name, value, name, name)
		}
	}
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return msg
	}
	value, rest, ok := strings.Cut(rest, " for flag -")
	if !ok {
		return msg
	}
	name, why, _ := strings.Cut(strings.TrimLeft(rest, "-"), ": ")
	kind := "a value it takes"
	switch flagKind(c, name).(type) {
	case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
		kind = "a whole number (such as 4096)"
		if why == "value out of range" {
			kind = "a whole number this machine can hold"
		}
	case *cli.DurationFlag:
		kind = "a duration (such as 30s or 5m)"
	case *cli.Float64Flag:
		kind = "a number (such as 0.5)"
	}
	return fmt.Sprintf("--%s %s is not %s", name, value, kind)
}

// flagKind is the flag of that name the running command or the program
// defines, nil when none does.
func flagKind(c *cli.Context, name string) cli.Flag {
	var flags []cli.Flag
	if c.Command != nil {
		flags = append(flags, c.Command.Flags...)
	}
	if c.App != nil {
		flags = append(flags, c.App.Flags...)
	}
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// openDecisionLog opens --decision-log; nil when it is not given.
func openDecisionLog(c *cli.Context) (*gateway.DecisionLog, error) {
	path, o := decisionLogOptions(c)
	if path == "" {
		return nil, nil
	}
	l, err := gateway.OpenDecisionLog(path, o)
	if err != nil {
		return nil, decisionLogProblem(err)
	}
	return l, nil
}

// decisionLogOptions are the --decision-log flags: the file ("" for none)
// and what it records.
func decisionLogOptions(c *cli.Context) (string, gateway.DecisionLogOptions) {
	return c.String("decision-log"), gateway.DecisionLogOptions{Calls: c.Bool("decision-log-calls"), Content: c.Bool("decision-log-content"), Sync: c.Bool("decision-log-sync")}
}

// decisionLogProblem is the sentence for a decision log that cannot be opened.
func decisionLogProblem(err error) error {
	return fail(exitUsage, "%s; give --decision-log a file the gateway can append to", err.Error())
}

// decisionLogFlags record every decided call as a JSON line, before its
// tool runs (rule R10).
func decisionLogFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "decision-log", Usage: "append each call's decision to this file as a JSON line before its tool runs, and its result after; a call whose record cannot be written does not run"},
		&cli.BoolFlag{Name: "decision-log-sync", Usage: "flush each decision-log record to the disk before going on, so that it survives a power loss"},
		&cli.BoolFlag{Name: "decision-log-calls", Usage: "record each call's canonical input and session, and each result's labels and sha256, so that aimon-gw replay can re-decide the log under another policy (never a result's content)"},
		&cli.BoolFlag{Name: "decision-log-content", Usage: "with --decision-log-calls, record the results' texts and the user's words too, so that replay re-decides where arguments came from; they may hold secrets the agent read"},
	}
}

// drainFlag bounds how long the process outlives SIGTERM (rule R10).
func drainFlag() cli.Flag {
	return &cli.DurationFlag{Name: "drain", Value: 30 * time.Second, Usage: "on SIGTERM, how long the calls in flight have to finish; then the process exits, whatever a tool is doing"}
}

// settleFlag is how long a policy directory must be quiet before a reload:
// a multi-file edit (an editor saving two buffers, a git checkout under
// load) goes in force whole, not file by file (rule R3).
func settleFlag() cli.Flag {
	return &cli.DurationFlag{Name: "settle", Value: time.Second, Usage: "how long the policy's files must be unchanged before an edit is loaded, so that a change of several files goes in force whole"}
}

// maxLineFlag is --max-line-bytes, the longest line or frame read; one
// that is not positive would refuse every line, and is a usage error.
func maxLineFlag(usage string) cli.Flag {
	return &cli.IntFlag{Name: "max-line-bytes", Value: 16 << 20, Usage: usage, Action: func(c *cli.Context, n int) error {
		if n < 1 {
			return fail(exitUsage, "--max-line-bytes %d is not a positive number of bytes; give one such as 16777216 (the default, 16 MiB)", n)
		}
		return nil
	}}
}

// drain is --drain, refused when it is not positive.
func drain(c *cli.Context, name string) (time.Duration, error) {
	d := c.Duration(name)
	if d <= 0 && (name != "drain-delay" || d < 0) {
		return 0, fail(exitUsage, "--%s %s is not a positive duration; give one such as 30s", name, d)
	}
	return d, nil
}

// exitWithin ends the process once ctx is done (SIGTERM) and bound has
// passed, whatever a tool is doing (a blocking system call cannot be
// cancelled): closeLog first records the calls still running as cut off
// in the decision log (rule R10). Call the returned func when the command
// returns.
func exitWithin(ctx context.Context, bound time.Duration, closeLog func(), log *slog.Logger) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		select {
		case <-done:
			return
		case <-time.After(bound):
		}
		log.Error("the drain ended with a tool still running; exiting without waiting for it", "drain", bound)
		closeLog()
		gateway.Cleanup()
		os.Exit(exitUsage)
	}()
	return func() { close(done) }
}

// notFound is set when the command line names no command of ours.
var notFound bool

// logLevelFlag is accepted before or after the command (MCP client
// configurations put their arguments after it).
func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"}
}

func logFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"}
}

// discard is the logger of commands whose output is their answer.
var discard = slog.New(slog.DiscardHandler)

// parseChain reads a surface chain: comma-separated references; the main
// agent is always its root.
func parseChain(s string) ([]string, error) {
	var refs []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			refs = append(refs, r)
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("--surface is empty; give a chain such as agent,subagent:reviewer")
	}
	return refs, nil
}

// policyFlags are the flags of every command that acts under a policy.
func policyFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "policy", Usage: "policy directory (default: the embedded default policy)"},
		&cli.StringFlag{Name: "surface", Value: "agent", Usage: "surface chain, e.g. agent,subagent:reviewer"},
		&cli.StringFlag{Name: "workdir", Usage: "working directory relative paths resolve against (default: the current directory)"},
		loadTimeoutFlag(),
	}
}

// loadTimeoutFlag bounds each policy load (rule R5); a bound that is not
// positive would be none, and is a usage error.
func loadTimeoutFlag() cli.Flag {
	return &cli.DurationFlag{Name: "load-timeout", Value: 5 * time.Second, Usage: "reject a policy that takes longer than this to load", Action: func(c *cli.Context, d time.Duration) error {
		if d <= 0 {
			return fail(exitUsage, "--load-timeout %s is not a positive duration; give one such as 5s (the default)", d)
		}
		return nil
	}}
}
