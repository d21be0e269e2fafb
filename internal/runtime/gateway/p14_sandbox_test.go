package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

// TestP14ReadersWithheldAreHiddenFromCommands: what a deny or ask entry of
// a tool that reads files withholds is hidden in a command's sandbox, where
// it is a literal absolute path other than the working directory or one
// above it; a writer's entries make paths read-only instead, not hidden.
func TestP14ReadersWithheldAreHiddenFromCommands(t *testing.T) {
	for _, tc := range []struct {
		note, denied, asked string
		want                []string
	}{
		{note: "a denied directory of Read", denied: `"Read(/srv/secret/**)"`, want: []string{"/srv/secret"}},
		{note: "a denied file of Read", denied: `"Read(/srv/key.pem)"`, want: []string{"/srv/key.pem"}},
		{note: "an ask entry of Grep", asked: `"Grep(/srv/review/**)"`, want: []string{"/srv/review"}},
		{note: "deny and ask together", denied: `"Glob(/srv/a/*.go)"`, asked: `"Read(/srv/b/**)"`, want: []string{"/srv/a", "/srv/b"}},
		{note: "no literal directory: nothing to hide", denied: `"Read(**/.env)"`},
		{note: "above the working directory: not hidden", denied: `"Read(/tmp/**)"`},
		{note: "a writer's entry is read-only, not hidden", denied: `"Write(/srv/w/**)"`},
		{note: "no entries"},
	} {
		g, _ := newGateway(t, `tools: {Read: schema.#Read, Grep: schema.#Grep, Glob: schema.#Glob, Write: schema.#Write, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read", "Grep", "Glob", "Write", "Bash"]
	"denied-tools": [`+tc.denied+`]
	"ask-tools": [`+tc.asked+`]
}
`, nil)
		if !strings.HasPrefix(g.opts.Workdir, "/tmp/") {
			t.Fatalf("the test's working directory %s is not below /tmp", g.opts.Workdir)
		}
		cur := g.enter()
		eff, err := cur.Effective(g.opts.Chain)
		if err != nil {
			cur.Exit()
			t.Fatal(err)
		}
		dc := g.decider(g.opts.Workdir)
		sb := dc.Sandbox(cur.Generation, eff, cur.Tools["Bash"])
		cur.Exit()
		got := slices.Sorted(slices.Values(sb.Hidden))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: hidden %q, want %q", tc.note, got, tc.want)
		}
	}
}

// TestP17FilesWithoutADirectoryAreHiddenOneByOne: a Read entry without a
// directory of its own hides, one by one, the files it names under the
// working directory (a directory it names, whole), and nothing else; with
// more entries to look through than the bound, the command is refused
// with a sentence that says what to do, never run with the files seen.
func TestP17FilesWithoutADirectoryAreHiddenOneByOne(t *testing.T) {
	g, _ := newGateway(t, `tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read", "Bash"]
	"denied-tools": ["Read(**/.env)", "Read(**/private/**)"]
}
`, nil)
	wd := g.opts.Workdir
	for _, f := range []string{".env", "a/b/.env", "a/b/c.txt", "a/private/k", "a/private/more/k", "x.env"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(wd, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wd, f), []byte("s"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := g.Check(nil, "1", "Bash", []byte(`{"command":"cat .env"}`))
	if !d.Allowed || d.Sandbox == nil {
		t.Fatalf("the command is not allowed: %+v", d)
	}
	got := slices.Sorted(slices.Values(d.Sandbox.Hidden))
	want := []string{wd + "/.env", wd + "/a/b/.env", wd + "/a/private"}
	if !slices.Equal(got, want) {
		t.Errorf("hidden %q, want %q", got, want)
	}
	g.hideWalk = 3
	d = g.Check(nil, "2", "Bash", []byte(`{"command":"cat .env"}`))
	if d.Allowed || d.Rule != rule.P17 || !strings.Contains(d.Reason, "give the entry a literal directory") {
		t.Errorf("too many entries to look through: %+v", d)
	}
}

// TestP9UnlistedIsNotListedWhateverTheCallersAsk: a tool a child surface
// does not list is refused as not listed (P9), even where its caller has
// ask or deny patterns of it, which, asked of a call whose input is not
// read, could only say its subject is missing (P5); a name-only deny
// entry still denies it whole (P14).
func TestP9UnlistedIsNotListedWhateverTheCallersAsk(t *testing.T) {
	g, _ := newGateway(t, `tools: {Read: schema.#Read, Write: schema.#Write, Echo: schema.#Echo}
agent: {
	"allowed-tools": ["Read", "Write(/srv/out/**)", "Echo"]
	"ask-tools": ["Write(/srv/out/ask/**)"]
	"denied-tools": ["Echo"]
}
subagents: reviewer: "allowed-tools": ["Read", "Echo"]
`, nil)
	d := g.Check([]string{"agent", "subagent:reviewer"}, "1", "Write", []byte(`{"file_path":"/srv/out/x","content":"y"}`))
	if d.Allowed || d.Rule != rule.P9 || !strings.Contains(d.Reason, "has no entry in allowed-tools") {
		t.Errorf("an unlisted Write: %+v", d)
	}
	d = g.Check([]string{"agent", "subagent:reviewer"}, "2", "Echo", []byte(`{"message":"x"}`))
	if d.Allowed || d.Rule != rule.P14 || !strings.Contains(d.Reason, "denied on this surface by Echo") {
		t.Errorf("a wholly denied Echo: %+v", d)
	}
}
