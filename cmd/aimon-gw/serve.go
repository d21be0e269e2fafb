package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
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
	Decisions    *gateway.DecisionLog
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
			dlog, err := openDecisionLog(c)
			if err != nil {
				return err
			}
			defer dlog.Close() // flushed at the end of input and on SIGTERM
			defer exitWithin(c.Context, d, func() { dlog.Close() }, log)()
			return serve(c.Context, serveParams{Decisions: dlog,
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
	o, err := approvalOptions(p.ApprovalKey, p.ApprovalTTL, p.State)
	if err != nil {
		return err
	}
	o.Surface, o.Workdir, o.MaxLineBytes, o.Logger, o.Decisions, o.TraceFromEnv = chain, workdir, p.MaxLineBytes, p.Log, p.Decisions, true
	o.LoadTimeout, o.Settle, o.Cache = p.LoadTimeout, p.Settle, p.Cache
	resume := loadGC()
	gw, err := gateway.Watch(ctx, p.Policy, o)
	resume()
	if err != nil {
		return watchProblem(p.Policy, err)
	}
	defer gw.Close()
	if err := gw.Serve(ctx, p.Stdin, p.Stdout); err != nil {
		return fail(exitUsage, "%v", err)
	}
	return nil
}

// loadGCPercent is the collector's GOGC while serve and mcp load their
// first generation: a quarter of a 1,000-tool start's processor time was
// collections of a heap that CUE's evaluation grows from nothing (issue
// 49); at 400 a load collects a few times, and its heap stays within five
// times what it holds live (about 2 MiB more at 1,000 tools).
const loadGCPercent = 400

// loadGC sets the collector's GOGC to loadGCPercent for the first load,
// unless the operator set GOGC, and returns what puts it back as it was.
func loadGC() (resume func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	percent := debug.SetGCPercent(loadGCPercent)
	return func() { debug.SetGCPercent(percent) }
}

// watchProblem is the failure of a gateway that did not start: a surface
// the policy cannot run, a policy that does not load (a finding), or an
// option.
func watchProblem(dir string, err error) error {
	switch {
	case errors.Is(err, gateway.ErrSurface):
		return fail(exitUsage, "%s", surfaceProblem(err))
	case errors.Is(err, gateway.ErrPolicy):
		return fail(exitFinding, "%s", loadProblem(dir, err))
	}
	return fail(exitUsage, "%v", err)
}

// cacheFlag is --cache of the hook, serve and mcp: where compiled
// policies are kept between processes (the hook's calls, a server's
// starts).
func cacheFlag(between string) cli.Flag {
	return &cli.StringFlag{Name: "cache", Usage: "directory that keeps compiled policies between " + between + ", verified before each use (default: the user's cache directory, aimon-gw); off for none"}
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

// approvalOptions are the gateway's approvals: sealed (rule P15) with the
// key in file, or with one of this process's own when file is ""; spent
// (rule R10) where spec names, else in the user's state directory when a
// key outlives the process, else in its memory.
func approvalOptions(file string, ttl time.Duration, spec string) (gateway.Options, error) {
	o := gateway.Options{ApprovalTTL: ttl, State: spec}
	if file == "" {
		return o, nil
	}
	var err error
	if o.ApprovalKey, err = gateway.ReadApprovalKey(file); err != nil {
		return o, fail(exitUsage, "%v", err)
	}
	if spec == "" {
		if o.State, err = gateway.DefaultStateDir(); err != nil {
			return o, fail(exitUsage, "there is no state directory to record spent approvals in (%v); give --state DIR or --state redis://HOST:PORT", err)
		}
	}
	return o, nil
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

// loadProblem is the sentence for a policy that does not load: one line
// for one problem, the problems a line each below it for several. A
// directory that is not there is said as such, by the name it was given
// (the loader names it by its absolute path, after a header that said it
// already).
func loadProblem(dir string, err error) string {
	if dir == "" {
		return err.Error()
	}
	if fi, statErr := os.Stat(dir); statErr != nil || !fi.IsDir() {
		return fmt.Sprintf("the policy directory %s does not exist or cannot be read; give the directory that holds the policy's .cue files", dir)
	}
	sep := "\n"
	if !strings.Contains(err.Error(), "\n") {
		sep = " "
	}
	return fmt.Sprintf("the policy in %s does not load:%s%v", dir, sep, err)
}
