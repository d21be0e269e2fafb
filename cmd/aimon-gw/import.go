package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

type importParams struct {
	File string
	// Files are the runtime's files to import (codex, gemini-cli), and
	// Project the workspace they are read for.
	Files   []string
	Project string
	// Lossy writes the policy even when a rule could not be kept exactly
	// (each is then stricter than in Claude Code).
	Lossy          bool
	Stdout, Stderr io.Writer
}

func importCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "import",
		Usage: "turn an agent runtime's permissions into a policy: aimon-gw import claude-code|codex|gemini-cli FILE... > policy.cue",
		Subcommands: []*cli.Command{{
			Name:      "claude-code",
			Usage:     "a policy from a Claude Code settings file's permissions",
			ArgsUsage: "SETTINGS.json",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "lossy", Usage: "write the policy even when a rule cannot be kept exactly; such a rule is made stricter"}},
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fail(exitUsage, "give one settings file: aimon-gw import claude-code .claude/settings.json > policy.cue")
				}
				return importClaudeCode(importParams{File: c.Args().First(), Lossy: c.Bool("lossy"), Stdout: stdout, Stderr: stderr})
			},
		}, importCodexCommand(stdout, stderr), importGeminiCommand(stdout, stderr)},
	}
}

// importClaudeCode prints the policy on standard output and, on standard
// error, every place where Claude Code's meaning differs from the policy's.
func importClaudeCode(p importParams) error {
	im, err := policy.Import("claude-code", []string{p.File}, policy.ImportOptions{})
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return fail(exitUsage, "%s; give the path of a Claude Code settings file", pathProblem(err))
	}
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	return p.write("claude-code", "Claude Code", im)
}

// write prints an imported policy, or, when a rule could not be kept
// exactly and --lossy was not given, each such rule and no policy.
func (p importParams) write(name, runtime string, im *policy.Imported) error {
	if len(im.Lossy) > 0 && !p.Lossy {
		for _, l := range im.Lossy {
			fmt.Fprintln(p.Stderr, sentence("aimon-gw import "+name, l))
		}
		what, them, each := "the rule above", "it", "it"
		if n := len(im.Lossy); n > 1 {
			what, them, each = fmt.Sprintf("the %d rules above", n), "them", "each"
		}
		return fail(exitFinding, "%s cannot be kept exactly, so no policy was written; rewrite %s, or give --lossy to write a policy in which %s is stricter than in %s", what, them, each, runtime)
	}
	fmt.Fprint(p.Stdout, im.Source)
	// Each note a sentence, as every line the command prints on stderr:
	// a lossy rule's note reads as it did when it stopped the import.
	for _, n := range im.Notes {
		fmt.Fprintln(p.Stderr, sentence("aimon-gw import "+name, n))
	}
	return nil
}
