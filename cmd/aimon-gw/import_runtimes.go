package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

var lossyFlag = &cli.BoolFlag{Name: "lossy", Usage: "write the policy even when a rule cannot be kept exactly; such a rule is made stricter"}

// importRuntime is the import subcommand of a runtime whose rules lie in
// several files: each argument a file, or a directory read as the
// runtime reads it.
func importRuntime(name, runtime, usage, args, example string, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: args,
		Flags: []cli.Flag{lossyFlag,
			&cli.StringFlag{Name: "project", Usage: "the project the agent works in (default: the current directory)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fail(exitUsage, "give the files to import: %s", example)
			}
			p := importParams{Lossy: c.Bool("lossy"), Project: c.String("project"), Stdout: stdout, Stderr: stderr}
			if p.Project == "" {
				p.Project, _ = os.Getwd()
			}
			abs, err := filepath.Abs(p.Project)
			if err != nil {
				return fail(exitUsage, "--project %s: %v", p.Project, err)
			}
			p.Project = abs
			for _, a := range c.Args().Slice() {
				fs, err := policy.ImportFiles(name, a)
				if err != nil {
					return fail(exitUsage, "%s", pathProblem(err))
				}
				p.Files = append(p.Files, fs...)
			}
			im, err := policy.Import(name, p.Files, policy.ImportOptions{Project: p.Project})
			if err != nil {
				return fail(exitUsage, "%v", err)
			}
			return p.write(name, runtime, im)
		},
	}
}

func importCodexCommand(stdout, stderr io.Writer) *cli.Command {
	return importRuntime("codex", "Codex", "a policy from Codex's execpolicy rules and config.toml",
		"[--project DIR] CODEX_HOME | FILE.rules... [config.toml]", "aimon-gw import codex ~/.codex > policy.cue",
		stdout, stderr)
}

func importGeminiCommand(stdout, stderr io.Writer) *cli.Command {
	return importRuntime("gemini-cli", "Gemini CLI", "a policy from Gemini CLI's policy files and settings.json",
		"[--project DIR] ~/.gemini | FILE.toml... [settings.json]", "aimon-gw import gemini-cli ~/.gemini > policy.cue",
		stdout, stderr)
}
