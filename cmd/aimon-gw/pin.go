package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/provision"
	"aimon.dev/gw/policy"
)

type pinParams struct {
	Dir    string
	Stdout io.Writer
	Log    *slog.Logger // the upstream servers' logs
}

func pinCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "pin",
		Usage:     "record the definitions of the upstream servers' tools in DIR/pins.cue, for review in git",
		ArgsUsage: "DIR",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("aimon-gw pin takes one policy directory: aimon-gw pin DIR.", exitUsage)
			}
			log, err := logger(c)
			if err != nil {
				return err
			}
			return pin(pinParams{Dir: c.Args().First(), Stdout: stdout, Log: log})
		},
	}
}

// pin connects to each server, and writes the sha256 of each exposed
// tool's definition to pins.cue: on unchanged servers, the same bytes.
func pin(p pinParams) error {
	gen, err := policy.Load(p.Dir)
	if err != nil {
		return cli.Exit(loadProblem(p.Dir, err), exitFinding)
	}
	if p.Log == nil {
		p.Log = discard
	}
	up := &provision.Upstreams{Log: p.Log}
	defer up.Close()
	pins := map[string]map[string]string{}
	// The tools to pin: those the policy names, and every tool a server
	// that exposes "*" lists now.
	upstream := map[string]*policy.Tool{}
	for _, name := range gen.Names() {
		if t := gen.Tools[name]; t.Upstream != nil && !t.Upstream.NoPin {
			upstream[name] = t
		}
	}
	if len(upstream) == 0 && !slices.ContainsFunc(slices.Collect(maps.Values(gen.Wildcards)), func(w *policy.Tool) bool { return !w.Upstream.NoPin }) {
		fmt.Fprintf(p.Stdout, "aimon-gw pin: %s declares no upstream server held to pins (servers without pin: false), so there is nothing to pin; nothing was written.\n", p.Dir)
		return nil
	}
	for server, w := range gen.Wildcards {
		if w.Upstream.NoPin {
			continue
		}
		names, release, err := up.List(context.Background(), w)
		if err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw pin: server %s: %v.", server, err), exitFinding)
		}
		defer release()
		for _, n := range names {
			t := *w
			u := *w.Upstream
			u.Tool, t.Upstream, t.Name = n, &u, server+"__"+n
			if _, named := upstream[t.Name]; !named {
				upstream[t.Name] = &t
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(upstream)) {
		t := upstream[name]
		def, err := up.Definition(context.Background(), t)
		if err != nil {
			return cli.Exit(fmt.Sprintf("aimon-gw pin: tool %s: %v.", name, err), exitFinding)
		}
		if pins[t.Upstream.Server] == nil {
			pins[t.Upstream.Server] = map[string]string{}
		}
		pins[t.Upstream.Server][t.Upstream.Tool] = provision.PinOf(def)
	}
	var b strings.Builder
	b.WriteString("// Written by aimon-gw pin: the definitions the upstream servers' tools had\n// when they were reviewed. A tool whose definition changes is withheld until\n// it is reviewed and pinned again.\npackage policy\n\npins: {\n")
	servers := make([]string, 0, len(pins))
	for s := range pins {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		fmt.Fprintf(&b, "\t%q: {\n", s)
		names := make([]string, 0, len(pins[s]))
		for n := range pins[s] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "\t\t%q: %q\n", n, pins[s][n])
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	file := filepath.Join(p.Dir, "pins.cue")
	if old, err := os.ReadFile(file); err == nil && string(old) == b.String() {
		fmt.Fprintf(p.Stdout, "aimon-gw pin: %s is up to date.\n", file)
		return nil
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return cli.Exit(fmt.Sprintf("aimon-gw pin: %v.", err), exitUsage)
	}
	fmt.Fprintf(p.Stdout, "aimon-gw pin: wrote %s; review it and commit it beside the policy.\n", file)
	return nil
}
