package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/loadcache"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/tools"
)

// r8Project is a policy that allows writing anywhere, with what the
// gateway reads or runs laid out around its working directory.
type r8Project struct {
	root, work, module, policy, surfaces, plugin, log string
	g                                                 *Gateway
}

func newR8Project(t testing.TB) *r8Project {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &r8Project{root: root, work: root + "/work", module: root + "/gw", policy: root + "/gw/policy",
		surfaces: root + "/.claude", plugin: root + "/bin/fmt", log: root + "/log/decisions.jsonl"}
	for _, d := range []string{p.work, p.module + "/cue.mod", p.policy, p.surfaces + "/agents", root + "/bin", root + "/log"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plugin := []byte("#!/bin/sh\n")
	sum := sha256.Sum256(plugin)
	files := map[string]string{
		p.plugin:                         string(plugin),
		p.module + "/cue.mod/module.cue": "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n",
		p.surfaces + "/agents/docs.md":   "---\nname: docs\ndescription: Writes the docs.\ntools: Read, Write\n---\nWrite the docs.\n",
		p.policy + "/policy.cue": fmt.Sprintf(`package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/claudecode"
)

tools: {Read: schema.#Read, Write: schema.#Write, Edit: schema.#Edit, MultiEdit: claudecode.#MultiEdit, NotebookEdit: claudecode.#NotebookEdit}
tools: Fmt: {plugin: {command: [%[1]q], tool: "Fmt", sha256: %[2]q}, effect: "write", input: {file_path!: string}, subject: {field: "file_path", kind: "path"}}
agent: "allowed-tools": ["Read", "Write(/**)", "Edit(/**)", "MultiEdit(/**)", "NotebookEdit(/**)", "Fmt(/**)"]
agent: "ask-tools": ["Write(%[3]s/asked/**)", "Write(%[4]s/pins.cue)"]
surfaces: from: ["../../.claude"]
`, p.plugin, hex.EncodeToString(sum[:]), p.work, p.policy),
	}
	for f, body := range files {
		if err := os.WriteFile(f, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gen, err := policy.Load(p.policy)
	if err != nil {
		t.Fatal(err)
	}
	dlog, err := decisionlog.Open(p.log, decisionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dlog.Close() })
	fmtTool := tools.Func(func(_ context.Context, _ *tools.Env, _ tools.Input) tools.Result { return tools.OK("formatted") })
	reg := registry(fakePlugins{"Fmt": fmtTool})
	reg["external"] = provision.External{}
	pg, err := reg.Provision(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	p.g = New(pg,
		Options{Workdir: p.work, Logger: slog.New(slog.DiscardHandler), Decisions: dlog, ClientAsks: true})
	return p
}

// TestR8WritesWhereTheGatewayReadsAreRefused: under a policy that allows
// writing anywhere, the one decision refuses a write that lands in what
// the gateway reads or runs, by its name, through a link or "..", with a
// sentence naming the rule, the path and what it is; writes elsewhere
// are decided as before, and the decision log records the refusal.
func TestR8WritesWhereTheGatewayReadsAreRefused(t *testing.T) {
	p := newR8Project(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cache, err := loadcache.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{
		{p.policy, p.work + "/intopolicy"},
		{p.policy + "/planted.cue", p.work + "/dangling"},
		{"dangling2", p.work + "/dangling1"},
		{p.module + "/new", p.work + "/dangling2"},
		{p.work + "/loop", p.work + "/loop"},
	} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) string {
		b, _ := json.Marshal(map[string]any{"file_path": path, "content": "x"})
		return string(b)
	}
	edit := func(path string) string {
		b, _ := json.Marshal(map[string]any{"file_path": path, "old_string": "a", "new_string": "b"})
		return string(b)
	}
	tests := []struct {
		note, tool, input string
		rule              string // "" allowed, "ask" asked
		why               string // in the refusal
	}{
		{note: "a file elsewhere", tool: "Write", input: write(p.work + "/notes.txt")},
		{note: "a relative file in the working directory", tool: "Write", input: write("sub/notes.txt")},
		{note: "an edit elsewhere", tool: "Edit", input: edit(p.work + "/notes.txt")},
		{note: "a directory above the policy is not in it", tool: "Write", input: write(p.root)},
		{note: "a neighbour whose name starts like the policy's", tool: "Write", input: write(p.module + "-old/x.cue")},
		{note: "an ask elsewhere stays an ask", tool: "Write", input: write(p.work + "/asked/x"), rule: "ask"},
		{note: "reading the policy", tool: "Read", input: `{"file_path":"` + p.policy + `/policy.cue"}`},

		{note: "the policy file", tool: "Edit", input: edit(p.policy + "/policy.cue"), rule: "R8", why: p.policy + "/policy.cue is a file the policy is loaded from"},
		{note: "a new .cue file in the policy directory", tool: "Write", input: write(p.policy + "/open.cue"), rule: "R8", why: "the policy's directory"},
		{note: "the pins, though an ask entry names them", tool: "Write", input: write(p.policy + "/pins.cue"), rule: "R8", why: "the policy's directory"},
		{note: "the policy directory itself", tool: "Write", input: write(p.policy), rule: "R8", why: "is the policy's directory"},
		{note: "a file in the CUE module above the policy", tool: "Write", input: write(p.module + "/open.cue"), rule: "R8", why: "the policy's CUE module"},
		{note: "cue.mod", tool: "MultiEdit", input: `{"file_path":"` + p.module + `/cue.mod/module.cue","edits":[]}`, rule: "R8", why: "is a file the policy is loaded from"},
		{note: "a new file in cue.mod", tool: "Write", input: write(p.module + "/cue.mod/pkg/x.cue"), rule: "R8", why: "lies in " + p.module + ", the policy's CUE module"},
		{note: "a surfaces source", tool: "Write", input: write(p.surfaces + "/agents/new.md"), rule: "R8", why: "a surfaces source"},
		{note: "a plugin's program", tool: "Write", input: write(p.plugin), rule: "R8", why: "a program the gateway starts"},
		{note: "the gateway's own program", tool: "Write", input: write(exe), rule: "R8", why: "the gateway's own program"},
		{note: "the decision log", tool: "Edit", input: edit(p.log), rule: "R8", why: "is the gateway's decision log"},
		{note: "the load cache", tool: "Write", input: write(cache + "/forged.json"), rule: "R8", why: "cache of compiled policies"},
		{note: "a notebook in the policy directory", tool: "NotebookEdit", input: `{"notebook_path":"` + p.policy + `/n.ipynb","new_source":"x"}`, rule: "R8", why: "the policy's directory"},
		{note: "a plugin declared to write", tool: "Fmt", input: `{"file_path":"` + p.policy + `/policy.cue"}`, rule: "R8", why: "Fmt was not run"},
		{note: "through a link to the policy directory", tool: "Write", input: write(p.work + "/intopolicy/open.cue"), rule: "R8", why: "leads through a symbolic link to " + p.policy + "/open.cue"},
		{note: "through a dangling link", tool: "Write", input: write(p.work + "/dangling"), rule: "R8", why: p.policy + "/planted.cue"},
		{note: "through a chain of links, the last dangling", tool: "Write", input: write(p.work + "/dangling1"), rule: "R8", why: p.module + "/new"},
		{note: "through ..", tool: "Write", input: write(p.work + "/../gw/policy/open.cue"), rule: "R8", why: p.policy + "/open.cue lies in"},
		{note: "relative to the working directory", tool: "Write", input: write("../gw/policy/open.cue"), rule: "R8", why: p.policy + "/open.cue lies in"},

		{note: "bad input: an empty path", tool: "Write", input: write(""), rule: "R7", why: "is blank"},
		{note: "bad input: a loop of links", tool: "Write", input: write(p.work + "/loop"), rule: "R8", why: "cannot be told"},
		{note: "bad input: a path through a loop", tool: "Write", input: write(p.work + "/loop/x"), rule: "R8", why: "cannot be told"},
		{note: "bad input: a link of /proc, which differs by process", tool: "Write", input: write("/proc/self/cwd/x"), rule: "R8", why: "a link of /proc"},
		{note: "bad input: /proc/self/root to the policy", tool: "Write", input: write("/proc/self/root" + p.policy + "/open.cue"), rule: "R8", why: "cannot be told"},
	}
	for i, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			d := p.g.Check(nil, fmt.Sprint("r8-", i), tc.tool, []byte(tc.input))
			got := string(d.Rule)
			switch {
			case d.Allowed:
				got = ""
			case d.Ask:
				got = "ask"
			}
			if got != tc.rule || !strings.Contains(d.Reason, tc.why) {
				t.Fatalf("%s %s: rule %q, reason %q; want %q with %q", tc.tool, tc.input, got, d.Reason, tc.rule, tc.why)
			}
			if tc.rule == "R8" && !strings.Contains(d.Reason, "(rule R8)") {
				t.Errorf("the refusal does not name the rule: %q", d.Reason)
			}
		})
	}
	if _, err := os.Lstat(p.policy + "/planted.cue"); err == nil {
		t.Error("a decision wrote into the policy directory")
	}
	// The decision log says which rule refused, and why.
	data, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r decisionlog.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if r.Tool == "Write" && r.Subject == p.policy+"/open.cue" {
			found = r.Rule == "R8" && !r.Allowed && strings.Contains(r.Reason, "the policy's directory")
		}
	}
	if !found {
		t.Errorf("no decision-log record refuses the new .cue file by rule R8:\n%s", data)
	}
}

// BenchmarkR8DecideWrite: the decision of an allowed Write, which resolves
// its path (not yet made, four directories deep) against what the
// gateway protects, beside a Read of the same path, which does not.
func BenchmarkR8DecideWrite(b *testing.B) {
	g, _ := newGateway(b, `tools: {Read: schema.#Read, Write: schema.#Write}
agent: "allowed-tools": ["Read", "Write(/**)"]
`, nil)
	path := g.opts.Workdir + "/src/pkg/notes.txt"
	for _, tc := range []struct{ tool, in string }{
		{"Write", `{"file_path":"` + path + `","content":"x"}`},
		{"Read", `{"file_path":"` + path + `"}`},
	} {
		b.Run(tc.tool, func(b *testing.B) {
			for b.Loop() {
				if d := g.Check(nil, "b", tc.tool, []byte(tc.in)); !d.Allowed {
					b.Fatal(d.Reason)
				}
			}
		})
	}
}

// TestP14DanglingLinksAreJudgedWhereTheyLand: a link whose target does not
// exist yet is where a write through it creates the file (Claude Code
// under the hook writes it so), so the deny and ask entries judge it
// there; it was judged by its own name, and allowed.
func TestP14DanglingLinksAreJudgedWhereTheyLand(t *testing.T) {
	g, _ := newGateway(t, `tools: {Write: schema.#Write}
agent: "allowed-tools": ["Write(/**)"]
agent: "denied-tools": ["Write(/srv/denied/**)"]
`, nil)
	wd := g.opts.Workdir
	for link, to := range map[string]string{"l-denied": "/srv/denied/new.txt", "l-chain": "l-denied", "l-open": wd + "/new.txt", "l-dir": "/srv/denied"} {
		if err := os.Symlink(to, filepath.Join(wd, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		note, path string
		allowed    bool
		why        string
	}{
		{note: "a dangling link into a denied directory", path: "l-denied", why: `leads through a symbolic link to "/srv/denied/new.txt"`},
		{note: "a chain ending in one", path: "l-chain", why: `to "/srv/denied/new.txt"`},
		{note: "a link to a directory still to make", path: "l-dir/x", why: `to "/srv/denied/x"`},
		{note: "a dangling link that stays where the lists allow", path: "l-open", allowed: true},
	} {
		t.Run(tc.note, func(t *testing.T) {
			d := g.Check(nil, "1", "Write", []byte(`{"file_path":"`+tc.path+`","content":"x"}`))
			if d.Allowed != tc.allowed || !tc.allowed && (d.Rule != "P14" || !strings.Contains(d.Reason, tc.why)) {
				t.Errorf("%s: %+v; want allowed %v, P14 saying %q", tc.path, d, tc.allowed, tc.why)
			}
		})
	}
}
