package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/runtime/ticket"
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
	// State is where approvals are spent (--state): a directory or a
	// redis:// URL; "" for the user's state directory when ApprovalKey is
	// set (a key that outlives the process), this process's memory if not.
	State string
	// Cache is the directory of compiled policies (--cache); "off" for none.
	Cache string
}

func serveCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "answer tool calls from standard input on standard output",
		ArgsUsage: " ",
		Flags: append(append(policyFlags(),
			maxLineFlag("longest input line accepted"),
			approvalKeyFlag(), approvalTTLFlag(), stateFlag(), cacheFlag("starts"), drainFlag(), settleFlag(),
		), decisionLogFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "%q is an argument, and serve takes none; pass the policy with --policy", c.Args().First())
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
				ApprovalKey: c.String("approval-key"), ApprovalTTL: c.Duration("approval-ttl"), State: c.String("state"), Cache: c.String("cache"),
			})
		},
	}
}

// serve runs the gateway until its input ends.
func serve(ctx context.Context, p serveParams) error {
	chain, err := parseChain(p.Surface)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	workdir, err := resolveWorkdir(p.Workdir)
	if err != nil {
		return err
	}
	approvals, closeState, err := approvals(p.ApprovalKey, p.ApprovalTTL, p.State, p.Log)
	if err != nil {
		return err
	}
	defer closeState()
	o := gateway.Options{Workdir: workdir, Chain: chain, MaxLineBytes: p.MaxLineBytes, Logger: p.Log, Decisions: p.Decisions, Approvals: approvals, Limits: gateway.LimitsIn(approvals), Session: gateway.NewSession()}
	_, stopTracing, err := traced(ctx, &o)
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
		return fail(exitUsage, "%s", surfaceProblem(err)) // as mcp does
	}
	if err := rt.Gateway().Serve(ctx, p.Stdin, p.Stdout); err != nil {
		return fail(exitUsage, "%v", err)
	}
	return nil
}

// cacheFlag is --cache of the hook, serve and mcp: where compiled
// policies are kept between processes (the hook's calls, a server's
// starts).
func cacheFlag(between string) cli.Flag {
	return &cli.StringFlag{Name: "cache", Usage: "directory that keeps compiled policies between " + between + ", verified before each use (default: the user's cache directory, aimon-gw); off for none"}
}

// loadCache is the cache --cache names (loadcache.Open).
func loadCache(dir string, log *slog.Logger) *loadcache.Cache {
	return loadcache.Open(dir, log)
}

func approvalKeyFlag() cli.Flag {
	return &cli.StringFlag{Name: "approval-key", Usage: "file holding the key (32 or more random bytes, mode 0600) that seals approval tokens; without it a key of this process's own"}
}

func approvalTTLFlag() cli.Flag {
	return &cli.DurationFlag{Name: "approval-ttl", Value: 10 * time.Minute, Usage: "how long an approval token is valid", Action: func(_ *cli.Context, d time.Duration) error {
		if d <= 0 {
			return fail(exitUsage, "--approval-ttl %s is not a positive duration, and every approval would have expired when it was given; give one such as 10m (the default)", d)
		}
		return nil
	}}
}

func stateFlag() cli.Flag {
	return &cli.StringFlag{Name: "state", Usage: "where approvals are recorded as spent, so that one runs its call once across processes and restarts: a directory, or redis://HOST:PORT for a fleet (default: the user's state directory, aimon-gw, when --approval-key is given)"}
}

// approvals seals approval tokens (rule P15) with the key in the file, or
// with one of this process's own when file is "", and spends them in the
// store spec names (rule R10). close closes the store.
func approvals(file string, ttl time.Duration, spec string, log *slog.Logger) (a *gateway.Approvals, close func(), err error) {
	ticket.Conceal() // no sandbox of serve or mcp shows the key of exec's tickets either (rule R8)
	var key []byte
	if file != "" {
		if key, err = gateway.ReadApprovalKey(file); err != nil {
			return nil, nil, fail(exitUsage, "%v", err)
		}
	}
	if a, err = gateway.NewApprovals(key, ttl); err != nil {
		return nil, nil, fail(exitUsage, "%v", err)
	}
	if file == "" && spec == "" {
		// A key of this process's own seals tokens no other process
		// accepts: its memory is where they are spent.
		return a, func() {}, nil
	}
	dir := ""
	if spec == "" {
		if dir, err = state.DefaultDir(); err != nil {
			return nil, nil, fail(exitUsage, "there is no state directory to record spent approvals in (%v); give --state DIR or --state redis://HOST:PORT", err)
		}
	}
	st, err := state.Open(spec, dir)
	if err != nil {
		return nil, nil, fail(exitUsage, "%v", err)
	}
	if d := state.LocalDir(st); d != "" {
		sandbox.Conceal(d) // a tool that removed a spend could run an approval again (rule R8)
	} else if err := st.Ping(context.Background()); err != nil {
		// Not fatal: asked calls are refused until it answers, the rest served.
		if log == nil {
			log = slog.Default()
		}
		log.Warn("approved calls will be refused until the state store answers", "cause", err)
	}
	a.SpendIn(st)
	return a, func() { st.Close() }, nil
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
		return nil, fail(exitFinding, "%s", loadProblem(o.Dir, err))
	}
	return rt, nil
}

// surfaceProblem is the sentence for a --surface the policy cannot run.
func surfaceProblem(err error) string {
	msg := strings.TrimSuffix(err.Error(), ".")
	msg = strings.TrimSuffix(msg, ". The tool was not executed")
	if msg != "" {
		msg = strings.ToLower(msg[:1]) + msg[1:]
	}
	return msg + "; give --surface a chain the policy declares"
}

// loadProblem is the sentence for a policy that does not load.
func loadProblem(dir string, err error) string {
	if dir == "" {
		return err.Error()
	}
	return fmt.Sprintf("the policy in %s does not load:\n%v", dir, err)
}

// dlogOrNil keeps a nil *decisionlog.File a nil interface.
func dlogOrNil(l *decisionlog.File) gateway.DecisionLog {
	if l == nil {
		return nil
	}
	return l
}
