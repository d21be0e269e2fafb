// Package policytest runs a policy's own unit tests (aimon-gw test): each
// case is decided through the same path as serve, the gate and the
// permission lattice, and the tool never runs.
package policytest

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"time"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/reload"
	"aimon.dev/gw/internal/rule"
	"aimon.dev/gw/policy"
)

// A Result is one case's outcome.
type Result struct {
	Test policy.Test
	Got  rule.Decision
	// Failure says what differed; "" when the case passed.
	Failure string
}

// Run runs the tests of the policy in dir whose names match run (nil: all).
// A policy that does not load is the error.
func Run(ctx context.Context, dir string, run *regexp.Regexp, timeout time.Duration) ([]Result, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	gen, closeGen, err := reload.Once(ctx, abs, abs, timeout, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer closeGen()
	// A case with its own working directory decides under a load for it:
	// "./" patterns resolve against the working directory at load.
	gws := map[string]*gateway.Gateway{abs: gateway.New(gen, gateway.Options{Workdir: abs, Logger: slog.New(slog.DiscardHandler)})}
	var out []Result
	for _, t := range gen.Tests {
		if run != nil && !run.MatchString(t.Name) {
			continue
		}
		wd := abs
		if t.Workdir != "" {
			wd = t.Workdir
		}
		gw := gws[wd]
		if gw == nil {
			g, closeG, err := reload.Once(ctx, abs, wd, timeout, slog.New(slog.DiscardHandler))
			if err != nil {
				return nil, err
			}
			defer closeG()
			gw = gateway.New(g, gateway.Options{Workdir: wd, Logger: slog.New(slog.DiscardHandler)})
			gws[wd] = gw
		}
		out = append(out, decide(gw, t))
	}
	return out, nil
}

func decide(gw *gateway.Gateway, t policy.Test) Result {
	r := Result{Test: t}
	chain, err := gw.LineChain(t.Surface)
	if err != nil {
		r.Got = rule.Refused(rule.R5, err.Error())
	} else {
		r.Got = gw.Check(chain, "test", t.Tool, t.Input)
	}
	verdict := func(allowed, ask bool) string {
		switch {
		case allowed:
			return "allowed"
		case ask:
			return "a call that needs approval"
		}
		return "refused"
	}
	want, got := verdict(t.Allowed, t.Ask), verdict(r.Got.Allowed, r.Got.Ask)
	switch {
	case got != want:
		r.Failure = fmt.Sprintf("want %s, got %s by %s: %s", want, got, r.Got.Rule, r.Got.Reason)
	case t.Rule != "" && string(r.Got.Rule) != t.Rule:
		r.Failure = fmt.Sprintf("want %s by %s, got it by %s: %s", want, t.Rule, r.Got.Rule, r.Got.Reason)
	case t.Reason != "":
		re, err := regexp.Compile(t.Reason)
		if err != nil {
			r.Failure = fmt.Sprintf("reason %q is not a valid regular expression: %v", t.Reason, err)
		} else if !re.MatchString(r.Got.Reason) {
			r.Failure = fmt.Sprintf("the sentence %q does not match %q", r.Got.Reason, t.Reason)
		}
	}
	return r
}
