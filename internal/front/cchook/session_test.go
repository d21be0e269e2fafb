package cchook

import (
	"encoding/json"
	"testing"

	"aimon.dev/gw/internal/runtime/ticket"
)

// TestP18PostToolUseReadsTheCommandAsDecided: a Bash input that Claude
// Code reports as it ran it, wrapped in aimon-gw exec by the hook, is
// labelled by the command the hook decided, quotes and all; any other
// command is read as sent.
func TestP18PostToolUseReadsTheCommandAsDecided(t *testing.T) {
	w := &Wrap{Binary: "/usr/bin/aimon-gw", Policy: "/p", Seal: func(ticket.Binding) (string, error) { return "tok", nil }}
	for _, cmd := range []string{"curl https://x.example/", `echo 'it'\''s' -- x`, "git push"} {
		wrapped, err := w.command([]string{"agent"}, "/w", cmd, false, "r1", nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(map[string]any{"command": wrapped})
		var got map[string]any
		json.Unmarshal(unwrapped(in), &got)
		if got["command"] != cmd {
			t.Errorf("unwrapped %q: %q", wrapped, got["command"])
		}
	}
	for _, sent := range []string{`{"command":"echo 'exec' '--' 'x' y"}`, `{"command":"ls"}`, `not json`} {
		if got := string(unwrapped(json.RawMessage(sent))); got != sent {
			t.Errorf("%s read as %s", sent, got)
		}
	}
}
