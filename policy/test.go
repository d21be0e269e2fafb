package policy

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/policytest"
)

// TestOptions choose the cases Test runs, and as whom.
type TestOptions struct {
	// Run, when not nil, runs only the cases whose name it matches (aimon-gw
	// test --run).
	Run *regexp.Regexp
	// Principal is the caller of the cases that name none: a subject, or
	// its token's claims as JSON ({"sub":"alice","groups":["docs"]}), as
	// aimon-gw test --principal; "" for none.
	Principal string
}

// A TestResult is one case of the policy's tests: field and what it got.
type TestResult struct {
	// Name and Pos are the case's, Pos where it is written.
	Name string
	Pos  Position
	// Verdict is what the gateway decided of the case's call.
	Verdict Verdict
	// Failure says what differed from what the case wants; "" when it
	// passed.
	Failure string
}

// A Verdict is the decision of one call, as aimon-gw check prints it.
type Verdict struct {
	Allowed bool
	// Ask is a refusal that a person's approval can turn into an allow.
	Ask bool
	// Rule is the rule that decided ("P9", "S4", ...).
	Rule string
	// Reason is the sentence a model or operator reads.
	Reason string
}

// Test runs the policy's own tests (its tests: field), each decided as
// aimon-gw test decides it, by the same gate and permission lattice as a
// served call, without running any tool.
// The cases' "./" patterns resolve in the policy's directory, as aimon-gw
// test's do; the policy must have been loaded from one (Load).
func (p *Policy) Test(ctx context.Context, o TestOptions) ([]TestResult, error) {
	if p.ref.Dir == "" {
		return nil, errors.New("the policy was not loaded from a directory, so its tests cannot run as aimon-gw test runs them; load it with policy.Load(ctx, dir)")
	}
	var as *ipolicy.Claims
	if o.Principal != "" {
		c, err := ipolicy.ParseClaims(o.Principal)
		if err != nil {
			return nil, fmt.Errorf("the principal: %w", err)
		}
		as = &c
	}
	var rs []policytest.Result
	var err error
	if p.ref.Workdir == p.ref.Dir {
		rs, err = policytest.RunLoaded(orBackground(ctx), p.ref.Gen, p.ref.Dir, o.Run, p.ref.Timeout, as)
	} else {
		// The cases' "./" patterns resolve against the policy's own
		// directory, as aimon-gw test's do: a load for it.
		rs, err = policytest.RunAs(orBackground(ctx), p.ref.Dir, o.Run, p.ref.Timeout, as)
	}
	if err != nil {
		return nil, loadError(err)
	}
	out := make([]TestResult, len(rs))
	for i, r := range rs {
		out[i] = TestResult{Name: r.Test.Name, Pos: Position{File: r.Test.Pos.File, Line: r.Test.Pos.Line, Col: r.Test.Pos.Col},
			Verdict: Verdict{Allowed: r.Got.Allowed, Ask: r.Got.Ask, Rule: string(r.Got.Rule), Reason: r.Got.Reason}, Failure: r.Failure}
	}
	return out, nil
}
