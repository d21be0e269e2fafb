package policy

import (
	"strings"
	"testing"
)

// loadComplete loads a policy, checks that its plugin tools wait for their
// declarations, and completes them with decls, as provisioning does.
func loadComplete(t *testing.T, dir string, decls map[string]Declared) (*Generation, error) {
	t.Helper()
	g, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range g.Pending() {
		if pt.Gate != nil {
			t.Errorf("pending tool %s already has a gate", pt.Name)
		}
	}
	c, err := g.Complete(decls)
	if err == nil && len(c.Pending()) > 0 {
		t.Errorf("Complete left pending tools")
	}
	if err == nil && len(g.Pending()) == 0 {
		t.Errorf("Complete changed the loaded generation")
	}
	return c, err
}

const fetchSchema = `{"type":"object","properties":{"url":{"type":"string","minLength":3},"depth":{"type":"integer"}},"required":["url"],"additionalProperties":false}`

func TestPluginToolFromDescribe(t *testing.T) {
	d := map[string]Declared{"Fetch": {Description: "Fetches a page.", InputSchema: []byte(fetchSchema), Concurrency: "concurrent_safe", Interrupt: "cooperative"}}
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {
	plugin: {command: ["./bin/fetch", "--quiet"], tool: "fetch"}
	input: url: =~"^https://"
}
`})
	g, err := loadComplete(t, dir, d)
	if err != nil {
		t.Fatal(err)
	}
	f := g.Tools["Fetch"]
	if f.Description != "Fetches a page." || f.Concurrency != "concurrent_safe" || f.Interrupt != "cooperative" {
		t.Errorf("the plugin's declarations were not taken: %+v", f)
	}
	if got := f.Plugin.Command[0]; got != dir+"/bin/fetch" {
		t.Errorf("a relative plugin binary must resolve against the policy directory, got %s", got)
	}
	// S3: closed where the plugin says so; the policy's narrowing is enforced.
	for in, want := range map[string]string{
		`{"url":"https://x"}`:             "",
		`{"url":"http://x"}`:              "url",
		`{"url":"https://x","extra":1}`:   "Unknown parameter 'extra'",
		`{"depth":2}`:                     "Missing required parameter 'url'",
		`{"url":"https://x","depth":"2"}`: "depth",
	} {
		vs := f.Gate.Check(decodeObj(t, in))
		got := ""
		for _, v := range vs {
			got += v.Sentence
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("gate(%s) = %q, want %q", in, got, want)
		}
	}
	if js, err := f.JSONSchema(); err != nil || strings.Contains(string(js), "minLength") || !strings.Contains(string(js), "https") {
		t.Errorf("a narrowed plugin tool must show the policy's narrowing to models: %s (%v)", js, err)
	}
	if f.Plugin.Command[1] != "--quiet" || f.Plugin.Tool != "fetch" {
		t.Errorf("Plugin = %+v", f.Plugin)
	}
}

func TestPluginProblemsAreLoadErrors(t *testing.T) {
	body := header + "tools: Echo: schema.#Echo\ntools: Fetch: plugin: command: [\"fetch\"]\n"
	tests := []struct {
		note  string
		decls map[string]Declared
		want  string
	}{
		{"nothing declared", nil, "declared nothing"},
		{"bad schema", map[string]Declared{"Fetch": {InputSchema: []byte(`{"type":"string"}`)}}, "declares an input schema that cannot be used"},
	}
	for _, tt := range tests {
		t.Run(tt.note, func(t *testing.T) {
			_, err := loadComplete(t, writePolicy(t, map[string]string{"policy.cue": body}), tt.decls)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "policy.cue:") {
				t.Errorf("Complete = %v, want a positioned error containing %q", err, tt.want)
			}
		})
	}
}

func TestPluginPolicyNarrowsConcurrency(t *testing.T) {
	d := map[string]Declared{"Fetch": {InputSchema: []byte(`{"type":"object"}`), Concurrency: "concurrent_safe", Interrupt: "cooperative"}}
	g, err := loadComplete(t, writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {plugin: command: ["fetch"], concurrency: "sequential"}
`}), d)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Tools["Fetch"].Concurrency; c != "sequential" {
		t.Errorf("the policy narrowed Fetch to sequential, got %s", c)
	}
	if s, _ := g.Tools["Fetch"].JSONSchema(); string(s) != `{"type":"object"}` {
		t.Errorf("an unnarrowed plugin tool must show its declared schema as is, got %s", s)
	}
	d["Fetch"] = Declared{InputSchema: []byte(`{"type":"object"}`), Concurrency: "sequential", Interrupt: "cooperative"}
	g, err = loadComplete(t, writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {plugin: command: ["fetch"], concurrency: "concurrent_safe"}
`}), d)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Tools["Fetch"].Concurrency; c != "sequential" {
		t.Errorf("a policy must not widen a sequential plugin tool, got %s", c)
	}
}
