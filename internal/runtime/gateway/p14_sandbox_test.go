package gateway

import (
	"slices"
	"strings"
	"testing"
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
		sb := g.sandbox(cur, eff, cur.Tools["Bash"])
		cur.Exit()
		got := slices.Sorted(slices.Values(sb.Hidden))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: hidden %q, want %q", tc.note, got, tc.want)
		}
	}
}
