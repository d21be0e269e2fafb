package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/front/replay"
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
				return cli.Exit("aimon-gw replay takes one decision log: aimon-gw replay --policy DIR LOG.", exitUsage)
			}
			if c.String("policy") == "" {
				return cli.Exit("aimon-gw replay needs the candidate policy: aimon-gw replay --policy DIR LOG.", exitUsage)
			}
			name := c.Args().First()
			f, err := os.Open(name)
			if err != nil {
				return cli.Exit(fmt.Sprintf("aimon-gw replay: %v; give the decision log's path.", err), exitUsage)
			}
			defer f.Close()
			o := replay.Options{Policy: c.String("policy"), LoadTimeout: c.Duration("load-timeout"), Name: name}
			rep, err := replay.Run(c.Context, f, o)
			if err != nil {
				return cli.Exit("aimon-gw replay: "+err.Error()+".", exitUsage)
			}
			if err := rep.Print(stdout, o); err != nil {
				return cli.Exit(fmt.Sprintf("aimon-gw replay: %v.", err), exitUsage)
			}
			if c.Bool("fail-on-change") && len(rep.Changes) > 0 {
				return cli.Exit("", exitFinding)
			}
			return nil
		},
	}
}
