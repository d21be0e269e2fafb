package gateway

import (
	"strings"
	"testing"
)

// TestP18LabelsComeFromResultsAndStick: a call's result labels the session
// only when the call ran and succeeded; the label stays, and every later
// refusal names the call that gave it. A gateway that serves no single
// session (one that HTTP callers share) keeps no labels.
func TestP18LabelsComeFromResultsAndStick(t *testing.T) {
	const body = `
tools: {Echo: schema.#Echo, Read: schema.#Read}
labels: untrusted: tools: ["Echo", "Read"]
agent: when: untrusted: "denied-tools": ["Echo"]
`
	echo := func(id string) string {
		return `{"type":"tool_use","id":"` + id + `","name":"Echo","input":{"message":"hi"}}`
	}
	g, _ := newGateway(t, body, nil)
	g.session = &session{} // as Options.Session makes it
	if r := handle(t, g, `{"type":"tool_use","id":"r1","name":"Read","input":{"file_path":"/nonexistent/aimon-gw/x"}}`); r["is_error"] != true {
		t.Fatalf("the read of a missing file: %v", r)
	}
	if r := handle(t, g, echo("e1")); r["is_error"] != false {
		t.Fatalf("a failed read labelled the session: %v", r)
	}
	for _, id := range []string{"e2", "e3"} {
		r := handle(t, g, echo(id))
		if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "denied on this surface while the session is labelled untrusted by Echo") || !strings.Contains(text, "The result of Echo (call e1) labelled the session untrusted") {
			t.Errorf("%s after Echo e1: %v", id, r)
		}
	}
	shared, _ := newGateway(t, body, nil)
	for _, id := range []string{"e1", "e2"} {
		if r := handle(t, shared, echo(id)); r["is_error"] != false {
			t.Errorf("%s on a gateway without a session: %v", id, r)
		}
	}
}
