package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"cuelang.org/go/cue/format"
	cuejson "cuelang.org/go/encoding/json"

	ipolicy "aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/provision"
)

// A Pin is one upstream tool's definition as the policy's lockfile,
// pins.cue, holds it: a tool whose server now gives another definition is
// withheld until it is reviewed and pinned again (rule S3).
type Pin struct {
	// SHA256 is the digest of the definition ("sha256:…").
	SHA256 string
	// Definition is the tool as its server listed it, as JSON (name,
	// description, inputSchema, annotations, and title and outputSchema
	// when it has them); nil when the pins hold only its digest (pins
	// written before the definitions were).
	Definition json.RawMessage
}

// Pins are upstream tools' pins by server, then by the server's own name
// of the tool.
type Pins map[string]map[string]Pin

// PinOptions configure Pin.
type PinOptions struct {
	// Logger receives the upstream servers' logs; nil for none.
	Logger *slog.Logger
	// Removed leaves out of PinState.Now a tool the policy names whose
	// server gives no definition of it now, as removed (aimon-gw pin
	// --diff reports it so); without it, that is an error, since no pin
	// of it can be written.
	Removed bool
}

// A PinState is what the policy's pins hold and what the servers give now,
// of each upstream server the policy holds to pins (every server but one
// with pin: false).
type PinState struct {
	// Pinned are the pins of pins.cue, by server; a server none of whose
	// tools is pinned yet has an empty set.
	Pinned Pins
	// Now are the definitions the servers give now: of each tool the
	// policy names, and of every tool a server that exposes "*" lists.
	Now Pins
}

// Pin connects to each upstream server the policy holds to pins and reads
// the definition of each of its tools, as aimon-gw pin does: the state to
// write (Now.File) or to review against the pins (Pinned). A policy that
// holds no server to pins gives an empty state and starts nothing. A
// server that cannot be reached, or a tool it does not give, is an error
// that names it.
func (p *Policy) Pin(ctx context.Context, o PinOptions) (*PinState, error) {
	ctx = orBackground(ctx)
	gen := p.ref.Gen
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st := &PinState{Pinned: Pins{}, Now: Pins{}}
	// The tools to pin: those the policy names, and every tool a server
	// that exposes "*" lists now.
	upstream := map[string]*ipolicy.Tool{}
	for _, name := range gen.Names() {
		if t := gen.Tools[name]; t.Upstream != nil && !t.Upstream.NoPin {
			upstream[name] = t
			st.Pinned[t.Upstream.Server] = pins(t.Upstream.Pins)
		}
	}
	for server, w := range gen.Wildcards {
		if !w.Upstream.NoPin {
			st.Pinned[server] = pins(w.Upstream.Pins)
		}
	}
	if len(st.Pinned) == 0 {
		return st, nil
	}
	up := &provision.Upstreams{Log: log}
	defer up.Close()
	for server, w := range gen.Wildcards {
		if w.Upstream.NoPin {
			continue
		}
		names, release, err := up.List(ctx, w)
		if err != nil {
			return nil, fmt.Errorf("server %s: %w", server, err)
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
	for server := range st.Pinned {
		st.Now[server] = map[string]Pin{}
	}
	for _, name := range slices.Sorted(maps.Keys(upstream)) {
		t := upstream[name]
		def, err := up.Definition(ctx, t)
		if err != nil {
			if _, wild := gen.Wildcards[t.Upstream.Server]; o.Removed && !wild {
				continue // a named tool the server no longer lists: removed
			}
			return nil, fmt.Errorf("tool %s: %w", name, err)
		}
		b, digest := provision.PinnedDefinition(def)
		st.Now[t.Upstream.Server][t.Upstream.Tool] = Pin{SHA256: digest, Definition: b}
	}
	return st, nil
}

// pins converts a server's pins from the load.
func pins(in map[string]ipolicy.Pin) map[string]Pin {
	out := make(map[string]Pin, len(in))
	for tool, p := range in {
		out[tool] = Pin{SHA256: p.SHA256, Definition: p.Definition}
	}
	return out
}

// pinOrder is the order of a pin's members in pins.cue, as a reviewer
// reads them.
var pinOrder = []string{"sha256", "title", "description", "annotations", "inputSchema", "outputSchema"}

// PinMembers are the members of a pin in the order pins.cue writes them,
// as a reviewer reads them: its digest first, then the definition's
// title, description, annotations and schemas.
func PinMembers() []string { return slices.Clone(pinOrder) }

// File is pins.cue holding ps, as aimon-gw pin writes it beside the
// policy: each tool's digest and definition, servers and tools sorted,
// formatted as CUE, so that the same definitions are the same bytes. A
// pin without its definition cannot be written.
func (ps Pins) File() ([]byte, error) {
	var js bytes.Buffer
	js.WriteString(`{"pins":{`)
	for i, server := range slices.Sorted(maps.Keys(ps)) {
		if i > 0 {
			js.WriteByte(',')
		}
		writeJSON(&js, server)
		js.WriteString(":{")
		for j, tool := range slices.Sorted(maps.Keys(ps[server])) {
			p := ps[server][tool]
			var def map[string]json.RawMessage
			if err := json.Unmarshal(p.Definition, &def); err != nil {
				return nil, fmt.Errorf("the pin of %s's tool %s holds no definition as JSON (%v); pin it from its server", server, tool, err)
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
