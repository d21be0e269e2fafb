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

// TestR8ShellTimeoutIsTheCallsOwn: exec is told the timeout the call
// asked for, in whole milliseconds; none (0) for none or a bad one; -1
// for a command run in the background (probe P11).
func TestR8ShellTimeoutIsTheCallsOwn(t *testing.T) {
	for _, tc := range []struct {
		v, bg any
		want  int
	}{
		{1500.0, nil, 1500}, {nil, nil, 0}, {-5.0, nil, 0}, {"600000", nil, 0}, {0.5, false, 0}, {1e300, nil, 0}, {1500.0, true, -1}, {nil, true, -1},
	} {
		if got := timeoutMS(tc.v, tc.bg); got != tc.want {
			t.Errorf("timeout %v, background %v: %d, want %d", tc.v, tc.bg, got, tc.want)
		}
	}
}
