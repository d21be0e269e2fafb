package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

type execParams struct {
	Policy, Surface, Workdir string
	Command                  string
	// Approved says a person approved the call where the policy asks for
	// it (Claude Code asked before it ran the hook's updated command).
	Approved    bool
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
	Stdin                                io.Reader
	Stdout, Stderr                       io.Writer
}

// exitNotRun is the exit code of a command exec does not run, as a shell
// says of a command that cannot be executed.
const exitNotRun = 126

func execCommand(stdin io.Reader, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "decide one Bash command under the policy again and run it in the sandbox the policy derives (what the Claude Code hook runs Bash through)",
		ArgsUsage: "-- COMMAND",
		Flags: append(policyFlags(),
			&cli.BoolFlag{Name: "approved", Usage: "a person approved the command where the policy asks (the hook sets it on an ask)"},
			&cli.StringFlag{Name: "cache", Usage: "the hook's load cache, when not the default, which no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "protect", Usage: "the hook's decision log, which no command may write, and where the programs the sandbox refuses are recorded (the hook sets it)"},
			&cli.StringFlag{Name: "call-id", Usage: "the id of the call the hook decided, for the decision log's records (the hook sets it)"},
			&cli.StringFlag{Name: "runtime", Usage: "the agent runtime (claude-code) whose settings and hooks no command may write (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-home", Usage: "the home of the user the runtime runs as (the hook sets it)"},
			&cli.StringFlag{Name: "runtime-project", Usage: "the project directory the runtime was started in (the hook sets it)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("aimon-gw exec takes one command, as one argument after --: aimon-gw exec --policy DIR -- 'git status'.", exitUsage)
			}
			return runExec(c.Context, execParams{Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				Command: c.Args().First(), Approved: c.Bool("approved"), LoadTimeout: c.Duration("load-timeout"), Cache: c.String("cache"), Protect: c.String("protect"), Call: c.String("call-id"),
				Runtime: c.String("runtime"), RuntimeHome: c.String("runtime-home"), RuntimeProject: c.String("runtime-project"), Stdin: stdin, Stdout: stdout, Stderr: stderr})
		},
	}
}

// runExec decides the command as a Bash call of the surface, through the
// one decision (rule R7), and runs it with bash -c in the call's sandbox
// (rules R6, R8), its standard streams the caller's, exiting with its
// status; a command the policy refuses exits 126 with the sentence.
func runExec(ctx context.Context, p execParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return cli.Exit("aimon-gw exec: "+err.Error()+".", exitUsage)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	loadCache(p.Cache, nil) // protected, as every cache a command names
	if p.Protect != "" {
		if abs, err := filepath.Abs(p.Protect); err == nil {
			sandbox.Protect(sandbox.WhatLog, abs)
		}
	}
	if p.Runtime != "" {
		if err := gatefiles.Protect(p.Runtime, gatefiles.Where{Home: p.RuntimeHome, Project: p.RuntimeProject, Env: os.Getenv}); err != nil {
			return cli.Exit("aimon-gw exec: the command was not run: "+err.Error()+".", exitUsage)
		}
	}
	gen, closeGen, err := reload.Once(ctx, p.Policy, workdir, p.LoadTimeout, discard)
	if err != nil {
		return cli.Exit(loadProblem(p.Policy, err), exitNotRun)
	}
	defer closeGen()
	opts := gateway.Options{Workdir: workdir, Chain: chain, Logger: discard, ClientAsks: true}
	if p.Protect != "" {
		// The hook recorded the call; the programs its sandbox refuses
		// are recorded beside it, and nothing runs that could not be.
		l, err := decisionlog.Open(p.Protect, decisionlog.Options{})
		if err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw exec: the command was not run: %v; the programs its sandbox refuses could not be recorded there.", err), exitNotRun)
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
	_, d := gw.Decide(nil, gateway.Call{ID: id, Name: "Bash", Input: input})
	switch {
	case d.Ask && p.Approved:
	case !d.Allowed:
		return cli.Exit("aimon-gw exec: the command was not run: "+d.Reason, exitNotRun)
	}
	if d.Sandbox == nil {
		return cli.Exit("aimon-gw exec: the command was not run: the policy's Bash has no sandbox; give it one (sandbox: mode: \"required\").", exitNotRun)
	}
	argv := []string{"bash", "-c", p.Command}
	cmd := exec.Command(argv[0], argv[1:]...)
	if !d.Sandbox.Off {
		if err := sandbox.Available(); err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw exec: the command was not run: it must run in a sandbox, and %v.", err), exitNotRun)
		}
		if err := sandbox.Bounded(); err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw exec: the command was not run: %v.", err), exitNotRun)
		}
		if j := d.Sandbox.Exec; j != nil && d.Ask && p.Approved {
			j.Approved = allow.SimpleCommands(p.Command) // what the person approved (rule P16)
		}
		// What the sandbox's proxy refuses goes to the command's stderr.
		d.Sandbox.Log = slog.New(slog.NewTextHandler(p.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if cmd, err = sandbox.Command(d.Sandbox, workdir, argv, nil, nil); err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw exec: the command was not run: its sandbox cannot be made: %v.", err), exitNotRun)
		}
		defer sandbox.Release(cmd)
		defer sandbox.Finish(cmd)
	}
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = workdir, p.Stdin, p.Stdout, p.Stderr
	err = cmd.Run()
	if j := d.Sandbox.Exec; j != nil && !d.Sandbox.Off && len(j.Refusals()) > 0 {
		return cli.Exit("", exitNotRun) // the tracer said why on stderr (rule P16)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return cli.Exit("", exit.ExitCode())
	case err != nil:
		return cli.Exit(fmt.Sprintf("aimon-gw exec: the command could not be started: %v.", err), exitNotRun)
	}
	return nil
}
