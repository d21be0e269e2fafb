package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/allow"
	"aimon.dev/gw/internal/core/rule"
)

// TestP14DenyAndAskInAPolicy: denied-tools and ask-tools on surfaces, in
// CUE and in markdown front matter (disallowed-tools), decide along a
// chain with their positions kept.
func TestP14DenyAndAskInAPolicy(t *testing.T) {
	dir := writePolicy(t, map[string]string{
		"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash, Write: schema.#Write}
agent: {
	"allowed-tools": ["Read", "Bash(git:*)", "Write"]
	"denied-tools": ["Read(/etc/**)"]
	"ask-tools": ["Bash(git push:*)"]
}
subagents: builder: "denied-tools": ["Write"]
surfaces: from: ["md"]
`,
		"md/agents/reviewer.md":    "---\nname: reviewer\ntools: Read, Bash\ndisallowed-tools: Bash(git commit:*), Write\n---\nReview.\n",
		"md/skills/notes/SKILL.md": "---\nask-tools: [Read]\n---\n",
	})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		note  string
		chain []string
		tool  string
		in    map[string]any
		want  string // allowed, ask or denied, and the rule
	}{
		{"the agent's deny", []string{"agent"}, "Read", map[string]any{"file_path": "/etc/passwd"}, "denied P14"},
		{"the agent's ask", []string{"agent"}, "Bash", map[string]any{"command": "git push"}, "ask P14"},
		{"the agent's allow", []string{"agent"}, "Bash", map[string]any{"command": "git log"}, "allowed P3"},
		{"a child inherits the deny", []string{"agent", "subagent:reviewer"}, "Read", map[string]any{"file_path": "/etc/hosts"}, "denied P14"},
		{"a child inherits the ask", []string{"agent", "subagent:reviewer"}, "Bash", map[string]any{"command": "git push"}, "ask P14"},
		{"a child adds a deny in its front matter", []string{"agent", "subagent:reviewer"}, "Bash", map[string]any{"command": "git commit -m x"}, "denied P14"},
		{"a child with deny only, no list", []string{"agent", "subagent:builder"}, "Write", map[string]any{"file_path": "/x", "content": ""}, "denied P14"},
		{"a child with deny only keeps its caller's list", []string{"agent", "subagent:builder"}, "Read", map[string]any{"file_path": "/x"}, "allowed P6"},
		{"a skill's ask by name", []string{"agent", "skill:notes"}, "Read", map[string]any{"file_path": "/x"}, "ask P14"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			e, err := g.Effective(tc.chain)
			if err != nil {
				t.Fatal(err)
			}
			d := e.Decide(tc.tool, tc.in, "/")
			got := "denied "
			switch {
			case d.Allowed:
				got = "allowed "
			case d.Ask:
				got = "ask "
			}
			if got += string(d.Rule); got != tc.want {
				t.Errorf("%s %v = %s (%s), want %s", tc.tool, tc.in, got, d.Reason, tc.want)
			}
		})
	}
	r := g.Surfaces["subagent:reviewer"]
	if !slices.Equal(r.Denied, []string{"Bash(git commit:*)", "Write"}) || len(r.DeniedPos) != 2 || !strings.HasSuffix(r.DeniedPos[0].File, "reviewer.md") {
		t.Errorf("reviewer's deny entries %q at %v", r.Denied, r.DeniedPos)
	}
	if pos, ok := g.Surfaces["agent"].Place("Bash(git push:*)", allow.AskTools); !ok || pos.Line != 10 {
		t.Errorf("Place of the ask entry = %v, %v; want line 10", pos, ok)
	}
	if !slices.Contains(g.Inputs, g.Surfaces["skill:notes"].RuleFiles[0]) {
		t.Errorf("the ask-only markdown file is not an input of the generation: %v", g.Inputs)
	}
}

// TestP17ReadDenyBindsTheSearchesAndVetSaysWhatCommandsMaySee: a Read
// deny or ask entry binds the Grep and Glob tools as written (rule P17), so
// vet no longer asks for entries of their own; it warns of a Read entry
// without a directory of its own, whose files a command's sandbox hides
// only where they exist when it starts, and of nothing else.
func TestP17ReadDenyBindsTheSearchesAndVetSaysWhatCommandsMaySee(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `tools: {Read: schema.#Read, Grep: schema.#Grep, Glob: schema.#Glob, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read", "Grep", "Glob", "Bash"]
	"denied-tools": ["Read(/srv/secret/**)", "Read(**/.env)"]
}
skills: s: {
	"allowed-tools": ["Read", "Grep"]
	"ask-tools": ["Read(**/docs/**)"]
}
`}), WithWorkdir("/work"))
	if err != nil {
		t.Fatal(err)
	}
	text := vetText(g)
	for _, w := range []string{
		`policy.cue:8:43: agent denied-tools entry "Read(**/.env)" has no directory of its own, so a command's sandbox hides only the files it names that exist under the working directory when the command starts, not one the command creates itself nor one elsewhere; give it a literal directory (Read(/srv/secret/**)), or list such files in the command tool's sandbox.hide.`,
		`skill:s ask-tools entry "Read(**/docs/**)" has no directory of its own`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("vet lacks %q; got:\n%s", w, text)
		}
	}
	if n := strings.Count(text, "no directory of its own"); n != 2 {
		t.Errorf("vet warns of %d entries without a directory, want 2:\n%s", n, text)
	}
	if strings.Contains(text, "may still search") || strings.Contains(text, "/srv/secret/**\" has no directory") {
		t.Errorf("vet warns of an entry that binds every reader:\n%s", text)
	}
	for _, c := range []struct {
		tool, path string
		denied     bool
	}{
		{"Grep", "/srv/secret/k", true}, {"Glob", "/srv/secret", true}, {"Grep", "/work/sub/.env", true},
		{"Grep", "/srv/open", false}, {"Glob", "/work/sub", false},
	} {
		eff, err := g.Effective([]string{"agent"})
		if err != nil {
			t.Fatal(err)
		}
		d := eff.Decide(c.tool, map[string]any{"path": c.path}, "/work")
		if d.Allowed == c.denied {
			t.Errorf("%s of %s: %+v; want denied %v by Read's entries", c.tool, c.path, d, c.denied)
		}
		if c.denied && !strings.Contains(d.Reason, "Read(") {
			t.Errorf("%s of %s is refused without naming Read's entry: %s", c.tool, c.path, d.Reason)
		}
	}
}

// TestP14VetReportsCovered: vet reports an allow entry a deny entry covers
// whole, along the chain; a misspelt front matter key is an error.
func TestP14VetReportsCovered(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: {
	"allowed-tools": ["Read(/srv/repo/*.go)", "Bash(git push:*)", "Bash(ls)"]
	"denied-tools": ["Read(/srv/**)"]
}
skills: s: {
	"allowed-tools": ["Bash(ls)", "Read(/tmp/**)"]
	"denied-tools": ["Bash(git:*)", "Bash(ls:*)"]
}
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	text := vetText(g)
	for _, w := range []string{
		`policy.cue:8:20: agent allowed-tools entry "Read(/srv/repo/*.go)" is covered whole by the denied-tools entry "Read(/srv/**)"`,
		`policy.cue:12:20: skill:s allowed-tools entry "Bash(ls)" is covered whole by the denied-tools entry "Bash(ls:*)"`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("vet lacks %q; got:\n%s", w, text)
		}
	}
	for _, not := range []string{`"Bash(git push:*)" is covered`, `"Read(/tmp/**)" is covered`, `agent allowed-tools entry "Bash(ls)" is covered`} {
		if strings.Contains(text, not) {
			t.Errorf("vet says %q; got:\n%s", not, text)
		}
	}
	bad := writePolicy(t, map[string]string{
		"policy.cue":       header + "tools: Read: schema.#Read\nsurfaces: from: [\"md\"]\n",
		"md/commands/x.md": "---\ndisallowedTools: Read\n---\n",
	})
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), `"disallowedTools" is not disallowed-tools`) {
		t.Errorf("a misspelt key: %v", err)
	}
	if d := mustDecide(t, g, []string{"agent"}, "Read", map[string]any{"file_path": "/srv/repo/a.go"}); d.Rule != rule.P14 || d.Allowed {
		t.Errorf("%+v", d)
	}
}

// TestP14DenyOrAskNamingNoToolIsAnError: a deny or ask entry whose tool
// name is misspelt, a wildcard or a wildcard MCP name names no tool and
// would forbid nothing: the policy does not load, and each entry is named
// at file:line:col with a did-you-mean, in CUE and in markdown front
// matter. The same names in allowed-tools stay warnings (P12).
func TestP14DenyOrAskNamingNoToolIsAnError(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash, Echo: schema.#Echo}
agent: {
	"allowed-tools": ["Read", "Bash", "Echo", "Raed"]
	"denied-tools": ["Rea?(/etc/**)", "Echo*", "*", "Bahs"]
	"ask-tools": ["Raed(/x)", "mcp__db__*", "Echo"]
}
surfaces: from: ["md"]
`,
		"md/agents/r.md": "---\nname: r\ndisallowed-tools: Wrte\n---\nReview.\n",
	})
	_, err := Load(dir)
	if err == nil {
		t.Fatal("a policy whose deny and ask entries name no tool loaded")
	}
	text := err.Error()
	for _, w := range []string{
		`policy.cue:9:19: agent denied-tools entry "Rea?(/etc/**)" names no tool: a tool name takes no wildcard, each entry names one tool; did you mean "Read"? An entry of denied-tools that names no tool would deny nothing; correct the name or remove the entry.`,
		`policy.cue:9:36: agent denied-tools entry "Echo*" names no tool: a tool name takes no wildcard, each entry names one tool; did you mean "Echo"?`,
		`policy.cue:9:45: agent denied-tools entry "*" names no tool: a tool name takes no wildcard, each entry names one tool; the tools are Bash, Echo, Read. To keep every tool but a few, list those in allowed-tools.`,
		`policy.cue:9:50: agent denied-tools entry "Bahs" names no tool the policy defines; did you mean "Bash"?`,
		`policy.cue:10:16: agent ask-tools entry "Raed(/x)" names no tool the policy defines; did you mean "Read"? An entry of ask-tools that names no tool would ask for nothing`,
		`policy.cue:10:28: agent ask-tools entry "mcp__db__*" names no tool: a tool name takes no wildcard, each entry names one tool; did you mean "mcp__db"? It names every tool of the server db.`,
		`r.md:3:1: subagent:r denied-tools entry "Wrte" names no tool the policy defines; the tools are Bash, Echo, Read.`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("the load error lacks %q; got:\n%s", w, text)
		}
	}
	if strings.Contains(text, `entry "Echo" names`) {
		t.Errorf("the load error names the ask entry Echo; got:\n%s", text)
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("the load error is %T, not Errors", err)
	}
	for _, d := range es {
		if strings.Contains(d.Message, "names no tool") && d.Warning != strings.Contains(d.Message, " allowed-tools entry ") {
			t.Errorf("%s: warning %v; an allow entry that names no tool is a warning, a deny or ask entry an error", d, d.Warning)
		}
	}
	// The same policy with its deny and ask entries corrected loads, and
	// the misspelt allow entry is a warning.
	dir = writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Bash: schema.#Bash, Echo: schema.#Echo}
agent: {
	"allowed-tools": ["Read", "Bash", "Echo", "Raed"]
	"denied-tools": ["Read(/etc/**)", "Bash"]
	"ask-tools": ["mcp__db", "Echo"]
}
`})
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ws := fmt.Sprint(g.Warnings); !strings.Contains(ws, `agent allowed-tools entry "Raed" names no tool the policy defines; did you mean "Read"?`) {
		t.Errorf("warnings: %s", ws)
	}
	if d := mustDecide(t, g, []string{"agent"}, "Echo", map[string]any{"message": "hi"}); !d.Ask || d.Rule != rule.P14 {
		t.Errorf("ask-tools [Echo]: %+v", d)
	}
}

func mustDecide(t *testing.T, g *Generation, chain []string, tool string, in map[string]any) rule.Decision {
	t.Helper()
	e, err := g.Effective(chain)
	if err != nil {
		t.Fatal(err)
	}
	return e.Decide(tool, in, "/")
}

// vetText is what vet says of g, a finding a line.
func vetText(g *Generation) string {
	var got []string
	for _, d := range Vet(g) {
		got = append(got, d.String())
	}
	return strings.Join(got, "\n")
}

// TestP4HomePatternsAreTheRunningUsers: a "~/" path pattern is under the
// home of the user the lists are compiled for, read at load, not fixed
// where the policy was written (issue 42).
func TestP4HomePatternsAreTheRunningUsers(t *testing.T) {
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read}
agent: "allowed-tools": ["Read(~/notes/**)", "Read(/srv/**)"]
agent: "denied-tools": ["Read(~/.ssh/**)"]
`})
	for _, home := range []string{"/home/alice", "/home/bob"} {
		t.Setenv("HOME", home)
		g, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]string{home + "/notes/a": "allowed", home + "/.ssh/id": "denied P14", "/home/carol/notes/a": "denied P4", "/srv/x": "allowed"} {
			d := mustDecide(t, g, []string{"agent"}, "Read", map[string]any{"file_path": path})
			got := "denied " + string(d.Rule)
			if d.Allowed {
				got = "allowed"
			}
			if got != want {
				t.Errorf("HOME=%s: Read %s = %s (%s), want %s", home, path, got, d.Reason, want)
			}
		}
	}
}

// TestP17ReadsIsDeclaredByTheSchema: which tools a Read entry binds is the
// schema's reads, not the built-ins' names (probe F5): Claude Code's Read
// binds its Grep and Glob, Gemini CLI's read_file its grep_search, glob
// and list_directory, a plugin that declares reads: "tree" is bound as
// they are, and a restored plan binds them as the load did.
func TestP17ReadsIsDeclaredByTheSchema(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": `package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/claudecode"
	"aimon.dev/gw/schema/geminicli"
)

tools: {Read: claudecode.#Read, Grep: claudecode.#Grep, Glob: claudecode.#Glob}
tools: {read_file: geminicli.#read_file, grep_search: geminicli.#grep_search, glob: geminicli.#glob, list_directory: geminicli.#list_directory}
tools: Search: {external: "go", input: path?: string, subject: {field: "path", kind: "path"}, reads: "tree"}
tools: Other: {external: "go", input: path?: string, subject: {field: "path", kind: "path"}}
tools: Fetch: {external: "go", input: path?: string, subject: {field: "path", kind: "path"}, effect: "read"}
tools: Cat: {external: "go", input: path?: string, subject: {field: "path", kind: "path"}, reads: "file"}
tools: Used: schema.#Echo
agent: "allowed-tools": ["Read", "Grep", "Glob", "read_file", "grep_search", "glob", "list_directory", "Search", "Other", "Fetch", "Cat"]
agent: "denied-tools": ["Read(/srv/secret/**)"]
agent: "ask-tools": ["read_file(/srv/asked/**)"]
`}), WithWorkdir("/work"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(data, WithWorkdir("/work"))
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []struct {
		name string
		g    *Generation
	}{{"loaded", g}, {"restored", r}} {
		eff, err := gen.g.Effective([]string{"agent"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			tool, field, path string
			denied, ask       bool
		}{
			{"Grep", "path", "/srv/secret/k", true, false}, {"Glob", "path", "/srv/secret", true, false},
			{"grep_search", "dir_path", "/srv/secret", true, false}, {"glob", "dir_path", "/srv/asked", false, true},
			{"list_directory", "dir_path", "/srv/asked/x", false, true}, {"Search", "path", "/srv/secret/k", true, false},
			{"Grep", "path", "/srv/open", false, false}, {"Other", "path", "/srv/secret/k", false, false},
			// Every reader of a file is bound by another's entries (probe P6).
			{"Fetch", "path", "/srv/secret/k", true, false}, {"Cat", "path", "/srv/secret/k", true, false},
			{"read_file", "file_path", "/srv/secret/k", true, false}, {"Read", "file_path", "/srv/asked/x", false, true},
			{"Fetch", "path", "/srv/open", false, false},
		} {
			d := eff.Decide(c.tool, map[string]any{c.field: c.path}, "/work")
			if d.Allowed == (c.denied || c.ask) || d.Ask != c.ask {
				t.Errorf("%s: %s of %s: %+v; want denied %v, asked %v", gen.name, c.tool, c.path, d, c.denied, c.ask)
			}
		}
	}
}
