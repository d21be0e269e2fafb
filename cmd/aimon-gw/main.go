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
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/decisionlog"
	"aimon.dev/gw/policy"
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
	app := &cli.App{
		Name:      "aimon-gw",
		Usage:     "a tool gateway for LLM agents, with policies in CUE",
		Reader:    stdin,
		Writer:    stderr, // help and usage go to standard error: standard output is the protocol's (rule R1)
		ErrWriter: stderr,
		Version:   version(),
		Flags:     []cli.Flag{logLevelFlag(), logFormatFlag()},
		Commands: []*cli.Command{
			serveCommand(stdin, stdout),
			vetCommand(stdout),
			checkCommand(stdin, stdout),
			mcpCommand(stdin, stdout),
			versionCommand(stdout),
			hookCommand(stdin, stdout),
			importCommand(stdout, stderr),
			testCommand(stdout),
			initCommand(stdout),
			pinCommand(stdout),
		},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(c.App.ErrWriter, "aimon-gw: there is no command %q; the commands are serve, mcp, check, vet, test, init, pin, hook, import and version (aimon-gw --help).\n", name)
			notFound = true
		},
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("aimon-gw: %v; see aimon-gw --help.", err), exitUsage)
		},
	}
	notFound = false
	cli.VersionPrinter = func(*cli.Context) { fmt.Fprintln(stdout, "aimon-gw", version()) }
	err := app.RunContext(ctx, args)
	if notFound {
		return exitUsage
	}
	if err == nil {
		return 0
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := ec.Error(); msg != "" {
			fmt.Fprintln(stderr, msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintf(stderr, "aimon-gw: %v\n", err)
	return exitUsage
}

// logger is the slog logger on standard error at the level given by
// --log-level, as text or, with --log-format json, JSON.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, cli.Exit(fmt.Sprintf("aimon-gw: --log-level %q is not a level; use debug, info, warn or error.", c.String("log-level")), exitUsage)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "", "text":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	}
	return nil, cli.Exit(fmt.Sprintf("aimon-gw: --log-format %q is not a format; use text or json.", c.String("log-format")), exitUsage)
}

// decisionLog opens --decision-log; nil when it is not given.
func decisionLog(c *cli.Context) (*decisionlog.File, error) {
	path := c.String("decision-log")
	if path == "" {
		return nil, nil
	}
	l, err := decisionlog.Open(path)
	if err != nil {
		return nil, cli.Exit("aimon-gw: "+err.Error()+"; give --decision-log a file the gateway can append to.", exitUsage)
	}
	return l, nil
}

// decisionLogFlag records every decided call as a JSON line.
func decisionLogFlag() cli.Flag {
	return &cli.StringFlag{Name: "decision-log", Usage: "append one JSON line per decided call to this file; a log that cannot be written stops the gateway allowing calls"}
}

// notFound is set when the command line names no command of ours.
var notFound bool

// logLevelFlag is accepted before or after the command, where MCP client
// configurations put their arguments.
func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"}
}

func logFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json"}
}

// isLoadError reports whether err is a policy that does not load.
func isLoadError(err error) bool {
	var errs policy.Errors
	return errors.As(err, &errs)
}

// discard is the logger of commands whose output is their answer.
var discard = slog.New(slog.DiscardHandler)

// parseChain reads a surface chain: comma-separated references, or a JSON
// list; the main agent is always its root.
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
		logLevelFlag(),
		logFormatFlag(),
	}
}

// loadTimeoutFlag bounds each policy load (rule R5).
func loadTimeoutFlag() cli.Flag {
	return &cli.DurationFlag{Name: "load-timeout", Value: 5 * time.Second, Usage: "reject a policy that takes longer than this to load"}
}
