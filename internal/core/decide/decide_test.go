package decide

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
)

// fakeFS is a file system the test writes: links (a path and where it
// lands), the paths a write may not touch, the gateway's secrets, and a
// tree for the P17 walk. Nothing of the host is asked.
type fakeFS struct {
	links   map[string]string
	guarded map[string]bool // true: a gate file (R9)
	secrets map[string]bool
	dirs    map[string]bool
	tree    fstest.MapFS // below "/work", for WalkDir
}

func (f *fakeFS) LandsAt(p string) string {
	if to, ok := f.links[p]; ok {
		return to
	}
	return p
}
func (f *fakeFS) RealPath(p string) string { return f.LandsAt(p) }
func (f *fakeFS) IsDir(p string) bool      { return f.dirs[p] }
func (f *fakeFS) Concealing(paths ...string) string {
	for _, p := range paths {
		if f.secrets[p] {
			return p
		}
	}
	return ""
}
func (f *fakeFS) ConcealedBelow(string) string { return "" }
func (f *fakeFS) WriteRefusal(p string) (string, bool) {
	gate, ok := f.guarded[p]
	if !ok {
		return "", false
	}
	return p + " is the gateway's", gate
}
func (f *fakeFS) Existing(p string) string { return p }
func (f *fakeFS) Home() string             { return "/home/u" }
func (f *fakeFS) WalkDir(root string, fn fs.WalkDirFunc) error {
	return fs.WalkDir(f.tree, ".", func(p string, d fs.DirEntry, err error) error {
		if p == "." {
			p = root
		} else {
			p = root + "/" + p
		}
		return fn(p, d, err)
	})
}

func load(t *testing.T, body string) *policy.Generation {
	t.Helper()
	gen, err := policy.LoadFS(fstest.MapFS{
		"cue.mod/module.cue": {Data: []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")},
		"policy.cue":         {Data: []byte("package policy\n\nimport \"aimon.dev/gw/schema\"\n\n" + body)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gen
}

// decideOne prepares and decides one call on the agent.
func decideOne(t *testing.T, dc *Decider, gen *policy.Generation, c Call) rule.Decision {
	t.Helper()
	chain := []string{"agent"}
	eff, err := gen.Effective(chain)
	p := dc.Prepare(gen, chain, eff, CeilingOf(gen, chain), err, c)
	return dc.Decide(&p)
}

// TestR7DecisionAsksItsFSOnly: the decision of a client's own tools
// (the hook's Read and Write) is made on what the FS it is given says of
// the paths, not on the host's: a link the FS knows takes a Read into a
// denied directory (P14), a write the FS guards is refused by R8 or R9, a
// secret the FS conceals is refused by R8, and a Read the FS leaves alone
// is allowed. A built-in's call is judged where it leads by the deny
// entries only: its anchor holds it to the allow list when it runs.
func TestR7DecisionAsksItsFSOnly(t *testing.T) {
	gen := load(t, `tools: {Read: schema.#Read, Write: schema.#Write}
agent: {
	"allowed-tools": ["Read(/work/**)", "Write(/work/**)"]
	"denied-tools": ["Read(/secret/**)"]
}
`)
	f := &fakeFS{
		links:   map[string]string{"/work/link": "/secret/key", "/work/out": "/elsewhere/x"},
		guarded: map[string]bool{"/work/.claude/settings.json": true, "/work/gw.log": false},
		secrets: map[string]bool{"/work/approvals.key": true},
	}
	dc := &Decider{Workdir: "/work", ClientTools: "deny", ClientAsks: true, FS: f}
	for _, tc := range []struct {
		note, name, input string
		allowed           bool
		rule              rule.ID
		says              string
	}{
		{"a Read through a link into what is denied", "Read", `{"file_path":"/work/link"}`, false, rule.P14, `leads through a symbolic link to "/secret/key"`},
		{"a Write of a gate file", "Write", `{"file_path":"/work/.claude/settings.json","content":"x"}`, false, rule.R9, "is the gateway's"},
		{"a Write of the decision log", "Write", `{"file_path":"/work/gw.log","content":"x"}`, false, rule.R8, "is the gateway's"},
		{"a Read of a secret", "Read", `{"file_path":"/work/approvals.key"}`, false, rule.R8, "secret of the gateway's"},
		{"a plain Read", "Read", `{"file_path":"/work/a.go"}`, true, rule.P4, "allowed by Read(/work/**)"},
		{"a relative Read, made canonical", "Read", `{"file_path":"b/../a.go"}`, true, rule.P4, "allowed by Read(/work/**)"},
		{"a Read through a link out of what is allowed", "Read", `{"file_path":"/work/out"}`, false, rule.R6, "Claude Code would open it there"},
	} {
		d := decideOne(t, dc, gen, Call{ID: "1", Name: tc.name, Input: []byte(tc.input)})
		if d.Allowed != tc.allowed || d.Rule != tc.rule || !strings.Contains(d.Reason, tc.says) {
			t.Errorf("%s: %v by %s: %s", tc.note, d.Allowed, d.Rule, d.Reason)
		}
	}
	if d := decideOne(t, dc, gen, Call{ID: "1", Name: "Read", Input: []byte(`{"file_path":"b/../a.go"}`)}); d.Input["file_path"] != "/work/a.go" {
		t.Errorf("the canonical input: %v", d.Input)
	}
	// A file the client writes besides the subject (Codex's patch) is
	// guarded as a write of the subject is.
	if d := decideOne(t, dc, gen, Call{ID: "1", Name: "Read", Input: []byte(`{"file_path":"/work/a.go"}`), Writes: []string{"/work/a.txt", "/work/.claude/settings.json"}}); d.Allowed || d.Rule != rule.R9 || d.Reason != "Read is refused: /work/.claude/settings.json is the gateway's." {
		t.Errorf("a write besides the subject of a gate file: %v by %s: %s", d.Allowed, d.Rule, d.Reason)
	}
	builtins := &Decider{Workdir: "/work", FS: f}
	if d := decideOne(t, builtins, gen, Call{ID: "1", Name: "Read", Input: []byte(`{"file_path":"/work/out"}`)}); !d.Allowed {
		t.Errorf("a built-in Read of a link out of the list is decided as written (its anchor holds it when it runs): %v %s", d.Allowed, d.Reason)
	}
	if d := decideOne(t, builtins, gen, Call{ID: "1", Name: "Read", Input: []byte(`{"file_path":"/work/link"}`)}); d.Allowed || d.Rule != rule.P14 {
		t.Errorf("a built-in Read of a link into what is denied is refused there too: %v %s", d.Allowed, d.Reason)
	}
}

// TestR7DecisionOfACallItCannotRead: the refusals made before the input is
// gated, each with its rule and one sentence: a call the front end could
// not read (R7, its own sentence), a call without input (R2), an input
// that is not an object (S4), an unknown tool (P9, naming the listed
// ones), and an input the schema refuses (S9).
func TestR7DecisionOfACallItCannotRead(t *testing.T) {
	gen := load(t, `tools: {Echo: schema.#Echo}
validation: "enforce"
agent: "allowed-tools": ["Echo"]
`)
	dc := &Decider{FS: &fakeFS{}}
	for _, tc := range []struct {
		note string
		c    Call
		rule rule.ID
		says string
	}{
		{"unread", Call{ID: "1", Name: "Echo", Input: []byte(`{"message":"x"}`), Unread: "The hook input has no cwd."}, rule.R7, "The hook input has no cwd."},
		{"no input", Call{ID: "1", Name: "Echo"}, rule.R2, "has no input"},
		{"not an object", Call{ID: "1", Name: "Echo", Input: []byte(`[1]`)}, rule.S4, "cannot be used"},
		{"unknown", Call{ID: "1", Name: "Ech", Input: []byte(`{}`)}, rule.P9, "Did you mean 'Echo'?"},
		{"the schema's", Call{ID: "1", Name: "Echo", Input: []byte(`{"message":1}`)}, rule.S9, "message"},
	} {
		d := decideOne(t, dc, gen, tc.c)
		if d.Allowed || d.Rule != tc.rule || !strings.Contains(d.Reason, tc.says) {
			t.Errorf("%s: %v by %s: %s", tc.note, d.Allowed, d.Rule, d.Reason)
		}
	}
}

// TestP17HiddenFilesAreTheFSs: the files a reader's deny entry names by a
// pattern without a directory are found by walking the FS given, and
// past the bound the command is refused saying what to do.
func TestP17HiddenFilesAreTheFSs(t *testing.T) {
	gen := load(t, `tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read", "Bash"]
	"denied-tools": ["Read(**/.env)"]
}
`)
	f := &fakeFS{tree: fstest.MapFS{".env": {}, "a/.env": {}, "a/b.txt": {}}}
	dc := &Decider{Workdir: "/work", FS: f}
	d := decideOne(t, dc, gen, Call{ID: "1", Name: "Bash", Input: []byte(`{"command":"cat .env"}`)})
	if !d.Allowed || d.Sandbox == nil {
		t.Fatalf("the command: %v by %s: %s", d.Allowed, d.Rule, d.Reason)
	}
	if got := slices.Sorted(slices.Values(d.Sandbox.Hidden)); !slices.Equal(got, []string{"/work/.env", "/work/a/.env"}) {
		t.Errorf("hidden %q", got)
	}
	dc.MaxHideWalk = 2
	d = decideOne(t, dc, gen, Call{ID: "2", Name: "Bash", Input: []byte(`{"command":"cat .env"}`)})
	if d.Allowed || d.Rule != rule.P17 || !strings.Contains(d.Reason, "give the entry a literal directory") {
		t.Errorf("past the bound: %v by %s: %s", d.Allowed, d.Rule, d.Reason)
	}
}

// TestR5ChainOnlyExtends: a call's chain must begin with the gateway's,
// and is bounded; the sentence names both chains.
func TestR5ChainOnlyExtends(t *testing.T) {
	ceiling := []string{"agent", "subagent:reviewer"}
	if got, err := LineChain(ceiling, []string{"subagent:reviewer", "skill:lint"}); err != nil || !slices.Equal(got, []string{"agent", "subagent:reviewer", "skill:lint"}) {
		t.Errorf("a deeper chain: %q %v", got, err)
	}
	if got, err := LineChain(ceiling, nil); err != nil || !slices.Equal(got, ceiling) {
		t.Errorf("no chain: %q %v", got, err)
	}
	if _, err := LineChain(ceiling, []string{"agent"}); err == nil || !strings.Contains(err.Error(), "does not begin with this gateway's chain [agent, subagent:reviewer]") {
		t.Errorf("a shallower chain: %v", err)
	}
	if _, err := LineChain(ceiling, make([]string, MaxChainRefs+1)); err == nil || !strings.Contains(err.Error(), "at most 16 references") {
		t.Errorf("a chain too long: %v", err)
	}
}
