package cchook

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"aimon.dev/gw/internal/runtime/gateway"
)

// TestR3HookGatewayDecidesUnderItsHeldGeneration: a Gateway decides under
// its generation, which its caller holds entered for the call, even once a
// reload has retired it meanwhile (the HTTP hook enters the generation in
// force to read a request, and a reload may swap it before the decision):
// the answer is that generation's, and comes; before, the gateway's own
// entry of the retired generation never returned.
func TestR3HookGatewayDecidesUnderItsHeldGeneration(t *testing.T) {
	gen := load(t, "/work/proj")
	if !gen.Enter() {
		t.Fatal("a new generation cannot be entered")
	}
	defer gen.Exit()
	g := NewGateway(gen, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	in := Input{SessionID: "s", Cwd: "/work/proj", HookEventName: "PreToolUse", ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"a.go"}`), ToolUseID: "t"}
	gen.Retire() // a reload, while the call holds it
	answered := make(chan Specific, 1)
	go func() { answered <- g.Answer(Runtime, in, Sender{}, nil).HookSpecificOutput }()
	select {
	case d := <-answered:
		if d.PermissionDecision != "allow" || d.UpdatedInput["file_path"] != "/work/proj/a.go" {
			t.Errorf("Read a.go under the retired generation: %+v, want it allowed as /work/proj/a.go", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the decision under a generation retired while held did not come within 30 s")
	}
	post := in
	post.HookEventName, post.ToolResponse = PostToolUse, json.RawMessage(`"x"`)
	labelled := make(chan error, 1)
	go func() { _, err := g.Label(post, Sender{Session: gateway.NewSession()}); labelled <- err }()
	select {
	case err := <-labelled:
		if err != nil {
			t.Errorf("Label under the retired generation: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the label under a generation retired while held did not come within 30 s")
	}
}
