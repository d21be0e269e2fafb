package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/examples/policies"
	"aimon.dev/gw/gateway"
	"aimon.dev/gw/plugin/host"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/policy/watch"
	"aimon.dev/gw/tools"
)

type serveParams struct {
	Policy       string // "" for the embedded default
	Surface      string
	Workdir      string
	MaxLineBytes int
	Stdin        io.Reader
	Stdout       io.Writer
	Log          *slog.Logger
}

func serveCommand(stdin io.Reader, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "answer tool calls from standard input on standard output",
		ArgsUsage: " ",
		Flags: append(policyFlags(),
			&cli.IntFlag{Name: "max-line-bytes", Value: 16 << 20, Usage: "longest input line accepted"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("aimon-gw serve takes no arguments, got %q; pass the policy with --policy.", c.Args().First()), exitUsage)
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			return serve(c.Context, serveParams{
				Policy: c.String("policy"), Surface: c.String("surface"), Workdir: c.String("workdir"),
				MaxLineBytes: c.Int("max-line-bytes"), Stdin: stdin, Stdout: stdout, Log: log,
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
	plugins := host.New(p.Log)
	defer plugins.Close() // no plugin outlives the gateway (rule R4)
	opts := gateway.Options{Workdir: workdir, Chain: chain, MaxLineBytes: p.MaxLineBytes, Logger: p.Log, Runner: pluginRunner{plugins}}
	var gw *gateway.Gateway
	if p.Policy == "" {
		gen, err := loadPolicy("", nil)
		if err != nil {
			return cli.Exit(err.Error(), exitFinding)
		}
		gw = gateway.New(gen, opts)
		for _, w := range gen.Warnings {
			p.Log.Warn("policy", "problem", w.String())
		}
	} else {
		// The policy follows its files (rule R3): a sound edit is swapped in
		// whole, a broken one leaves the last good generation in force.
		w, err := watch.New(p.Policy, func(gen *policy.Generation) {
			gw.Swap(gen)
			plugins.Retain(gen.Specs()) // dropped plugins stop once their calls finish
		}, watch.Options{Logger: p.Log, Load: func(dir string) (*policy.Generation, error) {
			return policy.Load(dir, policy.WithPlugins(plugins))
		}})
		if err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw: the policy in %s does not load:\n%v", p.Policy, err), exitFinding)
		}
		opts.LastReload = func() (string, time.Time) {
			st := w.Status()
			return st.LastError, st.LastErrorAt
		}
		gw = gateway.New(w.Initial(), opts)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go w.Run(ctx)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-hup:
					p.Log.Info("SIGHUP: reloading the policy")
					w.Reload()
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	if err := gw.Serve(ctx, p.Stdin, p.Stdout); err != nil {
		return cli.Exit("aimon-gw: "+err.Error()+".", exitUsage)
	}
	return nil
}

// loadPolicy loads dir, or the embedded default when dir is "". Plugins,
// when not nil, start the policy's plugins to learn their schemas.
func loadPolicy(dir string, plugins *host.Host) (*policy.Generation, error) {
	if dir == "" {
		gen, err := policy.LoadFS(policies.Default())
		if err != nil {
			return nil, fmt.Errorf("aimon-gw: the embedded default policy does not load; this is a bug:\n%v", err)
		}
		return gen, nil
	}
	var opts []policy.Option
	if plugins != nil {
		opts = append(opts, policy.WithPlugins(plugins))
	}
	gen, err := policy.Load(dir, opts...)
	if err != nil {
		return nil, fmt.Errorf("aimon-gw: the policy in %s does not load:\n%v", dir, err)
	}
	return gen, nil
}

// pluginRunner runs the policy's plugin tools on a host.
type pluginRunner struct{ h *host.Host }

func (r pluginRunner) Tool(t *policy.Tool) (tools.Tool, bool) {
	if t.Plugin == nil {
		return nil, false
	}
	return r.h.Tool(t.Plugin.Spec, t.Plugin.Tool, 0), true
}

var discard = slog.New(slog.DiscardHandler)
