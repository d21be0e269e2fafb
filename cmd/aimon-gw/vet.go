package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/policy"
)

type vetParams struct {
	Dir         string
	Format      string // text, json or github
	Strict      bool   // warnings fail too
	LoadTimeout time.Duration
	Stdout      io.Writer
	Log         *slog.Logger    // the load's logs (plugins, upstream servers)
	Ctx         context.Context // ends the load (SIGTERM); nil for never
}

func vetCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "vet",
		Usage:     "check a policy directory; exit 0 sound or with warnings only, 1 with errors (or, with --strict, warnings), 2 on a usage error",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{loadTimeoutFlag(),
			&cli.BoolFlag{Name: "strict", Usage: "exit 1 on warnings too (entries that deny, lists that leave no tool): for CI"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text (file:line:col: message), json (an array of problems), or github (workflow commands)"}},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fail(exitUsage, "give one policy directory: aimon-gw vet DIR")
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			return vet(vetParams{Dir: c.Args().First(), Format: c.String("format"), Strict: c.Bool("strict"), LoadTimeout: c.Duration("load-timeout"), Stdout: stdout, Log: log, Ctx: c.Context})
		},
	}
}

// vet prints every problem of the policy in p.Dir, one per line, and fails
// with exit code 1 when one is an error, or with p.Strict when there is any.
// A warning is a policy that loads and is served, but not as its authors
// meant (an entry that denies, a list that leaves no tool).
func vet(p vetParams) error {
	switch p.Format {
	case "", "text", "json", "github":
	default:
		return fail(exitUsage, "--format %q is not a format; use text, json or github", p.Format)
	}
	if st, err := os.Stat(p.Dir); err != nil || !st.IsDir() {
		return fail(exitUsage, "%s is not a directory; give vet the directory of a policy: aimon-gw vet DIR", p.Dir)
	}
	if p.Log == nil {
		p.Log = discard
	}
	// No working directory: a policy is vetted apart from any checkout.
	pol, err := policy.Load(orBackground(p.Ctx), p.Dir, policy.WithWorkdir(""), policy.WithTimeout(p.LoadTimeout), policy.WithLogger(p.Log))
	var problems []policy.Diagnostic
	var errs policy.Errors
	switch {
	case errors.As(err, &errs):
		problems, err = errs, nil
	case err == nil:
		problems, err = pol.Vet(orBackground(p.Ctx))
	}
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	if err := printProblems(p.Stdout, p.Format, problems); err != nil {
		return fail(exitUsage, "%v", err)
	}
	for _, d := range problems {
		if !d.Warning || p.Strict {
			return quiet(exitFinding)
		}
	}
	return nil
}

// vetProblem is one problem in vet's JSON form.
type vetProblem struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	Severity string `json:"severity"`
}

// printProblems writes the problems in the format: text lines, a JSON
// array, or GitHub workflow commands that land on the pull request's lines.
func printProblems(w io.Writer, format string, problems []policy.Diagnostic) error {
	switch format {
	case "json":
		out := make([]vetProblem, 0, len(problems))
		for _, d := range problems {
			sev := "error"
			if d.Warning {
				sev = "warning"
			}
			out = append(out, vetProblem{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Code, d.Message, sev})
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "github":
		for _, d := range problems {
			kind := "error"
			if d.Warning {
				kind = "warning"
			}
			fmt.Fprintf(w, "::%s file=%s,line=%d,col=%d,title=aimon-gw vet %s::%s\n", kind, ghEscape(d.Pos.File, true), max(d.Pos.Line, 1), max(d.Pos.Col, 1), ghEscape(d.Code, true), ghEscape(d.Message, false))
		}
		return nil
	}
	for _, d := range problems {
		if d.Warning {
			// Said in the line, as vet exits 0 on warnings alone.
			d.Message = "warning: " + d.Message
		}
		fmt.Fprintln(w, d.String())
	}
	return nil
}

// ghEscape escapes a workflow command's data, or (prop) a property value.
func ghEscape(s string, prop bool) string {
	s = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
	if prop {
		s = strings.NewReplacer(":", "%3A", ",", "%2C").Replace(s)
	}
	return s
}

// orBackground is ctx, or the background context when it is nil.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
