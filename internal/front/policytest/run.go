// Package policytest runs a policy's own unit tests (aimon-gw test): each
// case is decided through the same path as serve, the gate and the
// permission lattice, and the tool never runs.
package policytest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/runtime/reload"
)

// A Result is one case's outcome.
type Result struct {
	Test policy.Test
	Got  rule.Decision
	// Failure says what differed; "" when the case passed.
	Failure string
}

// RunAs is Run with the cases that name no caller of their own run as as
// (test --principal); nil for none. Such a case on the main agent alone,
// the default surface, runs on the caller's chain.
func RunAs(ctx context.Context, dir string, run *regexp.Regexp, timeout time.Duration, as *policy.Claims) ([]Result, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	gen, closeGen, err := reload.Once(ctx, abs, abs, timeout, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer closeGen()
	return cases(ctx, gen, abs, run, timeout, as)
}

// RunLoaded is RunAs for a policy loaded already from dir, with dir its
// working directory (the public policy package's Test): its cases decide
// under gen, provisioned as RunAs provisions its own load.
func RunLoaded(ctx context.Context, pg *policy.Generation, dir string, run *regexp.Regexp, timeout time.Duration, as *policy.Claims) ([]Result, error) {
	gen, closeGen, err := reload.OnceLoaded(ctx, pg, false, timeout, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		return nil, err
	}
	defer closeGen()
	return cases(ctx, gen, dir, run, timeout, as)
}

// cases decides the tests of gen, loaded from abs with abs its working
// directory, whose names match run.
func cases(ctx context.Context, gen *provision.Generation, abs string, run *regexp.Regexp, timeout time.Duration, as *policy.Claims) ([]Result, error) {
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
		if t.Principal == nil && as != nil {
			t.Principal = as
			if slices.Equal(t.Surface, []string{"agent"}) {
				t.Surface = nil
			}
		}
		out = append(out, decide(gw, t))
	}
	return out, nil
}

func decide(gw *gateway.Gateway, t policy.Test) Result {
	r := Result{Test: t}
	surface, err := t.Surface, error(nil)
	if t.Principal != nil {
		surface, err = principal(gw.Current().Generation, *t.Principal, t.Surface)
	}
	if err == nil {
		surface, err = gw.LineChain(surface)
	}
	switch {
	case errors.Is(err, policy.ErrUnmapped):
		r.Got = rule.Refused(rule.P10, err.Error()+".")
	case err != nil:
		r.Got = rule.Refused(rule.R5, err.Error())
	case len(t.Session) > 0:
		r.Got = decideInSession(gw, surface, t)
	default:
		r.Got = gw.Check(surface, "test", t.Tool, t.Input)
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
	case t.Rule != "" && r.Got.Rule != t.Rule:
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

// principal is the chain of a case that names its caller: the one the
// policy maps it to, or the case's surface, which must extend it (rule R5).
func principal(gen *policy.Generation, c policy.Claims, surface []string) ([]string, error) {
	chain, _, err := gen.Principal(c)
	if err != nil || surface == nil {
		return chain, err
	}
	surface = policy.Rooted(surface)
	if !policy.Extends(chain, surface) {
		return nil, fmt.Errorf("The case's surface %s does not begin with its principal's chain %s, which a call may only extend.", strings.Join(surface, ","), strings.Join(chain, ","))
	}
	return surface, nil
}

// decideInSession decides the case's call in a session of its own that saw
// its steps first (rule P18): the user's words, and each call's result,
// labelled as the policy's labels say (a call that failed labels nothing).
func decideInSession(gw *gateway.Gateway, surface []string, t policy.Test) rule.Decision {
	s := gateway.NewSession()
	for i, st := range t.Session {
		if st.User != "" {
			gateway.NoteUser(s, st.User)
			continue
		}
		if st.Error {
			continue
		}
		c := gateway.Call{ID: fmt.Sprintf("step%d", i+1), Name: st.Tool, Input: st.Input, Session: s}
		if _, err := gw.Label(context.Background(), surface, c, st.Result); err != nil {
			return rule.Refused(rule.P18, fmt.Sprintf("step %d of the session could not label it: %v.", i+1, err))
		}
	}
	_, d := gw.Decide(surface, gateway.Call{ID: "test", Name: t.Tool, Input: t.Input, Session: s})
	return d
}
