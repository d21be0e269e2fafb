package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const clientsPolicy = `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo & {input: times?: >=1 & <=5}
validation: "enforce"
`

// TestS9ClientParametersDroppedOnlyWhenNamed: a parameter the policy names
// as a client's own (Gemini CLI's wait_for_previous) is dropped before the
// gate, and the call runs; without the setting, and for any parameter it
// does not name, the gate refuses the call as before: nothing is dropped
// silently.
func TestS9ClientParametersDroppedOnlyWhenNamed(t *testing.T) {
	t.Parallel()
	call := func(s *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
		r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return resultText(r), r.IsError
	}
	named := mcpClient(t, mcpParams{Policy: moduleDir(t, clientsPolicy+"mcp: clientParameters: [\"wait_for_previous\"]\n"), Surface: "agent"})
	if got, isErr := call(named, "Echo", map[string]any{"message": "hi", "wait_for_previous": true}); isErr || got != "hi" {
		t.Errorf("a named client parameter must be dropped and the call run: %v %q", isErr, got)
	}
	if got, isErr := call(named, "Echo", map[string]any{"message": "hi", "wait_for_previous": true, "extra": 1}); !isErr || !strings.Contains(got, "extra") {
		t.Errorf("a parameter the policy does not name is the gate's to refuse: %v %q", isErr, got)
	}
	plain := mcpClient(t, mcpParams{Policy: moduleDir(t, clientsPolicy), Surface: "agent"})
	if got, isErr := call(plain, "Echo", map[string]any{"message": "hi", "wait_for_previous": true}); !isErr || !strings.Contains(got, "wait_for_previous") {
		t.Errorf("without the setting the parameter is refused: %v %q", isErr, got)
	}
}

// TestS9ClientParametersBadName: a name that cannot be a parameter is a
// policy error with its position.
func TestS9ClientParametersBadName(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(gatewayBinary(t), "vet", moduleDir(t, clientsPolicy+"mcp: clientParameters: [\"wait for previous\"]\n")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "clientParameters") {
		t.Errorf("a bad client parameter name must fail vet, naming it: %v %s", err, out)
	}
}

// TestS1DescriptionStatesTheBounds: the MCP description of a tool ends with
// the bounds its gate enforces, which Codex drops from the schema it shows
// the model; the schema itself is the same, and mcp.describeBounds: false
// lists the description as written.
func TestS1DescriptionStatesTheBounds(t *testing.T) {
	t.Parallel()
	on := toolsByName(t, mcpClient(t, mcpParams{Policy: moduleDir(t, clientsPolicy), Surface: "agent"}))["Echo"]
	off := toolsByName(t, mcpClient(t, mcpParams{Policy: moduleDir(t, clientsPolicy+"mcp: describeBounds: false\n"), Surface: "agent"}))["Echo"]
	if on == nil || off == nil {
		t.Fatal("Echo is not listed")
	}
	if !strings.HasPrefix(on.Description, "Repeats a message back.") || !strings.Contains(on.Description, "times from 1 to 5") {
		t.Errorf("the description must state the bound of times: %q", on.Description)
	}
	if off.Description != "Repeats a message back." {
		t.Errorf("describeBounds: false must list the description as written: %q", off.Description)
	}
	a, _ := json.Marshal(on.InputSchema)
	b, _ := json.Marshal(off.InputSchema)
	if string(a) != string(b) {
		t.Errorf("the schema must not change with the description:\n%s\n%s", a, b)
	}
}
