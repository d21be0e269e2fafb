package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"time"
	"unsafe"

	"cuelang.org/go/cue"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/gate"
	"aimon.dev/gw/internal/core/rule"
)

// A Generation is one loaded policy. It is immutable once Load returns it:
// the gateway swaps whole generations, and nothing reads a half-loaded one.
type Generation struct {
	Plan
	// Wildcards are the servers that expose "*", by name, each as what its
	// tools share (Upstream.Tool is ""): provisioning adds the tools the
	// server lists (Expand).
	Wildcards map[string]*Tool
	lists     *surfaceLists // the declared lists, compiled from the plan
	chains    *allow.Chains // effective lists, computed once per chain
	comp      *compiler     // what Complete compiles with, and the lists
	// inputNotes are vet's findings in the tools' inputs, made while the
	// load still had them (release).
	inputNotes []Diagnostic
	// reuse holds the tools this load compiled, or reused, by their keys,
	// for the next load (reuse.go); never changed once loaded.
	reuse map[string]*kept
	// sorted keeps Sorted and SortedSurfaces, made once (each was sorted
	// afresh, several times in each decision of a sandboxed tool, issue
	// 49); a generation made from this one (Expand, Complete) has its own.
	sorted *sortedCache
}

// sortedCache holds a generation's sorted tool names and surface
// references, each with the map and the count it was made from: a load
// adds tools to its generation's map as it compiles (never removes one),
// and a generation made from another may share the cache with a map of its
// own, so either differing says it is not this map's.
type sortedCache struct{ names, refs atomic.Pointer[sortedOf] }

type sortedOf struct {
	m unsafe.Pointer
	n int
	s []string
}

// cached is c's slice made of the map m of n things, or a new one from
// make, kept.
func cached(c *atomic.Pointer[sortedOf], m unsafe.Pointer, n int, make func() []string) []string {
	if v := c.Load(); v != nil && v.m == m && v.n == n {
		return v.s
	}
	s := make()
	c.Store(&sortedOf{m, n, s})
	return s
}

// release drops what g holds of its policy's CUE once nothing can need it:
// any value of a CUE context keeps every value the context evaluated, the
// whole unified policy, alive (issue 32: 39 of a 1,000-tool policy's 44
// MiB). Only a generation with tools that wait for their implementation
// (Complete) or servers whose tools it learns when they run (Expand) keeps
// it. Its allow lists have a context of their own.
func (g *Generation) release() {
	if keepCUE || len(g.Wildcards) > 0 || len(g.Pending()) > 0 {
		return
	}
	for _, t := range g.Tools {
		t.Input = cue.Value{}
	}
	c := g.comp
	g.comp = &compiler{dir: c.dir, opts: c.opts, lists: c.lists, schemaDir: c.schemaDir}
}

// keepCUE keeps a loaded generation's CUE, for the test that holds each
// tool's JSON Schema equal to what CUE's exporter writes of its input.
var keepCUE = false

// newGeneration serves plan, compiling its lists with c.
func newGeneration(plan Plan, c *compiler) *Generation {
	return &Generation{Plan: plan, lists: newSurfaceLists(), chains: &allow.Chains{}, comp: c, sorted: new(sortedCache)}
}

// A Plan is what a load compiles, as plain data: the tools with their
// gates, the surfaces' lists as written, the settings, tests and
// principals. Calls are decided from it and what it compiles to (the
// allow lists); the hook's cache keeps it as it is (Save, Restore), so a
// cached decision runs through the same values as a live one.
type Plan struct {
	// Dir is the policy directory; "" for the embedded policy.
	Dir string
	// Revision identifies the policy's files: a prefix of the sha256 over them.
	Revision string
	// Tools by name.
	Tools map[string]*Tool
	// Surfaces by reference: "agent", "subagent:NAME", "skill:NAME", "command:NAME".
	Surfaces map[string]*Surface
	// Parallel holds the batch settings (rules K2, K3).
	Parallel Parallel
	// Validation is the policy-wide gate mode (rule S9).
	Validation rule.Mode
	// UnknownTools is what the Claude Code hook answers for a tool the
	// policy does not mention: "deny" or "ask".
	UnknownTools string
	// ClientParameters are the parameters MCP clients add to every tool,
	// dropped before the gate where a tool does not declare them.
	ClientParameters []string
	// DescribeBounds appends the bounds the gate enforces to each tool's
	// MCP description.
	DescribeBounds bool
	// Tests are the policy's own unit tests (aimon-gw test), by name.
	Tests []Test
	// Principals map callers over HTTP to surface chains, by name.
	Principals []*Principal
	// Limits bound how often the calls they select run (rule P19), by name.
	Limits []*Limit
	// Approvers approve asked calls of HTTP callers out of band, by name.
	Approvers []*Approver
	// Session is the labels results give a session and the flows that
	// decide by them (rule P18); nil when the policy has none.
	Session *Sessions `json:",omitempty"`
	// Provenance is where the policy requires arguments' values to come
	// from (rule P18), by tool, then field.
	Provenance []*Provenance `json:",omitempty"`
	// Warnings are problems that did not stop the load (rule P12); vet reports them.
	Warnings []Diagnostic
	// Dirs are directories outside the policy's that it reads (markdown
	// surfaces), for a watcher to follow.
	Dirs []string
	// Inputs are the files the load read, absolute: every file CUE parsed
	// (imports included), the YAML and JSON files, cue.mod/module.cue and
	// the markdown files. Empty for an embedded policy.
	Inputs []string
}

// A Tool is one tool the policy offers.
type Tool struct {
	Name        string
	Description string
	// Input is the tool's input schema: closed for built-ins (rule S2).
	// It is not part of the plan, and a load keeps it only while a tool
	// waits for its implementation to declare it (see release): the zero
	// value otherwise, as in a restored generation, whose gates decide
	// without it (see Restore).
	Input cue.Value `json:"-"`
	// Gate checks an input against Input (rule S4); its JSON Schema is the
	// tool's (JSONSchema).
	Gate *gate.Gate
	// OutputSchema is the schema of the tool's structured result as JSON
	// Schema; nil when it gives none.
	OutputSchema json.RawMessage
	// Concurrency is "sequential" or "concurrent_safe"; Interrupt one of the
	// four declarations of rule K1.
	Concurrency string
	Interrupt   string
	// Subject is the permission subject (rule P2); nil when the tool has none.
	Subject *Subject
	// Validation is the gate mode for this tool: its own or the policy's.
	Validation rule.Mode
	// Title is a short human-readable name; "" for none.
	Title string
	// Effect is the tool's side effect (rule P13): none, read, write or
	// destructive; Idempotent and OpenWorld are its MCP hints.
	Effect                string
	Idempotent, OpenWorld bool
	// PolicyDir is the directory of the policy that declares the tool; ""
	// for the embedded one.
	PolicyDir string
	// Sandbox is the tool's sandbox block (rule R6); nil when it has none.
	Sandbox *SandboxSpec
	// MaxFileBytes bounds the files the tool produces; 0 for no bound set.
	MaxFileBytes int64
	// Timeout bounds one call of an out-of-process tool; 0 for the
	// implementation's default.
	Timeout time.Duration
	// Reads is what the tool reads of the path its subject names (rule
	// P17): "file" (Read), "tree" (Grep, Glob) or "" for neither.
	Reads string
	// Builtin names the in-process implementation, or Plugin the
	// out-of-process one.
	Builtin string
	Plugin  *Plugin
	// Upstream is the MCP server tool behind the tool; nil for another kind.
	Upstream *Upstream
	// Unpinned says why an upstream tool is withheld: its definition no
	// longer matches its pin. Such a tool is neither listed nor run.
	Unpinned string
	// Unavailable says why an upstream tool is withheld because its
	// server cannot be started or reached; it is offered again once the
	// server answers (rule R4).
	Unavailable string
	// External names the program that runs the tool, when the gateway only
	// decides it ("claude-code").
	External string
	// Pos is where the policy declares the tool, and ImplPos where it names
	// the implementation (the builtin, the plugin's command).
	Pos, ImplPos Position

	subjectPos Position
	typeNames  []typeName      // vet's findings in its input (inputTypeNames)
	value      cue.Value       // the tool as the policy wrote it, for Complete
	pending    bool            // its implementation must declare its input (Complete)
	declared   json.RawMessage // the implementation's own schema, when the policy does not narrow it
	saved      json.RawMessage // the JSON Schema a restored plan holds
}

// JSONSchema returns the tool's input as draft 2020-12 JSON Schema, for
// tool lists (rule S1): the implementation's own when the policy does not
// narrow it, else its gate's, built when first asked (nil for a tool
// without a gate, which waits for its implementation).
func (t *Tool) JSONSchema() (json.RawMessage, error) {
	switch {
	case t.declared != nil:
		return t.declared, nil
	case t.saved != nil:
		return t.saved, nil
	case t.Gate == nil:
		return nil, nil
	}
	js, err := t.Gate.JSONSchema()
	if err != nil {
		return nil, fmt.Errorf("tool %s: its input cannot be exported as JSON Schema: %w", t.Name, err)
	}
	return js, nil
}

// toolData is a Tool without its methods, for its JSON.
type toolData Tool

// toolJSON is a tool as a plan saves it: with its JSON Schema, which the
// gate a plan restores cannot build.
type toolJSON struct {
	*toolData
	JSONSchema json.RawMessage
}

// MarshalJSON encodes the tool with its JSON Schema, built if it was not.
func (t *Tool) MarshalJSON() ([]byte, error) {
	js, err := t.JSONSchema()
	if err != nil {
		return nil, err
	}
	return json.Marshal(toolJSON{(*toolData)(t), js})
}

// UnmarshalJSONFrom decodes what MarshalJSON wrote, from the plan's
// stream (json v2; see gate.Gate.UnmarshalJSONFrom).
func (t *Tool) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	var d *Tool
	if err := newPlanReader(dec).tool(&d); err != nil {
		return err
	}
	if d != nil {
		*t = *d
	}
	return nil
}

// UnmarshalJSON is UnmarshalJSONFrom for encoding/json.
func (t *Tool) UnmarshalJSON(data []byte) error { return jsonv2.Unmarshal(data, t, planOptions) }

// planOptions read a plan as encoding/json wrote it: json v2 has no
// default form for a time.Duration (Tool.Timeout), which encoding/json
// writes as its nanoseconds.
var planOptions = jsonv1.FormatDurationAsNano(true)

// ReadsAs is what t reads of the path its subject names, as deny, ask and
// label entries bind it (rule P17): its declared reads, or "file" for a
// path tool whose declared effect is read, and for an MCP server's or a
// plugin's path tool that writes (an edit answers with what it read),
// since a Read deny binds every reader.
func (t *Tool) ReadsAs() string {
	if t.Reads != "" || t.Subject == nil || t.Subject.Kind != "path" || t.WritesFiles() {
		return t.Reads
	}
	if t.Effect == "read" || t.OpensItself() && t.Writes() {
		return "file"
	}
	return ""
}

// OpensItself reports whether the path t's subject names is opened by a
// program of its own (an MCP server, a plugin), which follows the links on
// it, rather than by the gateway's built-ins, which keep to their anchors.
func (t *Tool) OpensItself() bool { return t.Upstream != nil || t.Plugin != nil }

// Writes reports whether t's declared effect writes: write or destructive
// (the default).
func (t *Tool) Writes() bool {
	return t.Effect == "write" || t.Effect == "destructive" || t.Effect == ""
}

// Kind is the kind of the tool's implementation: "builtin", "plugin" or
// "external".
func (t *Tool) Kind() string {
	switch {
	case t.Plugin != nil:
		return "plugin"
	case t.External != "":
		return "external"
	case t.Upstream != nil:
		return "upstream"
	}
	return "builtin"
}

// WritesFiles reports whether t writes the files its path subject names:
// the built-ins Write and Edit, and Claude Code's editing tools. Their
// entries' directories are what a surface may write (rule R6).
func (t *Tool) WritesFiles() bool {
	switch {
	case t.Builtin == "Write", t.Builtin == "Edit":
		return true
	case t.External == "claude-code":
		return slices.Contains([]string{"Write", "Edit", "MultiEdit", "NotebookEdit"}, t.Name)
	case t.External == "gemini-cli":
		return t.Name == "write_file" || t.Name == "replace"
	}
	return false
}

// SearchesElsewhere reports whether t searches the tree below its path
// subject in a program the gateway does not run (Claude Code's Grep and
// Glob), which nothing keeps, file by file, to what the lists admit, as
// the built-ins are kept (rules P4, P14).
func (t *Tool) SearchesElsewhere() bool {
	return t.External == "claude-code" && (t.Name == "Grep" || t.Name == "Glob") ||
		t.External == "gemini-cli" && (t.Name == "grep_search" || t.Name == "glob" || t.Name == "list_directory")
}

// Withheld says why the tool is neither listed nor run, as a sentence for
// a caller, and the rule that withholds it; "" when it is offered.
func (t *Tool) Withheld() (rule.ID, string) {
	switch {
	case t.Unavailable != "":
		return rule.R4, fmt.Sprintf("%s is withheld because its MCP server %s is unavailable: %s The gateway tries the server again and offers the tool once it answers", t.Name, t.Upstream.Server, t.Unavailable)
	case t.Unpinned != "":
		return rule.S3, t.Name + " changed on its server since it was pinned, so it is withheld; tell the operator"
	}
	return "", ""
}

// Pending reports whether the tool waits for its implementation to declare
// its input (see Generation.Complete); such a tool cannot be served.
func (t *Tool) Pending() bool { return t.pending }

// Upstream is a tool of an upstream MCP server (stdio), or with Tool ""
// the server.
type Upstream struct {
	Server, Tool string
	// Pins are the server's pins by tool (aimon-gw pin); NoPin is set when
	// the server opts out of them.
	Pins    map[string]Pin
	NoPin   bool
	Command []string
	// SHA256 is the sha256 of the command's binary, hex; "" for none.
	SHA256 string
	// Scripts are the sha256 of arguments that name files, by argument.
	Scripts map[string]string
	Env     map[string]string
	Cwd     string
	// URL and Headers reach a streamable-HTTP server, instead of Command.
	URL     string
	Headers map[string]string
	// Identity is how a streamable-HTTP server is reached for each
	// caller; nil for the gateway's own headers alone.
	Identity *Identity
	// Start is when a started server runs: "load" or "call" (first use).
	Start string
	// TrustAnnotations lets the server's annotations say a tool's effect.
	TrustAnnotations bool
}

// Pin is the sha256 the tool's definition was pinned at; "" for none.
func (u *Upstream) Pin() string { return u.Pins[u.Tool].SHA256 }

// A Test is one policy unit test: a call and what must happen to it.
type Test struct {
	Name    string
	Pos     Position
	Surface []string
	// Principal is the caller whose chain the case runs on, when it names
	// one; Surface then extends that chain, or is that chain.
	Principal *Claims
	Tool      string
	Input     json.RawMessage
	Workdir   string
	Allowed   bool
	Ask       bool // the call must need approval (rule P14)
	Rule      rule.ID
	Reason    string // a regular expression the sentence must match
	// Session is what the case's session saw before its call (rule P18),
	// in order; none for a call decided alone.
	Session []Step `json:",omitempty"`
}

// A Step is what a test's session saw before its call (rule P18): the
// user's words (User), or a call and the result it returned (Result), or
// a call that failed (Error), whose result labels nothing.
type Step struct {
	Pos    Position
	User   string          `json:",omitempty"`
	Tool   string          `json:",omitempty"`
	Input  json.RawMessage `json:",omitempty"`
	Result string          `json:",omitempty"`
	Error  bool            `json:",omitempty"`
}

// SandboxSpec is a tool's sandbox block as the policy wrote it.
type SandboxSpec struct {
	Off     bool
	Write   []string
	Hide    []string
	Network bool
	// Hosts are sandbox.network.allow: with Network false, the hosts the
	// commands reach through the gateway's proxy.
	Hosts []string
	Env   []string
	// Exec are sandbox.exec: where a command may execute what it writes
	// ("DIR/**" or a file; relative to the working directory), and where
	// each is written.
	Exec    []string
	ExecPos []Position
}

// Subject names the input field that a permission pattern is matched against.
type Subject struct {
	Field string
	Kind  string // "command" or "path"
	// Default stands for the field when a call leaves it out: what the tool
	// then does ("." for the working directory); "" for none.
	Default string
}

// Plugin is how to start an out-of-process tool.
type Plugin struct {
	// Command starts the plugin; a relative binary is resolved against the
	// policy directory.
	Command []string
	SHA256  string
	// Tool is the tool's name inside the plugin.
	Tool string
}

// A Surface is one place that declares an allow list (rule P8).
type Surface struct {
	Ref string
	// Declared is false when the surface has no allowed-tools: unlimited (rule P11).
	Declared bool
	// Entries is the allow list as written, and EntryPos the position of each.
	Entries  []string
	EntryPos []Position
	// ListPos is where an empty allowed-tools is written, which has no
	// entry to point at; zero when it has entries.
	ListPos Position
	// Denied and Asked are the denied-tools and ask-tools entries as
	// written, with their positions (rule P14), from every source.
	Denied    []string
	DeniedPos []Position
	Asked     []string
	AskedPos  []Position
	// RuleFiles are the markdown files that give the surface deny or ask
	// entries and no allowed-tools (the others are in Sources).
	RuleFiles []string
	// Sources split Entries into the lists they came from: the CUE one and
	// each markdown file's; each is a level of rule P10's lattice.
	Sources []Source
	// MaxEffect is the surface's side-effect ceiling (rule P13); "" for none.
	MaxEffect    string
	MaxEffectPos Position
}

// Place is where entry is written on the surface, in the list named key:
// allowed-tools, denied-tools or ask-tools.
func (s *Surface) Place(entry, key string) (Position, bool) {
	entries, places := s.Entries, s.EntryPos
	switch key {
	case allow.DeniedTools:
		entries, places = s.Denied, s.DeniedPos
	case allow.AskTools:
		entries, places = s.Asked, s.AskedPos
	}
	if i := slices.Index(entries, entry); i >= 0 && i < len(places) {
		return places[i], true
	}
	return Position{}, false
}

// Files are the markdown files the surface's lists come from.
func (s *Surface) Files() []string {
	out := slices.Clone(s.RuleFiles)
	for _, src := range s.Sources {
		if src.File != "" {
			out = append(out, src.File)
		}
	}
	return out
}

// A Source is one list of a surface: Entries[Start:End], from File ("" for
// the policy's CUE or YAML).
type Source struct {
	Start, End int
	File       string
}

// effects orders the side effects (rule P13).
var effects = map[string]int{"none": 0, "read": 1, "write": 2, "destructive": 3}

// Above reports whether effect a is above ceiling b ("" is no ceiling).
func Above(a, b string) bool {
	if b == "" {
		return false
	}
	ea, ok := effects[a]
	if !ok {
		ea = effects["destructive"]
	}
	return ea > effects[b]
}

// Ceiling returns the side-effect ceiling of a surface chain: the lowest
// max-effect along it (rule P13), and the surface that sets it; "" for none.
func (g *Generation) Ceiling(chain []string) (effect, by string) {
	for _, ref := range chain {
		s, ok := g.Surfaces[ref]
		if !ok || s.MaxEffect == "" {
			continue
		}
		if effect == "" || effects[s.MaxEffect] < effects[effect] {
			effect, by = s.MaxEffect, ref
		}
	}
	if a := g.Surfaces["agent"]; a != nil && a.MaxEffect != "" && (effect == "" || effects[a.MaxEffect] < effects[effect]) {
		effect, by = a.MaxEffect, "agent"
	}
	return effect, by
}

// Parallel is the policy's batch settings.
type Parallel struct {
	Enabled        bool
	MaxConcurrency int
	PerBatchMax    int
}

// Names returns the tool names, sorted.
func (g *Generation) Names() []string {
	names := make([]string, 0, len(g.Tools))
	for n := range g.Tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Sorted is Names, one slice kept for the generation: not to be changed.
func (g *Generation) Sorted() []string {
	if g.sorted == nil {
		return g.Names()
	}
	return cached(&g.sorted.names, reflect.ValueOf(g.Tools).UnsafePointer(), len(g.Tools), g.Names)
}

// SortedSurfaces is SurfaceRefs, one slice kept for the generation: not
// to be changed.
func (g *Generation) SortedSurfaces() []string {
	if g.sorted == nil {
		return g.SurfaceRefs()
	}
	return cached(&g.sorted.refs, reflect.ValueOf(g.Surfaces).UnsafePointer(), len(g.Surfaces), g.SurfaceRefs)
}

// SurfaceRefs returns the surface references, sorted with the agent first.
func (g *Generation) SurfaceRefs() []string {
	refs := make([]string, 0, len(g.Surfaces))
	for r := range g.Surfaces {
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "agent":
			return -1
		case b == "agent":
			return 1
		case a < b:
			return -1
		}
		return 1
	})
	return refs
}
