package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/front/policytest"
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
				return cli.Exit("aimon-gw test takes at most one policy directory: aimon-gw test [DIR].", exitUsage)
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
			return cli.Exit(fmt.Sprintf("aimon-gw test: --run %q is not a regular expression: %v.", p.Run, err), exitUsage)
		}
	}
	var as *policy.Claims
	if p.Principal != "" {
		c, err := policy.ParseClaims(p.Principal)
		if err != nil {
			return cli.Exit("aimon-gw test: --principal: "+err.Error()+".", exitUsage)
		}
		as = &c
	}
	results, err := policytest.RunAs(context.Background(), p.Dir, run, p.LoadTimeout, as)
	if err != nil {
		return cli.Exit(loadProblem(p.Dir, err), exitFinding)
	}
	failed := 0
	for _, r := range results {
		switch {
		case r.Failure != "":
			failed++
			fmt.Fprintf(p.Stdout, "%s: test %q: %s\n", r.Test.Pos, r.Test.Name, r.Failure)
		case p.Verbose:
			fmt.Fprintf(p.Stdout, "%s: test %q: ok\n", r.Test.Pos, r.Test.Name)
		}
	}
	if failed > 0 {
		fmt.Fprintf(p.Stdout, "FAIL: %d of %d tests failed\n", failed, len(results))
		return cli.Exit("", exitFinding)
	}
	fmt.Fprintf(p.Stdout, "ok: %d tests passed\n", len(results))
	return nil
}
