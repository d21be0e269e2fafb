package policy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

const labelsPolicy = header + `
tools: {Read: schema.#Read, Bash: schema.#Bash, Echo: schema.#Echo, Write: schema.#Write}
labels: untrusted: {
	tools: ["Echo"]
	entries: ["Read"]
	trusted: ["Read(/work/**)"]
}
agent: {
	"allowed-tools": ["Read", "Bash", "Echo", "Write"]
	when: untrusted: {"denied-tools": ["Write"], "ask-tools": ["Bash(git push:*)"]}
}
subagents: reviewer: when: untrusted: "denied-tools": ["Bash(curl:*)"]
`

// TestP18LabelsAndFlowsCompile: a label is given by the calls its tools and
// entries name, less those its trusted entries admit; a flow's entries
// accumulate along a chain; a restored plan decides alike.
func TestP18LabelsAndFlowsCompile(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": labelsPolicy}), WithWorkdir("/work"))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(saved, WithWorkdir("/work"))
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*Generation{"loaded": g, "restored": restored} {
		labels := func(tool string, in map[string]any) string {
			return strings.Join(g.LabelsOf(g.Tools[tool], in, "/work", nil), ",")
		}
		if got := labels("Read", map[string]any{"file_path": "/tmp/page.html"}); got != "untrusted" {
			t.Errorf("%s: a Read outside the trusted tree gives %q, want untrusted", name, got)
		}
		if got := labels("Read", map[string]any{"file_path": "/work/src/a.go"}); got != "" {
			t.Errorf("%s: a Read the trusted entry admits gives %q, want none", name, got)
		}
		if got := labels("Echo", map[string]any{"message": "x"}); got != "untrusted" {
			t.Errorf("%s: Echo gives %q, want untrusted", name, got)
		}
		// A command reads what its sandbox lets it, and no sandbox hides
		// everything Read reads (probe P1).
		if got := labels("Bash", map[string]any{"command": "ls"}); got != "untrusted" {
			t.Errorf("%s: Bash gives %q, want untrusted: the tool-wide Read entry cannot be hidden from it", name, got)
		}
		flow := g.Flow([]string{"agent"}, "untrusted")
		if d := flow.Decide("Write", map[string]any{"file_path": "/work/a", "content": ""}, "/work"); d.Allowed || d.Ask || d.Rule != rule.P14 {
			t.Errorf("%s: the agent's flow lets Write: %+v", name, d)
		}
		if d := flow.Decide("Bash", map[string]any{"command": "git push origin main"}, "/work"); !d.Ask {
			t.Errorf("%s: the agent's flow does not ask for git push: %+v", name, d)
		}
		if d := flow.Decide("Bash", map[string]any{"command": "git status"}, "/work"); !d.Allowed || d.Ask {
			t.Errorf("%s: the agent's flow binds git status: %+v", name, d)
		}
		sub := g.Flow([]string{"agent", "subagent:reviewer"}, "untrusted")
		for _, cmd := range []string{"curl https://x", "git push"} {
			if d := sub.Decide("Bash", map[string]any{"command": cmd}, "/work"); d.Allowed {
				t.Errorf("%s: the reviewer's flow, under the agent's, lets %s: %+v", name, cmd, d)
			}
		}
		if g.Flow([]string{"agent"}, "secret") != nil {
			t.Errorf("%s: a label without a flow has one", name)
		}
	}
	if ws := vetText(g); strings.Contains(ws, "P18") {
		t.Errorf("vet finds problems in a sound policy: %s", ws)
	}
}

// TestP18BadLabelsAndFlowsAreReported: a flow on a label the policy does
// not define, an entry of a label that cannot be used or names no tool, a
// server it does not define: errors at their places; a label no flow
// uses: a warning.
func TestP18BadLabelsAndFlowsAreReported(t *testing.T) {
	_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash}
labels: {
	untrusted: entries: ["Read(/tmp/[)", "Raed"]
	web: servers: ["web"]
	empty: {}
}
agent: when: {
	untrustd: "denied-tools": ["Bash"]
	web: "ask-tools": ["Bsh(git push:*)"]
}
`}))
	if err == nil {
		t.Fatal("a policy with bad labels and flows loaded")
	}
	text := err.Error()
	for _, w := range []string{
		`policy.cue:13:2: agent when untrustd names a label the policy does not define, so its entries would never bind; did you mean "untrusted"?`,
		`policy.cue:8:39: label untrusted entries entry "Raed" names no tool the policy defines, so it would label nothing; did you mean "Read"?`,
		`policy.cue:8:23: label untrusted: entry "Read(/tmp/[)" cannot be used: the path pattern is not a valid glob`,
		`policy.cue:9:17: label web names the server "web", which the policy does not define under servers`,
		`policy.cue:10:2: label empty names no tool, entry, server or content whose results give it`,
		`policy.cue:14:21: agent when web ask-tools entry "Bsh(git push:*)" names no tool the policy defines; did you mean "Bash"?`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("the load error lacks %q; got:\n%s", w, text)
		}
	}
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read}
labels: unused: tools: ["Read"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	if w := `policy.cue:7:9: label unused is used by no surface's when, nor by a provenance that trusts unlabelled results, so it decides nothing`; !strings.Contains(vetText(g), w) {
		t.Errorf("vet lacks %q; got:\n%s", w, vetText(g))
	}
}

// TestP18LabelsByDomainAndServer: a WebFetch of a domain the label trusts
// gives no label, any other does; every tool of a server the label names
// gives it.
func TestP18LabelsByDomainAndServer(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": `package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/claudecode"
)

tools: {Read: schema.#Read, WebFetch: claudecode.#WebFetch}
servers: web: {command: ["web-server"], expose: ["fetch"], pin: false}
labels: untrusted: {entries: ["WebFetch"], servers: ["web"], trusted: ["WebFetch(domain:docs.internal)"]}
agent: when: untrusted: "denied-tools": ["Read"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		in   map[string]any
		want string
	}{
		{"WebFetch", map[string]any{"url": "https://evil.example/page", "prompt": "x"}, "untrusted"},
		{"WebFetch", map[string]any{"url": "https://docs.internal/guide", "prompt": "x"}, ""},
		{"web__fetch", map[string]any{"url": "https://docs.internal/guide"}, "untrusted"},
		{"Read", map[string]any{"file_path": "/tmp/x"}, ""},
	} {
		if got := strings.Join(g.LabelsOf(g.Tools[tc.tool], tc.in, "/work", nil), ","); got != tc.want {
			t.Errorf("%s %v gives %q, want %q", tc.tool, tc.in, got, tc.want)
		}
	}
}

// TestP18CommandsAreLabelledByWhatTheyCanRead: a label's entry on a tool
// that reads files binds commands (rules P18, P17; probe P1): one with a
// directory of its own is hidden from the commands of a session that does
// not hold the label (LabelHidden) and labels none of them; one that cannot
// be hidden (no directory of its own, the working directory or above it, a
// sandbox that is off) labels every command's result; a label on a tool
// that fetches by domain labels the commands whose sandbox reaches the
// network.
func TestP18CommandsAreLabelledByWhatTheyCanRead(t *testing.T) {
	for _, tc := range []struct {
		name, bash, entries string
		labels              string
		hidden              []string
	}{
		{"a directory of its own", "schema.#Bash", `["Read(/srv/web/**)"]`, "", []string{"/srv/web"}},
		{"relative", "schema.#Bash", `["Read(./web/**)"]`, "", []string{"/work/web"}},
		{"a file", "schema.#Bash", `["Read(/srv/page.html)"]`, "", []string{"/srv/page.html"}},
		{"no directory of its own", "schema.#Bash", `["Read(**/*.html)"]`, "untrusted", nil},
		{"above the working directory", "schema.#Bash", `["Read(/work/**)"]`, "untrusted", nil},
		{"sandbox off", `schema.#Bash & {sandbox: mode: "off"}`, `["Read(/srv/web/**)"]`, "untrusted", []string{"/srv/web"}},
		{"a write entry", "schema.#Bash", `["Write(/srv/web/**)"]`, "", nil},
		{"a domain, no network", "schema.#Bash", `["WebFetch(domain:evil.example)"]`, "", nil},
		{"a domain, network", `schema.#Bash & {sandbox: network: true}`, `["WebFetch(domain:evil.example)"]`, "untrusted", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := fmt.Sprintf(`package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/claudecode"
)

tools: {Read: schema.#Read, Write: schema.#Write, WebFetch: claudecode.#WebFetch, Bash: %s}
labels: untrusted: entries: %s
agent: {
	"allowed-tools": ["Read", "Bash", "Write", "WebFetch"]
	when: untrusted: "denied-tools": ["Write"]
}
`, tc.bash, tc.entries)
			g, err := Load(writePolicy(t, map[string]string{"policy.cue": pol}), WithWorkdir("/work"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(g.LabelsOf(g.Tools["Bash"], map[string]any{"command": "ls"}, "/work", nil), ","); got != tc.labels {
				t.Errorf("Bash gives %q, want %q", got, tc.labels)
			}
			if got := g.LabelHidden(nil, "/work"); !slices.Equal(got, tc.hidden) {
				t.Errorf("an unlabelled session's commands are hidden %q, want %q", got, tc.hidden)
			}
			if got := g.LabelHidden([]string{"untrusted"}, "/work"); len(got) != 0 {
				t.Errorf("a session holding the label is hidden %q, want nothing", got)
			}
		})
	}
}
