package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
)

// TestR3SaveRefusesWhatFilesDoNotSay: a generation whose decisions depend on
// more than its files is not saved (issue 14): a plugin's declared tools,
// and a gate that decides some inputs through CUE.
func TestR3SaveRefusesWhatFilesDoNotSay(t *testing.T) {
	tests := []struct{ note, body, want string }{
		{"a plugin tool", "tools: Echo: schema.#Echo\ntools: Fetch: plugin: command: [\"fetch\"]\n", "Fetch is a plugin tool"},
		{"a completed plugin tool", "tools: Echo: schema.#Echo\ntools: Fetch: plugin: command: [\"fetch\"]\n", "Fetch is a plugin tool"},
		{"a cross-field bound", "tools: Read: schema.#Read & {input: {offset?: int, limit?: int & >offset}}\n", "Read: the schema needs CUE"},
	}
	for i, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			dir := writePolicy(t, map[string]string{"policy.cue": header + tc.body})
			var g *Generation
			var err error
			if i == 1 {
				g, err = loadComplete(t, dir, map[string]Declared{"Fetch": {InputSchema: []byte(`{"type":"object"}`)}})
			} else {
				g, err = Load(dir) // a plugin tool is pending until provisioned
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Save(); !errors.Is(err, ErrNotSaved) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Save = %v, want ErrNotSaved saying %q", err, tc.want)
			}
		})
	}
}

// TestR3RestoreBadInput: what is not a saved plan is an error.
func TestR3RestoreBadInput(t *testing.T) {
	for _, tc := range []struct{ note, data, want string }{
		{"not JSON", `{"Format":5,`, "cannot be read"},
		{"two plans", `{"Format":5}` + "\n{}", "cannot be read"},
		{"another format", `{"Format":99}`, "format 99"},
		{"no agent", `{"Format":5,"Surfaces":{}}`, "no agent surface"},
		{"a tool under another name", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Write"}}}`, `"Read" under another name`},
		{"a tool without its gate", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Read"}}}`, "without a gate"},
		{"a gate without a schema", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Read","Gate":{}}}}`, "no schema"},
		{"a surface under another name", `{"Format":5,"Surfaces":{"agent":{"Ref":"skill:x"}}}`, "under another name"},
		{"a list outside its entries", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent","Declared":true,"Entries":["Read"],"EntryPos":[{}],"Sources":[{"Start":0,"End":5}]}}}`, "outside its entries"},
		// What the plan's reader (planReader) refuses, each at its place.
		{"a field no plan has", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Extra":1}`, `a plan has no field "Extra"`},
		{"a field no tool has", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Read","Nmae":"x"}}}`, `at /Tools/Read/Nmae: a tool has no field "Nmae"`},
		{"a name that is a number", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":1}}}`, "at /Tools/Read/Name: a number where a string belongs"},
		{"a surface that is a list", `{"Format":5,"Surfaces":{"agent":[]}}`, "an array where an object belongs"},
		{"a count beyond an int", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Parallel":{"MaxConcurrency":1e99}}`, "1e99 is not an integer"},
		{"a flag that is a string", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent","Declared":"yes"}}}`, "a string where a boolean belongs"},
		{"a member named twice", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Dir":"a","Dir":"b"}`, "duplicate"},
		{"a test's field of another type", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Tests":[{"Name":"t","Surface":"agent"}]}`, "a string where an array belongs"},
		{"a principal's field no principal has", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent"}},"Principals":[{"Name":"p","Sub":"x"}]}`, `at /Principals/0/Sub: a principal has no field "Sub"`},
		{"positions that do not match the entries", `{"Format":5,"Surfaces":{"agent":{"Ref":"agent","Declared":true,"Entries":["Read"]}}}`, "0 positions for the 1 entries"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			// Of this format, whichever it is, so that only what is named is wrong.
			data := strings.ReplaceAll(tc.data, `"Format":5`, fmt.Sprintf(`"Format":%d`, planFormat))
			if g, err := Restore([]byte(data)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, %v; want an error saying %q", g, err, tc.want)
			}
		})
	}
}

// TestR3PlanRoundTrips: a plan decodes to what was encoded, exactly: the
// restored generation saves to the same bytes, gates and lists as written
// included, for the shipped examples and a policy with every kind of list
// (deny, ask, relative patterns); FuzzR3PlanRoundTrips generates more.
func TestR3PlanRoundTrips(t *testing.T) {
	dirs := map[string]string{
		"team": "../../../examples/policies/team",
		"yaml": "../../../examples/policies/yaml",
		"lists": writePolicy(t, map[string]string{"policy.cue": header + `tools: Read: schema.#Read
tools: Bash: schema.#Bash & {input: timeout?: int & >=1 & <=600}
agent: {"allowed-tools": ["Read(./src/**)", "Bash(git:*)"], "denied-tools": ["Bash(git push:*)"], "ask-tools": ["Read(/etc/**)"]}
subagents: r: "allowed-tools": ["Read"]
`}),
		"alike": writePolicy(t, map[string]string{"policy.cue": alikePolicy(8)}),
		// What the plan's reader reads as tokens and what it leaves to json
		// v2 (planReader), each with values: principals, limits, approvers,
		// labels and flows, provenance, sandboxes, tests with a principal
		// and a session.
		"approvers":  writePolicy(t, map[string]string{"policy.cue": approversPolicy}),
		"content":    writePolicy(t, map[string]string{"policy.cue": contentPolicy}),
		"labels":     writePolicy(t, map[string]string{"policy.cue": labelsPolicy}),
		"principals": writePolicy(t, map[string]string{"policy.cue": principalsPolicy}),
		"rich": writePolicy(t, map[string]string{"policy.cue": header + limitsTools + `
tools: {
	Echo: schema.#Echo
	Off: schema.#Bash & {sandbox: {mode: "off", network: true}}
	Hosts: schema.#Bash & {sandbox: network: allow: ["api.github.com"]}
	Small: schema.#Write & {maxFileBytes: 10}
}
limits: push: {who: principal: "contractors", entry: "Bash(git push:*)", rate: "5/10s"}
tests: {
	plain: {tool: "Read", input: file_path: "/a", allowed: true}
	as: {tool: "Read", input: file_path: "/a", allowed: true, principal: {subject: "c", groups: ["contractors"]}}
	seen: {tool: "Echo", input: message: "x", allowed: false, session: [{user: "hi"}, {tool: "Echo", input: message: "x", result: "x"}]}
}
`}),
	}
	for note, dir := range dirs {
		t.Run(note, func(t *testing.T) { planRoundTrip(t, dir) })
	}
}

// FuzzR3PlanRoundTrips: a generated policy (built-ins, some narrowed, and
// random allow, deny and ask lists on the agent and two subagents, bad
// and relative entries among them) round-trips as TestR3PlanRoundTrips
// says.
func FuzzR3PlanRoundTrips(f *testing.F) {
	for i := range uint64(3) {
		f.Add(i, i+7)
	}
	entries := []string{"Read", "Read(./src/**)", "Read(/etc/**)", "Read(/w/**)", "Bash", "Bash(git:*)",
		"Bash(git push:*)", "Bash(ls)", "Grep", "Grep(/srv/**)", "Echo", "Raed", "Read(rel)"}
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		r := rand.New(rand.NewPCG(s1, s2))
		list := func() string {
			var picked []string
			for range r.IntN(4) {
				picked = append(picked, strconv.Quote(entries[r.IntN(len(entries))]))
			}
			return "[" + strings.Join(picked, ", ") + "]"
		}
		surface := func() string {
			var keys []string
			for _, k := range []string{"allowed-tools", "denied-tools", "ask-tools"} {
				if r.IntN(2) == 0 {
					keys = append(keys, strconv.Quote(k)+": "+list())
				}
			}
			return "{" + strings.Join(keys, ", ") + "}"
		}
		src := header + "tools: Read: schema.#Read\ntools: Bash: schema.#Bash\ntools: Echo: schema.#Echo\n"
		if r.IntN(2) == 0 {
			src += "tools: Grep: schema.#Grep & {input: path?: =~\"^/srv/\"}\n"
		}
		src += "agent: " + surface() + "\nsubagents: a: " + surface() + "\nsubagents: b: " + surface() + "\n"
		planRoundTrip(t, writePolicy(t, map[string]string{"policy.cue": src}))
	})
}

// planRoundTrip loads the policy in dir, saves, restores and saves it
// again: the bytes must be the same, and every chain must decide some
// calls as the loaded one does.
func planRoundTrip(t *testing.T, dir string) {
	t.Helper()
	g, err := Load(dir, WithWorkdir("/w"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(data, WithWorkdir("/w"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Save()
	if err != nil || string(again) != string(data) {
		t.Fatalf("the restored plan saves differently (%v):\n%s\n%s", err, data, again)
	}
	for name, tool := range g.Tools {
		want, _ := tool.JSONSchema()
		if got, err := r.Tools[name].JSONSchema(); err != nil || string(got) != string(want) {
			t.Errorf("%s: the restored JSON Schema is %s (%v), the loaded one %s", name, got, err, want)
		}
	}
	calls := []struct {
		tool string
		in   map[string]any
	}{{"Read", map[string]any{"file_path": "/w/src/a"}}, {"Read", map[string]any{"file_path": "/etc/x"}},
		{"Bash", map[string]any{"command": "git push"}}, {"Bash", map[string]any{"command": "git status"}},
		{"Grep", map[string]any{"pattern": "x", "path": "/srv/a"}}, {"Echo", map[string]any{"message": "hi"}}}
	for _, ref := range g.SurfaceRefs() {
		for _, chain := range [][]string{{ref}, {ref, "subagent:b"}} {
			e, err := g.Effective(chain)
			re, rerr := r.Effective(chain)
			if (err == nil) != (rerr == nil) || err != nil && err.Error() != rerr.Error() {
				t.Fatalf("%v: loaded %v, restored %v", chain, err, rerr)
			}
			for _, c := range calls {
				if err == nil && !reflect.DeepEqual(e.Decide(c.tool, c.in, "/w"), re.Decide(c.tool, c.in, "/w")) {
					t.Errorf("%v: %s %v is decided otherwise once restored", chain, c.tool, c.in)
				}
			}
		}
	}
}

// TestR3RestoreSharesGates: tools that a load compiled once (memo.go)
// share one gate once restored, as loaded, and tools with gates of their
// own keep them: the plan writes a shared gate for each of its tools.
func TestR3RestoreSharesGates(t *testing.T) {
	for _, tc := range []struct{ note, src string }{
		{"tools declared alike", alikePolicy(8)},
		{"each tool its own gate", bigPolicy(4)},
	} {
		t.Run(tc.note, func(t *testing.T) {
			g, r := loadRestored(t, tc.src)
			names := g.Names()
			for _, a := range names {
				for _, b := range names {
					loaded, restored := g.Tools[a].Gate == g.Tools[b].Gate, r.Tools[a].Gate == r.Tools[b].Gate
					if loaded != restored {
						t.Errorf("%s and %s: the loaded tools share a gate: %v, the restored: %v", a, b, loaded, restored)
					}
				}
			}
		})
	}
}

// loadRestored loads the policy src, and restores what it saves.
func loadRestored(t *testing.T, src string) (loaded, restored *Generation) {
	t.Helper()
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": src}))
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(data)
	if err != nil {
		t.Fatal(err)
	}
	return g, r
}

// TestR3RestoreRefusesACutPlan: a plan cut short anywhere is refused
// with an error (a cache then loads afresh), never restored in part.
func TestR3RestoreRefusesACutPlan(t *testing.T) {
	data := teamPlan(t)
	for n := 0; n < len(data); n++ {
		if n%61 != 0 && n < len(data)-200 {
			continue // every byte of the end, where a cut leaves the most
		}
		if g, err := Restore(data[:n]); err == nil || !strings.Contains(err.Error(), "cannot be read") {
			t.Fatalf("Restore of the first %d of %d bytes = %v, %v; want an error saying it cannot be read", n, len(data), g, err)
		}
	}
}

// teamPlan is the team example's saved plan.
func teamPlan(t testing.TB) []byte {
	g, err := Load("../../../examples/policies/team")
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzR3Restore: no byte string makes Restore, or a restored generation's
// decision or Save, panic; a plan cut short or spoiled is refused or
// restores to a generation whose plan restores again.
func FuzzR3Restore(f *testing.F) {
	data := teamPlan(f)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(data[:len(data)-1])
	for _, spoil := range [][2]string{{`"Gate":{`, `"Gate":[`}, {`"Root":{`, `"Root":null,"x":{`}, {`"Re":"`, `"Re":"(`}, {`"Format":`, `"format":`}} {
		f.Add([]byte(strings.Replace(string(data), spoil[0], spoil[1], 1)))
	}
	f.Add(fmt.Appendf(nil, `{"Format":%d,"Surfaces":{"agent":{"Ref":"agent"}}}`, planFormat))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Restore(data, WithWorkdir("/w"))
		if err != nil {
			return
		}
		if again, err := g.Save(); err == nil {
			if _, err := Restore(again, WithWorkdir("/w")); err != nil {
				t.Fatalf("a restored plan saves to a plan that does not restore: %v", err)
			}
		}
		for _, ref := range g.SurfaceRefs() {
			if e, err := g.Effective([]string{"agent", ref}); err == nil {
				e.Decide("Read", map[string]any{"file_path": "/srv/repo/x"}, "/w")
			}
		}
		for _, t := range g.Tools {
			t.Gate.Check(map[string]any{"file_path": "x"})
		}
	})
}

// TestS8ExpandBadInput: a server that exposes "*" and lists a tool whose
// gateway name no model accepts has that tool left out with a warning;
// expanding a server that does not expose "*" is an error; and the
// server settings that cannot hold do not load (issue 17).
func TestS8ExpandBadInput(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": "package policy\n\nservers: fs: {command: [\"x\"], expose: \"*\"}\nservers: named: {command: [\"y\"], expose: [\"a\"]}\n"})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := g.Expand(map[string][]string{"fs": {"ok", strings.Repeat("x", 70), "bad name"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Tools["fs__ok"] == nil || len(out.Tools) != len(g.Tools)+1 {
		t.Errorf("tools after Expand: %v", out.Names())
	}
	warned := 0
	for _, w := range out.Warnings {
		if strings.Contains(w.Message, "no model accepts") {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d warnings of bad names, want 2: %v", warned, out.Warnings)
	}
	if _, err := g.Expand(map[string][]string{"named": {"b"}}); err == nil {
		t.Error("Expand of a server that does not expose \"*\" succeeded")
	}
	for _, bad := range []string{
		`servers: s: {command: ["x"], expose: ["a"], start: "sometimes"}`,
		`servers: s: {expose: ["a"]}`,
		`servers: s: {url: "ftp://x", expose: ["a"]}`,
		`servers: s: {command: ["x"], expose: "all"}`,
	} {
		if _, err := Load(writePolicy(t, map[string]string{"policy.cue": "package policy\n\n" + bad + "\n"})); err == nil {
			t.Errorf("%s loads", bad)
		}
	}
}

// bigPolicy is a generated policy of n tools, each narrowed to a
// directory of its own (so each has its own gate), all allowed.
func bigPolicy(n int) string {
	var s, list strings.Builder
	s.WriteString(header + "tools: {\n")
	for i := range n {
		fmt.Fprintf(&s, "\tRead%d: schema.#Read & {input: file_path: =~\"^/srv/%d/\"}\n", i, i)
		fmt.Fprintf(&list, "%q, ", fmt.Sprintf("Read%d", i))
	}
	fmt.Fprintf(&s, "}\n\nagent: \"allowed-tools\": [%s]\n", strings.TrimSuffix(list.String(), ", "))
	return s.String()
}

// alikePolicy is a generated policy of n tools declared in a few ways,
// as bench/scale.sh's: the tools declared alike share one compiled form.
func alikePolicy(n int) string {
	var s, list strings.Builder
	s.WriteString(header + "tools: {\n")
	for i := range n {
		switch i % 4 {
		case 0, 1:
			fmt.Fprintf(&s, "\tTool%d: schema.#Echo\n", i)
		case 2:
			fmt.Fprintf(&s, "\tTool%d: schema.#Read & {input: file_path: =~\"^/srv/\"}\n", i)
		default:
			fmt.Fprintf(&s, "\tTool%d: schema.#Grep & {timeout: \"20s\"}\n", i)
		}
		fmt.Fprintf(&list, "%q, ", fmt.Sprintf("Tool%d", i))
	}
	fmt.Fprintf(&s, "}\n\nagent: \"allowed-tools\": [%s]\n", strings.TrimSuffix(list.String(), ", "))
	return s.String()
}

// BenchmarkR3PlanCodec measures the plan's codec, the JSON of a restore,
// beside the load it stands for: the team example (what a hook call
// restores), generated policies of 100 and 1,000 tools, each with a gate
// of its own (issue 32: a restore's cost grows with the tools), and one of
// 1,000 tools declared in a few ways (alikePolicy). The 1,000-tool
// policies are only decoded and restored: their loads take seconds.
func BenchmarkR3PlanCodec(b *testing.B) {
	for _, c := range []struct {
		name, src string
		loads     bool
	}{
		{"team", "", true},
		{"100tools", bigPolicy(100), true},
		{"1000tools", bigPolicy(1000), false},
		{"1000alike", alikePolicy(1000), false},
	} {
		dir := "../../../examples/policies/team"
		if c.src != "" {
			dir = writePolicy(b, map[string]string{"policy.cue": c.src})
		}
		g, err := Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		js, err := g.Save()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("decode-%s-%dB", c.name, len(js)), func(b *testing.B) {
			defer reportCPU(b, cputime.Process())
			for b.Loop() {
				if _, err := decodePlan(js); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("restore-"+c.name, func(b *testing.B) {
			defer reportCPU(b, cputime.Process())
			for b.Loop() {
				r, err := Restore(js)
				if err != nil {
					b.Fatal(err)
				}
				r.Effective([]string{"agent"})
			}
		})
		if !c.loads {
			continue
		}
		b.Run("load-"+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Load(dir); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("save-"+c.name, func(b *testing.B) {
			for b.Loop() {
				g.Save()
			}
		})
	}
}

// reportCPU reports the processor time per op since start, the collector's
// included, which other processes on a shared machine do not inflate as
// they do ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cputime.Process()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkR3PlanFirstDecode measures what a hook process pays to decode
// its plan (issues 42, 43): the first decode in a fresh process, in which
// no decoder of json v2's was built yet (BenchmarkR3PlanCodec decodes in a
// warm one). Each op runs this test binary afresh, which decodes the team
// example's plan once (TestR3PlanFirstDecodeChild); first-ns/op is that
// decode's median time alone, without the process's start (a shared
// machine's load moves the mean).
func BenchmarkR3PlanFirstDecode(b *testing.B) {
	g, err := Load("../../../examples/policies/team")
	if err != nil {
		b.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		b.Fatal(err)
	}
	plan := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(plan, data, 0o600); err != nil {
		b.Fatal(err)
	}
	var first []time.Duration
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestR3PlanFirstDecodeChild$")
		cmd.Env = append(os.Environ(), firstDecodeEnv+"="+plan)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		_, ns, ok := strings.Cut(string(out), "first decode ")
		n, err := strconv.ParseInt(strings.Fields(ns + " x")[0], 10, 64)
		if !ok || err != nil {
			b.Fatalf("the child said %q", out)
		}
		first = append(first, time.Duration(n))
	}
	slices.Sort(first)
	b.ReportMetric(float64(first[len(first)/2]), "first-p50-ns")
}

const firstDecodeEnv = "AIMON_GW_FIRST_DECODE"

// TestR3PlanFirstDecodeChild is BenchmarkR3PlanFirstDecode's process: it
// decodes the plan in $AIMON_GW_FIRST_DECODE once and prints the time.
func TestR3PlanFirstDecodeChild(t *testing.T) {
	p := os.Getenv(firstDecodeEnv)
	if p == "" {
		t.Skip("the process of BenchmarkR3PlanFirstDecode")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Restore(data); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("first decode %d\n", time.Since(start).Nanoseconds())
}

// TestR3DecodedRestoresOnce: a decoded plan makes one generation, as
// Restore of the bytes does; a second is refused, not one sharing the
// first one's maps.
func TestR3DecodedRestoresOnce(t *testing.T) {
	data := teamPlan(t)
	d, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Restore(WithWorkdir("/w"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r.Save(); err != nil || string(again) != string(data) {
		t.Fatalf("the first restore saves again as %v; want the bytes it was decoded from", err)
	}
	if again, err := d.Restore(WithWorkdir("/w")); err == nil || again != nil {
		t.Fatalf("a second restore of one decoded plan gave %v, %v; want an error", again, err)
	}
	if _, err := Decode(data[:len(data)/2]); err == nil {
		t.Fatal("a plan cut short decoded")
	}
}
