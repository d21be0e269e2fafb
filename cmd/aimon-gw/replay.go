package main

import (
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/gateway"
)

func replayCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "replay",
		Usage:     "re-decide every session of a decision log under a candidate policy and print what it changes",
		ArgsUsage: "LOG (a --decision-log written with --decision-log-calls)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "policy", Usage: "the candidate policy directory (required)"},
			&cli.BoolFlag{Name: "fail-on-change", Usage: "exit 1 when the candidate changes any verdict"},
			loadTimeoutFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one decision log: aimon-gw replay --policy DIR LOG")
			}
			if c.String("policy") == "" {
				return fail(exitUsage, "give the candidate policy: aimon-gw replay --policy DIR LOG")
			}
			name := c.Args().First()
			f, err := os.Open(name)
			if err != nil {
				return fail(exitUsage, "%s; give the decision log's path", pathProblem(err))
			}
			defer f.Close()
			rep, err := gateway.Replay(c.Context, f, c.String("policy"), gateway.ReplayOptions{Name: name, LoadTimeout: c.Duration("load-timeout")})
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			if err := rep.Print(stdout); err != nil {
				return fail(exitUsage, "%v", err)
			}
			if c.Bool("fail-on-change") && len(rep.Changes) > 0 {
				return quiet(exitFinding)
			}
			return nil
		},
	}
}
