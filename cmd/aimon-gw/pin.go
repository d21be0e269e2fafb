package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

type pinParams struct {
	Dir    string
	Stdout io.Writer
	Log    *slog.Logger // the upstream servers' logs
	// Diff prints what changed between the pins and the servers' tools
	// now, and writes nothing.
	Diff bool
}

func pinCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "pin",
		Usage:     "record the definitions of the upstream servers' tools in DIR/pins.cue, for review in git",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "diff", Usage: "print what changed in each tool since it was pinned, and write nothing; exit 1 when something changed"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one policy directory: aimon-gw pin DIR")
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			return pin(pinParams{Dir: c.Args().First(), Stdout: stdout, Log: log, Diff: c.Bool("diff")})
		},
	}
}

// pinned is one server's tools, as pins hold them or as the server lists
// them now: by the server's name of the tool, its pin.
type pinned = map[string]policy.Pin

// pin connects to each server held to pins and writes each tool's
// definition and its sha256 to pins.cue (on unchanged servers, the same
// bytes); with Diff, it prints what changed instead.
func pin(p pinParams) error {
	ctx := context.Background()
	// No working directory: the pins are of the servers, not of a checkout.
	pol, err := policy.Load(ctx, p.Dir, policy.WithWorkdir(""))
	if err != nil {
		return fail(exitFinding, "%s", loadProblem(p.Dir, err))
	}
	st, err := pol.Pin(ctx, policy.PinOptions{Logger: p.Log, Removed: p.Diff})
	if err != nil {
		return fail(exitFinding, "%v", err)
	}
	if len(st.Pinned) == 0 {
		fmt.Fprintf(p.Stdout, "aimon-gw pin: %s declares no upstream server held to pins (servers without pin: false), so there is nothing to pin; nothing was written.\n", p.Dir)
		return nil
	}
	if p.Diff {
		if changes := pinDiff(st.Pinned, st.Now); changes != "" {
			fmt.Fprint(p.Stdout, changes)
			return quiet(exitFinding)
		}
		fmt.Fprintf(p.Stdout, "aimon-gw pin --diff: every tool is as %s pins it.\n", filepath.Join(p.Dir, "pins.cue"))
		return nil
	}
	src, err := st.Now.File()
	if err != nil {
		return fail(exitFinding, "%v", err)
	}
	file := filepath.Join(p.Dir, "pins.cue")
	if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, src) {
		fmt.Fprintf(p.Stdout, "aimon-gw pin: %s is up to date.\n", file)
		return nil
	}
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return fail(exitUsage, "%v", err)
	}
	fmt.Fprintf(p.Stdout, "aimon-gw pin: wrote %s; review it and commit it beside the policy.\n", file)
	return nil
}
