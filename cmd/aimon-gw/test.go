package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

type testParams struct {
	Dir         string
	Verbose     bool
	Run         string
	LoadTimeout time.Duration
	Stdout      io.Writer
	// Principal is the caller of the cases that name none (a subject, or
	// claims as JSON); "" for none.
	Principal string
}

func testCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "test",
		Usage:     "run a policy's own tests (its tests: field); exit 1 when any fails",
		ArgsUsage: "[DIR]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "v", Usage: "print every case, not only failures"},
			&cli.StringFlag{Name: "run", Usage: "run only the cases whose name matches this regular expression"},
			loadTimeoutFlag(), principalFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return fail(exitUsage, "give at most one policy directory: aimon-gw test [DIR]")
			}
			dir := c.Args().First()
			if dir == "" {
				dir = "."
			}
			return policyTest(testParams{Dir: dir, Verbose: c.Bool("v"), Run: c.String("run"), LoadTimeout: c.Duration("load-timeout"), Stdout: stdout, Principal: c.String("principal")})
		},
	}
}

// policyTest prints one line per failing case at its file:line:col, every
// case with -v, and ok or FAIL at the end.
func policyTest(p testParams) error {
	var run *regexp.Regexp
	if p.Run != "" {
		var err error
		if run, err = regexp.Compile(p.Run); err != nil {
			return fail(exitUsage, "--run %q is not a regular expression: %v", p.Run, err)
		}
	}
	if p.Principal != "" {
		if _, err := policy.ParsePrincipal(p.Principal); err != nil {
			return fail(exitUsage, "--principal: %v", err)
		}
	}
	ctx := context.Background()
	var pol *policy.Policy
	results, err := func() ([]policy.TestResult, error) {
		// Its cases are placed by absolute path, and their "./" patterns
		// resolve in the policy's directory.
		dir, err := filepath.Abs(p.Dir)
		if err != nil {
			return nil, err
		}
		if pol, err = policy.Load(ctx, dir, policy.WithWorkdir(dir), policy.WithTimeout(p.LoadTimeout)); err != nil {
			return nil, err
		}
		return pol.Test(ctx, policy.TestOptions{Run: run, Principal: p.Principal})
	}()
	if err != nil {
		return fail(exitFinding, "%s", loadProblem(p.Dir, err))
	}
	if len(results) == 0 && run != nil {
		if all, err := pol.Test(ctx, policy.TestOptions{Principal: p.Principal}); err == nil && len(all) > 0 {
			return fail(exitUsage, "--run %q matches none of the %d tests of %s; give a pattern that matches a case's name (aimon-gw test -v lists them)", p.Run, len(all), p.Dir)
		}
	}
	// Nothing tested is not a pass: a CI step that ran no case would pass
	// whatever the policy says.
	if len(results) == 0 {
		fmt.Fprintf(p.Stdout, "FAIL: the policy in %s has no tests; write cases in its tests: field, each a call and the verdict it must get (aimon-gw init writes an example).\n", p.Dir)
		return quiet(exitFinding)
	}
	failed := 0
	for _, r := range results {
		switch {
		case r.Failure != "":
			failed++
			fmt.Fprintf(p.Stdout, "%s: test %q: %s\n", r.Pos, r.Name, r.Failure)
		case p.Verbose:
			fmt.Fprintf(p.Stdout, "%s: test %q: ok\n", r.Pos, r.Name)
		}
	}
	if failed > 0 {
		fmt.Fprintf(p.Stdout, "FAIL: %d of %d tests failed\n", failed, len(results))
		return quiet(exitFinding)
	}
	fmt.Fprintf(p.Stdout, "ok: %d tests passed\n", len(results))
	return nil
}
