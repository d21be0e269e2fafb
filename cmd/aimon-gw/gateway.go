package main

import (
	"context"
	"fmt"
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

// startGateway loads the policy in dir (the embedded default when dir is
// "") and returns a gateway serving it, with the plugin host behind it.
// For a directory it follows the files until stop is called (rule R3): a
// sound edit becomes the next generation in one swap, then onSwap runs; a
// broken one leaves the last good generation in force. stop also stops
// every plugin (rule R4).
func startGateway(ctx context.Context, dir string, opts gateway.Options, onSwap func(*gateway.Gateway)) (gw *gateway.Gateway, stop func(), err error) {
	plugins := host.New(opts.Logger)
	opts.Runner = pluginRunner{plugins}
	if dir == "" {
		gen, err := loadPolicy("", policy.WithWorkdir(opts.Workdir))
		if err != nil {
			plugins.Close()
			return nil, nil, cli.Exit(err.Error(), exitFinding)
		}
		for _, w := range gen.Warnings {
			opts.Logger.Warn("policy", "problem", w.String())
		}
		return gateway.New(gen, opts), plugins.Close, nil
	}
	w, err := watch.New(dir, func(gen *policy.Generation) {
		gw.Swap(gen)
		plugins.Retain(gen.Specs()) // dropped plugins stop once their calls finish
		if onSwap != nil {
			onSwap(gw)
		}
	}, watch.Options{Logger: opts.Logger, Load: func(dir string) (*policy.Generation, error) {
		return policy.Load(dir, policy.WithPlugins(plugins), policy.WithWorkdir(opts.Workdir))
	}})
	if err != nil {
		plugins.Close()
		return nil, nil, cli.Exit(fmt.Sprintf("aimon-gw: the policy in %s does not load:\n%v", dir, err), exitFinding)
	}
	opts.LastReload = func() (string, time.Time) {
		st := w.Status()
		return st.LastError, st.LastErrorAt
	}
	gw = gateway.New(w.Initial(), opts)
	ctx, cancel := context.WithCancel(ctx)
	go w.Run(ctx)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for {
			select {
			case <-hup:
				opts.Logger.Info("SIGHUP: reloading the policy")
				w.Reload()
			case <-ctx.Done():
				return
			}
		}
	}()
	return gw, func() {
		signal.Stop(hup)
		cancel()
		plugins.Close()
	}, nil
}

// loadPolicy loads dir, or the embedded default when dir is "".
func loadPolicy(dir string, opts ...policy.Option) (*policy.Generation, error) {
	if dir == "" {
		gen, err := policy.LoadFS(policies.Default(), opts...)
		if err != nil {
			return nil, fmt.Errorf("aimon-gw: the embedded default policy does not load; this is a bug:\n%v", err)
		}
		return gen, nil
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

// discard is the logger of commands whose output is their answer.
var discard = slog.New(slog.DiscardHandler)
