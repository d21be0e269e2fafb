package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/reload"
	"aimon.dev/gw/policy"
)

type vetParams struct {
	Dir         string
	LoadTimeout time.Duration
	Stdout      io.Writer
}

func vetCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "vet",
		Usage:     "check a policy directory; exit 1 with one file:line:col line per problem",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{loadTimeoutFlag(), logLevelFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("aimon-gw vet takes one policy directory: aimon-gw vet DIR.", exitUsage)
			}
			if _, err := logger(c); err != nil {
				return err
			}
			return vet(vetParams{Dir: c.Args().First(), LoadTimeout: c.Duration("load-timeout"), Stdout: stdout})
		},
	}
}

// vet prints every problem of the policy in p.Dir, one per line, and fails
// with exit code 1 when there is any.
func vet(p vetParams) error {
	gen, closeGen, err := reload.Once(context.Background(), p.Dir, "", p.LoadTimeout, discard)
	if err == nil {
		defer closeGen()
	}
	var problems []policy.Diagnostic
	var errs policy.Errors
	switch {
	case errors.As(err, &errs):
		problems = errs
	case err != nil:
		return cli.Exit(fmt.Sprintf("aimon-gw vet: %v", err), exitUsage)
	default:
		problems = policy.Vet(gen.Generation)
	}
	for _, d := range problems {
		fmt.Fprintln(p.Stdout, d.String())
	}
	if len(problems) > 0 {
		return cli.Exit("", exitFinding)
	}
	return nil
}
