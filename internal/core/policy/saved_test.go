package policy

import (
	"errors"
	"strings"
	"testing"
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

// TestR3RestoreBadInput: what is not a saved generation is an error.
func TestR3RestoreBadInput(t *testing.T) {
	for _, tc := range []struct{ note, data, want string }{
		{"not JSON", `{"Format":4,`, "cannot be read"},
		{"another format", `{"Format":99}`, "format 99"},
		{"no agent", `{"Format":4,"Surfaces":{}}`, "no agent surface"},
		{"a tool under another name", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Write"}}}`, `"Read" is not named so`},
		{"a tool without its gate", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent"}},"Tools":{"Read":{"Name":"Read"}}}`, "no schema"},
		{"a surface under another name", `{"Format":4,"Surfaces":{"agent":{"Ref":"skill:x"}}}`, "not named so"},
		{"a list outside its entries", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent","Declared":true,"Entries":["Read"],"EntryPos":[{}],"Sources":[{"Start":0,"End":5}]}}}`, "outside its entries"},
		{"a named list that is missing", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent"}},"Chains":["agent"]}`, "fewer effective lists"},
		{"a list that is not named", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent"}}}` + "\n{}", "more effective lists"},
		{"positions that do not match the entries", `{"Format":4,"Surfaces":{"agent":{"Ref":"agent","Declared":true,"Entries":["Read"]}}}`, "0 positions for 1 entries"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if g, err := Restore([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, %v; want an error saying %q", g, err, tc.want)
			}
		})
	}
}

// FuzzR3Restore: no byte string makes Restore, or a restored generation's
// decision, panic.
func FuzzR3Restore(f *testing.F) {
	g, err := Load("../../../examples/policies/team")
	if err != nil {
		f.Fatal(err)
	}
	data, err := g.Save()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"Format":4,"Surfaces":{"agent":{"Ref":"agent"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Restore(data, WithWorkdir("/w"))
		if err != nil {
			return
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
