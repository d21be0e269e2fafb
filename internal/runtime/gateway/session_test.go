package gateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
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

// TestP18RefusalNamesTheLabelOfTheFlow: of two labels a session holds, the
// refusal names the one whose flow refused, and the call that gave it.
func TestP18RefusalNamesTheLabelOfTheFlow(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Echo: schema.#Echo, Read: schema.#Read}
labels: {read: tools: ["Read"], echoed: tools: ["Echo"]}
agent: when: {read: "denied-tools": ["Write"], echoed: "denied-tools": ["Read"]}
tools: Write: schema.#Write
`, nil)
	g.session = &session{}
	file := filepath.Join(t.TempDir(), "a.txt")
	os.WriteFile(file, []byte("a\n"), 0o644)
	read := func(id string) map[string]any {
		return handle(t, g, `{"type":"tool_use","id":"`+id+`","name":"Read","input":{"file_path":"`+file+`"}}`)
	}
	if r := read("r1"); r["is_error"] != false {
		t.Fatalf("the first read: %v", r)
	}
	if r := handle(t, g, `{"type":"tool_use","id":"e1","name":"Echo","input":{"message":"hi"}}`); r["is_error"] != false {
		t.Fatalf("the echo: %v", r)
	}
	r := read("r2")
	if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "while the session is labelled echoed by Read.") || !strings.Contains(text, "The result of Echo (call e1) labelled the session echoed") {
		t.Errorf("the read after the echo: %v", r)
	}
}

// BenchmarkP18SessionCall is a call in a session that holds 10 labels,
// each with a flow, against the same call with no session state (issue
// 48: at most 1.2x): an Echo, which no flow binds, and a Read of a small
// file, which every flow's Read entry judges (and admits). The labels'
// results are not kept, so 1,000 earlier results cost what one does.
func BenchmarkP18SessionCall(b *testing.B) {
	var body strings.Builder
	body.WriteString("tools: {Echo: schema.#Echo, Read: schema.#Read}\n")
	for i := range 10 {
		fmt.Fprintf(&body, "labels: l%d: entries: [\"Read(/tmp/%d/**)\"]\n", i, i)
		fmt.Fprintf(&body, "agent: when: l%d: \"denied-tools\": [\"Read(/srv/%d/**)\"]\n", i, i)
	}
	file := filepath.Join(b.TempDir(), "a.txt")
	os.WriteFile(file, []byte("hello\n"), 0o644)
	lines := map[string][]byte{
		"echo": []byte(`{"type":"tool_use","id":"e","name":"Echo","input":{"message":"hi"}}`),
		"read": []byte(`{"type":"tool_use","id":"r","name":"Read","input":{"file_path":"` + file + `"}}`),
	}
	for _, c := range []struct {
		name string
		held bool
	}{{"echo/none", false}, {"echo/10-labels", true}, {"read/none", false}, {"read/10-labels", true}} {
		held, line := c.held, lines[strings.Split(c.name, "/")[0]]
		b.Run(c.name, func(b *testing.B) {
			g, _ := newGateway(b, body.String(), nil)
			g.log = slog.New(slog.DiscardHandler)
			if held {
				g.session = &session{}
				for i := range 1000 {
					g.session.gain([]string{fmt.Sprintf("l%d", i%10)}, "Read", fmt.Sprint(i), "/tmp/x")
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			if r := g.Handle(ctx, line); bytes.Contains(r, []byte(`"is_error":true`)) {
				b.Fatalf("the call failed: %s", r)
			}
			for b.Loop() {
				g.Handle(ctx, line)
			}
		})
	}
}
