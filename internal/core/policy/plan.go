package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/internal/core/gate"
)

// planFormat changes whenever the plan's encoding does.
const planFormat = 7

// ErrNotSaved says why a generation cannot be saved: some decision of it
// needs more than its plan holds.
var ErrNotSaved = errors.New("the generation cannot be saved")

// saved is the encoding of a plan: its format, then the plan.
type saved struct {
	Format int
	Plan
}

// Save encodes g's plan as JSON, for Restore (the hook's cache). It
// refuses (ErrNotSaved) a generation whose decisions depend on more than
// its files: a plugin's or an upstream server's declared tools, or a gate
// that needs CUE for some input.
//
// JSON rather than gob: a hook process decodes one plan and exits, and gob
// would first decode and compile the types' descriptions; the JSON of the
// team example decodes in about the time gob takes (BenchmarkPlanCodec).
func (g *Generation) Save() ([]byte, error) {
	if len(g.Wildcards) > 0 {
		return nil, fmt.Errorf("%w: a server exposes \"*\", whose tools it lists when it runs", ErrNotSaved)
	}
	for _, name := range g.Names() {
		t := g.Tools[name]
		switch {
		case t.Plugin != nil || t.Upstream != nil || t.pending:
			return nil, fmt.Errorf("%w: %s is a %s tool, whose schema its implementation declares", ErrNotSaved, name, t.Kind())
		case t.Gate == nil:
			return nil, fmt.Errorf("%w: %s has no gate", ErrNotSaved, name)
		case t.Gate.NeedsCUE():
			return nil, fmt.Errorf("%w: %s: %v", ErrNotSaved, name, gate.ErrNeedsCUE)
		}
	}
	return json.Marshal(saved{Format: planFormat, Plan: g.Plan})
}

// Restore makes a generation of what Save wrote, with path patterns
// relative to the working directory resolving as opts say (WithWorkdir),
// as a load with the same options would. Its tools have no CUE Input
// (their gates decide without it) and it cannot be completed; a restored
// generation is for deciding calls. Its lists are compiled from the plan
// as a load's are, each when a chain first needs it.
func Restore(data []byte, opts ...Option) (*Generation, error) {
	d, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return d.Restore(opts...)
}

// A Decoded is a plan Save wrote, read and checked, which no options
// change: the hook decodes it while it reads its input and checks the
// files it was loaded from, and restores it with the input's options.
type Decoded struct {
	plan Plan
	used bool
}

// Decode reads and checks what Save wrote, as Restore does.
func Decode(data []byte) (*Decoded, error) {
	s, err := decodePlan(data)
	if err != nil {
		return nil, err
	}
	if s.Format != planFormat {
		return nil, fmt.Errorf("the saved policy is of format %d, not %d", s.Format, planFormat)
	}
	if err := s.Plan.check(); err != nil {
		return nil, fmt.Errorf("the saved policy %w", err)
	}
	return &Decoded{plan: s.Plan}, nil
}

// Restore makes the generation of the decoded plan, as Restore of its
// bytes with opts does. It makes one: the generation holds the plan's
// maps, which a second would share.
func (d *Decoded) Restore(opts ...Option) (*Generation, error) {
	if d.used {
		return nil, errors.New("the saved policy was restored once already; decode it again")
	}
	d.used = true
	c := newCompiler(d.plan.Dir, opts)
	c.ctx, c.lists = cuecontext.New(), cuecontext.New()
	return newGeneration(d.plan, c), nil
}

// decodePlan decodes what Save wrote with json v2's jsontext, streaming
// the whole plan token by token (planReader): the same values as
// encoding/json reads (a Save of them writes the same bytes), in a
// fraction of its time. Tools that a load compiled once (memo.go) share
// one gate, which the plan writes for each: a gate written as an earlier
// one is that one, decoded once, as the load shared it.
func decodePlan(data []byte) (saved, error) {
	s, err := decodePlanTokens(data)
	if err != nil {
		return saved{}, fmt.Errorf("the saved policy cannot be read: %w", err)
	}
	return s, nil
}

// check reports what of a decoded plan no load makes, as the end of a
// sentence.
func (p *Plan) check() error {
	if p.Surfaces["agent"] == nil {
		return errors.New("has no agent surface")
	}
	if p.Tools == nil {
		p.Tools = map[string]*Tool{}
	}
	for name, t := range p.Tools {
		switch {
		case t == nil || t.Name != name:
			return fmt.Errorf("has the tool %q under another name", name)
		case t.Gate == nil:
			return fmt.Errorf("has the tool %s without a gate", name)
		}
		// An output schema the load left nil decodes as JSON null: restore
		// it as nil, or a tool list would show "outputSchema": null.
		if string(t.OutputSchema) == "null" {
			t.OutputSchema = nil
		}
	}
	for ref, sf := range p.Surfaces {
		if sf == nil || sf.Ref != ref {
			return fmt.Errorf("has the surface %q under another name", ref)
		}
		for _, src := range sf.Sources {
			if src.Start < 0 || src.Start > src.End || src.End > len(sf.Entries) {
				return fmt.Errorf("has a list of the surface %s outside its entries", ref)
			}
		}
		if len(sf.EntryPos) != len(sf.Entries) || len(sf.DeniedPos) != len(sf.Denied) || len(sf.AskedPos) != len(sf.Asked) {
			return fmt.Errorf("has %d positions for the %d entries of the surface %s", len(sf.EntryPos)+len(sf.DeniedPos)+len(sf.AskedPos), len(sf.Entries)+len(sf.Denied)+len(sf.Asked), ref)
		}
	}
	return nil
}

// Relative reports whether some entry resolves against the working
// directory g was loaded with ("./" patterns), so that its decisions hold
// for that directory alone.
func (g *Generation) Relative() bool {
	subjects := listSubjects(g)
	for _, s := range g.Surfaces {
		for _, es := range [][]string{s.Entries, s.Denied, s.Asked} {
			for i, r := range g.comp.resolveEntries(es, subjects) {
				// A ~/ pattern resolves against the home, not the workdir.
				if _, pattern, _ := strings.Cut(es[i], "("); r != es[i] && !strings.HasPrefix(pattern, "~/") {
					return true
				}
			}
		}
	}
	return false
}
