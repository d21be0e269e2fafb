package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"aimon.dev/gw/plugin/host"
)

// describer answers Describe from a table, as a plugin host would.
type describer struct {
	infos []host.ToolInfo
	err   error
	seen  []host.Spec
}

func (d *describer) Describe(_ context.Context, s host.Spec) ([]host.ToolInfo, error) {
	d.seen = append(d.seen, s)
	return d.infos, d.err
}

const fetchSchema = `{"type":"object","properties":{"url":{"type":"string","minLength":3},"depth":{"type":"integer"}},"required":["url"],"additionalProperties":false}`

func TestPluginToolFromDescribe(t *testing.T) {
	d := &describer{infos: []host.ToolInfo{{Name: "fetch", Description: "Fetches a page.", InputSchema: []byte(fetchSchema), Concurrency: "concurrent_safe", Interrupt: "cooperative"}}}
	dir := writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {
	plugin: {command: ["./bin/fetch", "--quiet"], tool: "fetch"}
	input: url: =~"^https://"
}
`})
	g, err := Load(dir, WithPlugins(d))
	if err != nil {
		t.Fatal(err)
	}
	f := g.Tools["Fetch"]
	if f.Description != "Fetches a page." || f.Concurrency != "concurrent_safe" || f.Interrupt != "cooperative" {
		t.Errorf("the plugin's declarations were not taken: %+v", f)
	}
	if got := d.seen[0].Command[0]; got != dir+"/bin/fetch" {
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
	if strings.Contains(string(f.JSONSchema), "minLength") || !strings.Contains(string(f.JSONSchema), "https") {
		t.Errorf("a narrowed plugin tool must show the policy's narrowing to models: %s", f.JSONSchema)
	}
	if specs := g.Specs(); len(specs) != 1 || specs[0].Command[1] != "--quiet" {
		t.Errorf("Specs = %v", specs)
	}
}

func TestPluginProblemsAreLoadErrors(t *testing.T) {
	body := header + "tools: Echo: schema.#Echo\ntools: Fetch: plugin: command: [\"fetch\"]\n"
	tests := []struct {
		name string
		d    Plugins
		want string
	}{
		{"no plugins here", nil, "cannot be started here"},
		{"missing binary", &describer{err: errors.New("the plugin binary fetch was not found")}, "tool Fetch: the plugin binary fetch was not found"},
		{"tool not served", &describer{infos: []host.ToolInfo{{Name: "other", InputSchema: []byte(`{}`)}}}, `serves other, not "Fetch"`},
		{"bad schema", &describer{infos: []host.ToolInfo{{Name: "Fetch", InputSchema: []byte(`{"type":"string"}`)}}}, "declares an input schema that cannot be used"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []Option
			if tt.d != nil {
				opts = append(opts, WithPlugins(tt.d))
			}
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": body}), opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "policy.cue:") {
				t.Errorf("Load = %v, want a positioned error containing %q", err, tt.want)
			}
		})
	}
}

func TestPluginPolicyNarrowsConcurrency(t *testing.T) {
	d := &describer{infos: []host.ToolInfo{{Name: "Fetch", InputSchema: []byte(`{"type":"object"}`), Concurrency: "concurrent_safe", Interrupt: "cooperative"}}}
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {plugin: command: ["fetch"], concurrency: "sequential"}
`}), WithPlugins(d))
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Tools["Fetch"].Concurrency; c != "sequential" {
		t.Errorf("the policy narrowed Fetch to sequential, got %s", c)
	}
	if s := string(g.Tools["Fetch"].JSONSchema); s != `{"type":"object"}` {
		t.Errorf("an unnarrowed plugin tool must show its declared schema as is, got %s", s)
	}
	d.infos[0].Concurrency = "sequential"
	g, err = Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tools: Fetch: {plugin: command: ["fetch"], concurrency: "concurrent_safe"}
`}), WithPlugins(d))
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Tools["Fetch"].Concurrency; c != "sequential" {
		t.Errorf("a policy must not widen a sequential plugin tool, got %s", c)
	}
}
