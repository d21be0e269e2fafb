package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/cchook"
)

type importParams struct {
	File           string
	Stdout, Stderr io.Writer
}

func importCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "turn an agent runtime's permissions into a policy: aimon-gw import claude-code SETTINGS.json > policy.cue",
		Subcommands: []*cli.Command{{
			Name:      "claude-code",
			Usage:     "a policy from a Claude Code settings file's permissions",
			ArgsUsage: "SETTINGS.json",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return cli.Exit("aimon-gw import claude-code takes one settings file: aimon-gw import claude-code .claude/settings.json > policy.cue.", exitUsage)
				}
				return importClaudeCode(importParams{File: c.Args().First(), Stdout: stdout, Stderr: stderr})
			},
		}},
	}
}

// importClaudeCode prints the policy on standard output and, on standard
// error, every place where Claude Code's meaning differs from the policy's.
func importClaudeCode(p importParams) error {
	data, err := os.ReadFile(p.File)
	if err != nil {
		return cli.Exit(fmt.Sprintf("aimon-gw import claude-code: %v.", err), exitUsage)
	}
	im, err := cchook.Import(data, p.File, cchook.ProjectOf(p.File), cchook.Home())
	if err != nil {
		return cli.Exit(fmt.Sprintf("aimon-gw import claude-code: %v.", err), exitUsage)
	}
	fmt.Fprint(p.Stdout, im.Source)
	for _, n := range im.Notes {
		fmt.Fprintln(p.Stderr, "aimon-gw import claude-code: "+n)
	}
	return nil
}
