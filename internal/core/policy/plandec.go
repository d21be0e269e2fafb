package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/jsontok"
)

// planReader reads a saved plan token by token (package jsontok) for the
// types every plan holds (the plan, its tools, surfaces and positions,
// the gates): json v2's reflection would build their decoders in every
// hook process, for one plan (issues 42, 43). The types a plan holds only
// when the policy uses them (limits, approvers,
// sessions, plugins, upstream servers) are read by json v2 as before.
type planReader struct {
	dec *jsontext.Decoder
	// data is what dec reads, when the reader knows it (decodePlan): a
	// gate is then read once, in the stream, and known by its bytes after.
	data []byte
	// gates are the gates read so far by their bytes: tools that a load
	// compiled once share one gate, which the plan writes for each.
	gates map[string]*gate.Gate
	opts  jsonv2.Options // for what json v2 reads
}

func newPlanReader(dec *jsontext.Decoder) *planReader {
	r := &planReader{dec: dec, gates: map[string]*gate.Gate{}}
	r.opts = jsonv2.JoinOptions(planOptions, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(_ *jsontext.Decoder, g **gate.Gate) error {
		return r.gate(g)
	})))
	return r
}

// decodePlanTokens is decodePlan's reading: one plan, then nothing.
func decodePlanTokens(data []byte) (saved, error) {
	r := newPlanReader(jsontext.NewDecoder(bytes.NewReader(data)))
	r.data = data
	var s saved
	if err := r.saved(&s); err != nil {
		// Where in the plan, as a JSON Pointer (/Tools/Read/Name).
		if at := r.dec.StackPointer(); at != "" {
			err = fmt.Errorf("at %s: %w", at, err)
		}
		return saved{}, err
	}
	if err := jsontok.End(r.dec, "plan"); err != nil {
		return saved{}, err
	}
	return s, nil
}

// v2 reads what json v2 reads as before into v, a field not yet read.
// null leaves it the zero value, as json v2 would make it, without
// building json v2's decoder for it: most plans have none of these (a
// tool's plugin, a test's principal, the plan's limits).
func (r *planReader) v2(v any) error {
	if r.dec.PeekKind() == 'n' {
		_, err := r.dec.ReadToken()
		return err
	}
	return jsonv2.UnmarshalDecode(r.dec, v, r.opts)
}

func (r *planReader) saved(s *saved) error {
	dec, p := r.dec, &s.Plan
	_, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Format":
			return jsontok.Int(dec, &s.Format, 64)
		case "Dir":
			return jsontok.String(dec, &p.Dir)
		case "Revision":
			return jsontok.String(dec, &p.Revision)
		case "Tools":
			p.Tools, err = jsontok.Map(dec, func(t **Tool) error { return r.tool(t) })
		case "Surfaces":
			p.Surfaces, err = jsontok.Map(dec, func(s **Surface) error { return r.surface(s) })
		case "Parallel":
			return r.parallel(&p.Parallel)
		case "Validation":
			return jsontok.String(dec, &p.Validation)
		case "UnknownTools":
			return jsontok.String(dec, &p.UnknownTools)
		case "ClientParameters":
			p.ClientParameters, err = jsontok.Strings(dec)
		case "DescribeBounds":
			return jsontok.Bool(dec, &p.DescribeBounds)
		case "Tests":
			p.Tests, err = jsontok.Slice(dec, r.test)
		case "Principals":
			p.Principals, err = jsontok.Slice(dec, r.principal)
		case "Limits":
			return r.v2(&p.Limits)
		case "Approvers":
			return r.v2(&p.Approvers)
		case "Session":
			return r.v2(&p.Session)
		case "Provenance":
			return r.v2(&p.Provenance)
		case "Warnings":
			return r.v2(&p.Warnings)
		case "Dirs":
			p.Dirs, err = jsontok.Strings(dec)
		case "Inputs":
			p.Inputs, err = jsontok.Strings(dec)
		default:
			return jsontok.Unknown("a plan", name)
		}
		return err
	})
	return err
}

// gate reads a gate, or the one read before in the same bytes.
func (r *planReader) gate(g **gate.Gate) error {
	if r.data != nil && r.dec.PeekKind() == '{' {
		// Read in the stream, not scanned once for its bytes and again
		// for the gate; the bytes from the name's end (":{...}") are the
		// same for the same gate, as Save writes them.
		start := r.dec.InputOffset()
		read := new(gate.Gate)
		if err := read.UnmarshalJSONFrom(r.dec); err != nil {
			return err
		}
		key := string(r.data[start:r.dec.InputOffset()])
		if r.gates[key] == nil {
			r.gates[key] = read
		}
		*g = r.gates[key]
		return nil
	}
	raw, err := r.dec.ReadValue()
	switch {
	case err != nil:
		return err
	case raw.Kind() == 'n':
		*g = nil
		return nil
	case r.gates[string(raw)] != nil:
		*g = r.gates[string(raw)]
		return nil
	}
	*g = new(gate.Gate)
	if err := (*g).UnmarshalJSONFrom(jsontext.NewDecoder(bytes.NewReader(raw))); err != nil {
		return err
	}
	r.gates[string(raw)] = *g
	return nil
}

// raw reads a value whole, as json.RawMessage's UnmarshalJSON keeps it
// (null as the bytes null).
func (r *planReader) raw(m *json.RawMessage) error {
	v, err := r.dec.ReadValue()
	if err == nil {
		*m = append((*m)[:0], v...)
	}
	return err
}

func (r *planReader) tool(tp **Tool) error {
	dec, t := r.dec, new(Tool)
	ok, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Name":
			return jsontok.String(dec, &t.Name)
		case "Description":
			return jsontok.String(dec, &t.Description)
		case "Gate":
			return r.gate(&t.Gate)
		case "OutputSchema":
			return r.raw(&t.OutputSchema)
		case "Concurrency":
			return jsontok.String(dec, &t.Concurrency)
		case "Interrupt":
			return jsontok.String(dec, &t.Interrupt)
		case "Subject":
			return r.subject(&t.Subject)
		case "Validation":
			return jsontok.String(dec, &t.Validation)
		case "Title":
			return jsontok.String(dec, &t.Title)
		case "Effect":
			return jsontok.String(dec, &t.Effect)
		case "Idempotent":
			return jsontok.Bool(dec, &t.Idempotent)
		case "OpenWorld":
			return jsontok.Bool(dec, &t.OpenWorld)
		case "PolicyDir":
			return jsontok.String(dec, &t.PolicyDir)
		case "Sandbox":
			return r.sandbox(&t.Sandbox)
		case "MaxFileBytes":
			return jsontok.Int(dec, &t.MaxFileBytes, 64)
		case "Timeout":
			// encoding/json writes a time.Duration as its nanoseconds
			// (planOptions).
			return jsontok.Int(dec, &t.Timeout, 64)
		case "Builtin":
			return jsontok.String(dec, &t.Builtin)
		case "Reads":
			return jsontok.String(dec, &t.Reads)
		case "Plugin":
			return r.v2(&t.Plugin)
		case "Upstream":
			return r.v2(&t.Upstream)
		case "Unpinned":
			return jsontok.String(dec, &t.Unpinned)
		case "Unavailable":
			return jsontok.String(dec, &t.Unavailable)
		case "External":
			return jsontok.String(dec, &t.External)
		case "Pos":
			return r.position(&t.Pos)
		case "ImplPos":
			return r.position(&t.ImplPos)
		case "JSONSchema":
			return r.raw(&t.saved)
		}
		return jsontok.Unknown("a tool", name)
	})
	if ok {
		*tp = t
	}
	return err
}

func (r *planReader) test(t *Test) error {
	dec := r.dec
	_, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Name":
			return jsontok.String(dec, &t.Name)
		case "Pos":
			return r.position(&t.Pos)
		case "Surface":
			t.Surface, err = jsontok.Strings(dec)
		case "Principal":
			return r.v2(&t.Principal)
		case "Tool":
			return jsontok.String(dec, &t.Tool)
		case "Input":
			return r.raw(&t.Input)
		case "Workdir":
			return jsontok.String(dec, &t.Workdir)
		case "Allowed":
			return jsontok.Bool(dec, &t.Allowed)
		case "Ask":
			return jsontok.Bool(dec, &t.Ask)
		case "Rule":
			return jsontok.String(dec, &t.Rule)
		case "Reason":
			return jsontok.String(dec, &t.Reason)
		case "Session":
			return r.v2(&t.Session)
		default:
			return jsontok.Unknown("a test", name)
		}
		return err
	})
	return err
}

// principal reads a principal of the plan's (a policy that serves HTTP
// callers, or the agents' hooks, has one or more).
func (r *planReader) principal(pp **Principal) error {
	dec, p := r.dec, new(Principal)
	ok, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Name":
			return jsontok.String(dec, &p.Name)
		case "Subject":
			return jsontok.String(dec, &p.Subject)
		case "Group":
			return jsontok.String(dec, &p.Group)
		case "Client":
			return jsontok.String(dec, &p.Client)
		case "Scopes":
			p.Scopes, err = jsontok.Strings(dec)
		case "Surface":
			p.Surface, err = jsontok.Strings(dec)
		case "Pos":
			return r.position(&p.Pos)
		default:
			return jsontok.Unknown("a principal", name)
		}
		return err
	})
	if ok {
		*pp = p
	}
	return err
}

func (r *planReader) subject(sp **Subject) error {
	dec, s := r.dec, new(Subject)
	ok, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Field":
			return jsontok.String(dec, &s.Field)
		case "Kind":
			return jsontok.String(dec, &s.Kind)
		case "Default":
			return jsontok.String(dec, &s.Default)
		}
		return jsontok.Unknown("a tool's subject", name)
	})
	if ok {
		*sp = s
	}
	return err
}

func (r *planReader) sandbox(sp **SandboxSpec) error {
	dec, s := r.dec, new(SandboxSpec)
	ok, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Off":
			return jsontok.Bool(dec, &s.Off)
		case "Write":
			s.Write, err = jsontok.Strings(dec)
		case "Hide":
			s.Hide, err = jsontok.Strings(dec)
		case "Network":
			return jsontok.Bool(dec, &s.Network)
		case "Hosts":
			s.Hosts, err = jsontok.Strings(dec)
		case "Env":
			s.Env, err = jsontok.Strings(dec)
		case "Exec":
			s.Exec, err = jsontok.Strings(dec)
		case "ExecPos":
			s.ExecPos, err = r.positions()
		default:
			return jsontok.Unknown("a tool's sandbox", name)
		}
		return err
	})
	if ok {
		*sp = s
	}
	return err
}

func (r *planReader) surface(sp **Surface) error {
	dec, s := r.dec, new(Surface)
	ok, err := jsontok.Object(dec, func(name string) error {
		var err error
		switch name {
		case "Ref":
			return jsontok.String(dec, &s.Ref)
		case "Declared":
			return jsontok.Bool(dec, &s.Declared)
		case "Entries":
			s.Entries, err = jsontok.Strings(dec)
		case "EntryPos":
			s.EntryPos, err = r.positions()
		case "ListPos":
			return r.position(&s.ListPos)
		case "Denied":
			s.Denied, err = jsontok.Strings(dec)
		case "DeniedPos":
			s.DeniedPos, err = r.positions()
		case "Asked":
			s.Asked, err = jsontok.Strings(dec)
		case "AskedPos":
			s.AskedPos, err = r.positions()
		case "RuleFiles":
			s.RuleFiles, err = jsontok.Strings(dec)
		case "Sources":
			s.Sources, err = jsontok.Slice(dec, r.source)
		case "MaxEffect":
			return jsontok.String(dec, &s.MaxEffect)
		case "MaxEffectPos":
			return r.position(&s.MaxEffectPos)
		default:
			return jsontok.Unknown("a surface", name)
		}
		return err
	})
	if ok {
		*sp = s
	}
	return err
}

func (r *planReader) source(s *Source) error {
	dec := r.dec
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Start":
			return jsontok.Int(dec, &s.Start, 64)
		case "End":
			return jsontok.Int(dec, &s.End, 64)
		case "File":
			return jsontok.String(dec, &s.File)
		}
		return jsontok.Unknown("a surface's source", name)
	})
	return err
}

func (r *planReader) parallel(p *Parallel) error {
	dec := r.dec
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "Enabled":
			return jsontok.Bool(dec, &p.Enabled)
		case "MaxConcurrency":
			return jsontok.Int(dec, &p.MaxConcurrency, 64)
		case "PerBatchMax":
			return jsontok.Int(dec, &p.PerBatchMax, 64)
		}
		return jsontok.Unknown("the parallel settings", name)
	})
	return err
}

func (r *planReader) positions() ([]Position, error) {
	return jsontok.Slice(r.dec, r.position)
}

func (r *planReader) position(p *Position) error {
	dec := r.dec
	_, err := jsontok.Object(dec, func(name string) error {
		switch name {
		case "File":
			return jsontok.String(dec, &p.File)
		case "Line":
			return jsontok.Int(dec, &p.Line, 64)
		case "Col":
			return jsontok.Int(dec, &p.Col, 64)
		}
		return jsontok.Unknown("a position", name)
	})
	return err
}
