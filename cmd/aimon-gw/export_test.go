package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/gate"
)

// TestS1CheckVetTestExportNothing: check, vet, test and serve until it is
// asked for the list build no tool's JSON Schema (issue 32: the export was an eighth of
// a load of distinct tools); a list does. Not parallel: the count is the
// process's.
func TestS1CheckVetTestExportNothing(t *testing.T) {
	dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema"

tools: {
	Echo: schema.#Echo & {input: message: =~"^hi"}
	Read: schema.#Read & {input: {file_path: =~"^/srv/", limit?: int & >=1 & <=50}}
}
agent: "allowed-tools": ["Echo", "Read"]
tests: hi: {tool: "Echo", input: message: "hi there", allowed: true}
`)
	var out bytes.Buffer
	before := gate.ExportsBuilt()
	for _, tc := range []struct {
		note string
		run  func() error
	}{
		{"check", func() error {
			return check(checkParams{Policy: dir, Workdir: dir, Surface: "agent", Stdout: &out,
				Call: `{"type":"tool_use","id":"1","name":"Read","input":{"file_path":"/srv/a","limit":9}}`})
		}},
		{"vet", func() error { return vet(vetParams{Dir: dir, Stdout: &out}) }},
		{"test", func() error { return policyTest(testParams{Dir: dir, Stdout: &out}) }},
		{"serve, a call and no list", func() error {
			return serve(t.Context(), serveParams{Policy: dir, Surface: "agent", Workdir: dir, MaxLineBytes: 1 << 20, Log: discard, Cache: "off", Stdout: &out,
				Stdin: strings.NewReader(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}` + "\n")})
		}},
	} {
		if err := tc.run(); err != nil {
			t.Fatalf("%s: %v\n%s", tc.note, err, out.String())
		}
		if n := gate.ExportsBuilt() - before; n != 0 {
			t.Errorf("%s built %d JSON Schemas; it needs none", tc.note, n)
		}
	}
	if !strings.Contains(out.String(), `"allowed": true`) {
		t.Errorf("check did not allow the call: %s", out.String())
	}
	// The control: a list builds them, one a gate.
	s := startServe(t, dir)
	r := s.send(`{"type":"list_tools"}`)
	if n := gate.ExportsBuilt() - before; n != 2 || !strings.Contains(fmt.Sprint(r), "2020-12") {
		t.Errorf("a list built %d JSON Schemas, want 2: %v", n, r)
	}
}
