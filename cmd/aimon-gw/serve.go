package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
)

type serveParams struct {
	Policy       string // "" for the embedded default
	Surface      string
	Workdir      string
	MaxLineBytes int
	LoadTimeout  time.Duration
	Settle       time.Duration
	Stdin        io.Reader
	Stdout       io.Writer
	Log          *slog.Logger
	Decisions    gateway.DecisionLog
	// ApprovalKey is the file of the key that seals approval tokens
	// (rule P15); "" for a key of this process's own.
	ApprovalKey string
	ApprovalTTL time.Duration
	// Cache is the directory of compiled policies (--cache); "off" for none.
	Cache string
}

func serveCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "answer tool calls from standard input on standard output",
		ArgsUsage: " ",
		Flags: append(append(policyFlags(),
			&cli.IntFlag{Name: "max-line-bytes", Value: 16 << 20, Usage: "longest input line accepted"},
			approvalKeyFlag(), approvalTTLFlag(), cacheFlag("starts"), drainFlag(), settleFlag(),
		), decisionLogFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("aimon-gw serve takes no arguments, got %q; pass the policy with --policy.", c.Args().First()), exitUsage)
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			d, err := drain(c, "drain")
			if err != nil {
				return err
			}
			settle, err := drain(c, "settle")
			if err != nil {
				return err
			}
			dlog, err := decisionLog(c)
			if err != nil {
				return err
			}
			if dlog != nil {
				defer dlog.Close() // flushed at the end of input and on SIGTERM
			}
			defer exitWithin(c.Context, d, dlog, log)()
			return serve(c.Context, serveParams{Decisions: dlogOrNil(dlog),
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				MaxLineBytes: c.Int("max-line-bytes"), LoadTimeout: c.Duration("load-timeout"), Settle: settle, Stdin: stdin, Stdout: stdout, Log: log,
				ApprovalKey: c.String("approval-key"), ApprovalTTL: c.Duration("approval-ttl"), Cache: c.String("cache"),
			})
		},
	}
}

// serve runs the gateway until its input ends.
func serve(ctx context.Context, p serveParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	approvals, err := approvals(p.ApprovalKey, p.ApprovalTTL)
	if err != nil {
		return err
	}
	o := gateway.Options{Workdir: workdir, Chain: chain, MaxLineBytes: p.MaxLineBytes, Logger: p.Log, Decisions: p.Decisions, Approvals: approvals}
	_, stopTracing, err := traced(ctx, "serve", &o)
	if err != nil {
		return err
	}
	defer stopTracing()
	warnUnbounded(p.Log)
	defer sandbox.Sweep() // after rt.Close, which stops the plugins
	rt, err := start(ctx, reload.Options{Dir: p.Policy, LoadTimeout: p.LoadTimeout, Debounce: p.Settle, Gateway: o, Cache: loadCache(p.Cache, p.Log)})
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := rt.Gateway().CheckChain(nil); err != nil {
		return cli.Exit(surfaceProblem("serve", err), exitUsage) // as mcp does
	}
	if err := rt.Gateway().Serve(ctx, p.Stdin, p.Stdout); err != nil {
		return cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
	}
	return nil
}

// cacheFlag is --cache of the hook, serve and mcp: where compiled
// policies are kept between processes (the hook's calls, a server's
// starts).
func cacheFlag(between string) cli.Flag {
	return &cli.StringFlag{Name: "cache", Usage: "directory that keeps compiled policies between " + between + ", verified before each use (default: the user's cache directory, aimon-gw); off for none"}
}

// loadCache is the cache --cache names: the user's cache directory for
// "", none for "off" or when the user has no cache directory (a fresh
// load each time). No sandbox this process makes may write it (rule R8).
func loadCache(dir string, log *slog.Logger) *loadcache.Cache {
	if dir == "off" {
		return nil
	}
	if dir == "" {
		dir, _ = loadcache.DefaultDir()
	}
	if dir != "" {
		dir, _ = filepath.Abs(dir)
	}
	if dir == "" {
		return nil
	}
	sandbox.ProtectDir(sandbox.WhatCache, dir)
	return &loadcache.Cache{Dir: dir, Log: log}
}

func approvalKeyFlag() cli.Flag {
	return &cli.StringFlag{Name: "approval-key", Usage: "file holding the key (32 or more random bytes, mode 0600) that seals approval tokens; without it a key of this process's own"}
}

func approvalTTLFlag() cli.Flag {
	return &cli.DurationFlag{Name: "approval-ttl", Value: 10 * time.Minute, Usage: "how long an approval token is valid"}
}

// approvals seals approval tokens (rule P15) with the key in the file, or
// with one of this process's own when file is "".
func approvals(file string, ttl time.Duration) (*gateway.Approvals, error) {
	var key []byte
	if file != "" {
		var err error
		if key, err = gateway.ReadApprovalKey(file); err != nil {
			return nil, cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
		}
	}
	a, err := gateway.NewApprovals(key, ttl)
	if err != nil {
		return nil, cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
	}
	return a, nil
}

// warnUnbounded says once, at the start of serve and mcp, that sandboxed
// Bash calls will be refused: the gateway is root and can make no pids
// cgroup to bound their processes (rule R8).
func warnUnbounded(log *slog.Logger) {
	if err := sandbox.Bounded(); err != nil {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("sandboxed Bash calls will be refused", "cause", err)
	}
}

// start starts the runtime of serve and mcp; a policy that does not load
// is a finding.
func start(ctx context.Context, o reload.Options) (*reload.Runtime, error) {
	rt, err := reload.Start(ctx, o)
	if err != nil {
		return nil, cli.Exit(loadProblem(o.Dir, err), exitFinding)
	}
	return rt, nil
}

// surfaceProblem is the sentence for a --surface the policy cannot run.
func surfaceProblem(command string, err error) string {
	msg := strings.TrimSuffix(err.Error(), ".")
	msg = strings.TrimSuffix(msg, ". The tool was not executed")
	if msg != "" {
		msg = strings.ToLower(msg[:1]) + msg[1:]
	}
	return fmt.Sprintf("aimon-gw %s: %s; give --surface a chain the policy declares.", command, msg)
}

// loadProblem is the sentence for a policy that does not load.
func loadProblem(dir string, err error) string {
	if dir == "" {
		return fmt.Sprintf("aimon-gw: %v", err)
	}
	return fmt.Sprintf("aimon-gw: the policy in %s does not load:\n%v", dir, err)
}

// dlogOrNil keeps a nil *decisionlog.File a nil interface.
func dlogOrNil(l *decisionlog.File) gateway.DecisionLog {
	if l == nil {
		return nil
	}
	return l
}
