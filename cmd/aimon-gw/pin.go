package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"cuelang.org/go/cue/format"
	cuejson "cuelang.org/go/encoding/json"
	"github.com/urfave/cli/v2"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/provision"
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
type pinned map[string]policy.Pin

// pin connects to each server held to pins and writes each tool's
// definition and its sha256 to pins.cue (on unchanged servers, the same
// bytes); with Diff, it prints what changed instead.
func pin(p pinParams) error {
	gen, err := policy.Load(p.Dir)
	if err != nil {
		return fail(exitFinding, "%s", loadProblem(p.Dir, err))
	}
	if p.Log == nil {
		p.Log = discard
	}
	up := &provision.Upstreams{Log: p.Log}
	defer up.Close()
	// The tools to pin: those the policy names, and every tool a server
	// that exposes "*" lists now.
	upstream := map[string]*policy.Tool{}
	old := map[string]pinned{} // by server, what pins.cue holds
	for _, name := range gen.Names() {
		if t := gen.Tools[name]; t.Upstream != nil && !t.Upstream.NoPin {
			upstream[name] = t
			old[t.Upstream.Server] = t.Upstream.Pins
		}
	}
	for server, w := range gen.Wildcards {
		if !w.Upstream.NoPin {
			old[server] = w.Upstream.Pins
		}
	}
	if len(old) == 0 {
		fmt.Fprintf(p.Stdout, "aimon-gw pin: %s declares no upstream server held to pins (servers without pin: false), so there is nothing to pin; nothing was written.\n", p.Dir)
		return nil
	}
	for server, w := range gen.Wildcards {
		if w.Upstream.NoPin {
			continue
		}
		names, release, err := up.List(context.Background(), w)
		if err != nil {
			return fail(exitFinding, "server %s: %v", server, err)
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
	now := map[string]pinned{}
	for server := range old {
		now[server] = pinned{}
	}
	for _, name := range slices.Sorted(maps.Keys(upstream)) {
		t := upstream[name]
		def, err := up.Definition(context.Background(), t)
		if err != nil {
			if p.Diff && !slices.Contains(slices.Collect(maps.Keys(gen.Wildcards)), t.Upstream.Server) {
				continue // a named tool the server no longer lists: removed
			}
			return fail(exitFinding, "tool %s: %v", name, err)
		}
		b, digest := provision.PinnedDefinition(def)
		now[t.Upstream.Server][t.Upstream.Tool] = policy.Pin{SHA256: digest, Definition: b}
	}
	if p.Diff {
		if changes := pinDiff(old, now); changes != "" {
			fmt.Fprint(p.Stdout, changes)
			return quiet(exitFinding)
		}
		fmt.Fprintf(p.Stdout, "aimon-gw pin --diff: every tool is as %s pins it.\n", filepath.Join(p.Dir, "pins.cue"))
		return nil
	}
	src, err := pinsFile(now)
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

// pinOrder is the order of a pin's members in pins.cue, as a reviewer
// reads them.
var pinOrder = []string{"sha256", "title", "description", "annotations", "inputSchema", "outputSchema"}

// pinsFile is pins.cue for the servers' tools: each tool's digest and
// definition, servers and tools sorted, formatted as CUE.
func pinsFile(servers map[string]pinned) ([]byte, error) {
	var js bytes.Buffer
	js.WriteString(`{"pins":{`)
	for i, server := range slices.Sorted(maps.Keys(servers)) {
		if i > 0 {
			js.WriteByte(',')
		}
		writeJSON(&js, server)
		js.WriteString(":{")
		for j, tool := range slices.Sorted(maps.Keys(servers[server])) {
			p := servers[server][tool]
			var def map[string]json.RawMessage
			if err := json.Unmarshal(p.Definition, &def); err != nil {
				return nil, err
			}
			def["sha256"], _ = json.Marshal(p.SHA256)
			if j > 0 {
				js.WriteByte(',')
			}
			writeJSON(&js, tool)
			js.WriteString(":{")
			first := true
			for _, k := range pinOrder {
				if v, ok := def[k]; ok {
					if !first {
						js.WriteByte(',')
					}
					first = false
					writeJSON(&js, k)
					js.WriteByte(':')
					js.Write(v)
				}
			}
			js.WriteByte('}')
		}
		js.WriteByte('}')
	}
	js.WriteString("}}")
	// Indented, so that each member gets a line of its own in CUE.
	var indented bytes.Buffer
	if err := json.Indent(&indented, js.Bytes(), "", "\t"); err != nil {
		return nil, err
	}
	expr, err := cuejson.Extract("pins.cue", indented.Bytes())
	if err != nil {
		return nil, err
	}
	body, err := format.Node(expr, format.Simplify())
	if err != nil {
		return nil, err
	}
	// The top-level braces of the object go: a file is a struct's body.
	body = bytes.TrimSpace(body)
	body = bytes.TrimSpace(body[1 : len(body)-1])
	var b bytes.Buffer
	b.WriteString("// Written by aimon-gw pin: the definitions the upstream servers' tools had\n// when they were reviewed, and the sha256 of each. A tool whose definition\n// changes is withheld until it is reviewed and pinned again; vet, check and\n// the hook decide from these definitions without starting the servers.\npackage policy\n\n")
	b.Write(unindent(body))
	b.WriteByte('\n')
	return format.Source(b.Bytes())
}

func writeJSON(b *bytes.Buffer, v any) {
	j, _ := json.Marshal(v)
	b.Write(j)
}

// unindent takes one tab off each line.
func unindent(b []byte) []byte {
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		lines[i] = bytes.TrimPrefix(l, []byte("\t"))
	}
	return bytes.Join(lines, []byte("\n"))
}
