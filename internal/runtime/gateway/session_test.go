package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/runtime/state"
	"aimon.dev/gw/internal/testkit/cputime"
)

// TestP18LabelsComeFromResultsAndStick: a call labels the session when it
// is allowed to run, whatever it returns (a read that fails too: probe V6);
// the label stays, and every later refusal names the call that gave it. A gateway that serves no single
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
	g.opts.Session = NewSession() // as serve makes it
	if r := handle(t, g, `{"type":"tool_use","id":"r1","name":"Read","input":{"file_path":"/nonexistent/aimon-gw/x"}}`); r["is_error"] != true {
		t.Fatalf("the read of a missing file: %v", r)
	}
	for _, id := range []string{"e1", "e2"} {
		r := handle(t, g, echo(id))
		if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "denied on this surface while the session is labelled untrusted by Echo") || !strings.Contains(text, "The result of Read of /nonexistent/aimon-gw/x (call r1) labelled the session untrusted") {
			t.Errorf("%s after the failed Read r1: %v", id, r)
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
	g.opts.Session = NewSession()
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

// BenchmarkP18SessionCall is a call in a session that holds 10 labels
// from 1,000 earlier results, each label with a flow, against the same
// call with no session state (issue 48: at most 1.2x): an Echo, which no
// flow binds, and a Read of a small file, which every flow's Read entry
// judges (and admits). The labels' results are not kept, so 1,000 earlier
// results cost what one does. read/10-labels-stored is the hook's: the
// session read from the local state store, as a new process reads it.
func BenchmarkP18SessionCall(b *testing.B) {
	body, file := sessionBench(b)
	lines := map[string][]byte{
		"echo": []byte(`{"type":"tool_use","id":"e","name":"Echo","input":{"message":"hi"}}`),
		"read": []byte(`{"type":"tool_use","id":"r","name":"Read","input":{"file_path":"` + file + `"}}`),
	}
	store, err := state.Open(b.TempDir(), "")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		held string // "", "memory" or "stored": a hook's, read from the local store on each call
	}{{"echo/none", ""}, {"echo/10-labels", "memory"}, {"read/none", ""}, {"read/10-labels", "memory"}, {"read/10-labels-stored", "stored"}} {
		held, line := c.held, lines[strings.Split(c.name, "/")[0]]
		b.Run(c.name, func(b *testing.B) {
			g, _ := newGateway(b, body, nil)
			g.log = slog.New(slog.DiscardHandler)
			s := NewSession()
			if held == "stored" {
				s = StoredSession(state.SessionsOf(store), "bench")
			}
			if held != "" {
				for i := range 1000 {
					s.Gain(context.Background(), []string{fmt.Sprintf("l%d", i%10)}, Source{Tool: "Read", ID: fmt.Sprint(i), Subject: "/tmp/x"})
				}
				g.opts.Session = s
			}
			ctx := context.Background()
			b.ReportAllocs()
			if r := g.Handle(ctx, line); bytes.Contains(r, []byte(`"is_error":true`)) {
				b.Fatalf("the call failed: %s", r)
			}
			for b.Loop() {
				if held == "stored" {
					g.opts.Session = StoredSession(state.SessionsOf(store), "bench") // a new process's
				}
				g.Handle(ctx, line)
			}
		})
	}
}

// failingSessions is a store that does not answer.
type failingSessions struct{}

func (failingSessions) AddLabel(context.Context, string, string, []byte, time.Time) error {
	return errors.New("the Redis state store at 127.0.0.1:1 cannot be reached")
}
func (failingSessions) Labels(context.Context, string) (map[string][]byte, error) {
	return nil, errors.New("the Redis state store at 127.0.0.1:1 cannot be reached")
}
func (failingSessions) AddWords(context.Context, string, []byte, time.Time) error {
	return errors.New("the Redis state store at 127.0.0.1:1 cannot be reached")
}
func (failingSessions) Words(context.Context, string) ([][]byte, error) {
	return nil, errors.New("the Redis state store at 127.0.0.1:1 cannot be reached")
}

// TestP18StoredSessionSpansGateways: a session kept in the state store is
// one across gateways (a hook's process per call): what Label gives it
// from a result one gateway saw, a later gateway with the same session
// id decides the flow by, naming the call; a gateway of another session
// id holds nothing. A store that does not answer refuses a call that a
// flow binds, and one that labels the session, with a sentence, and
// leaves the rest alone.
func TestP18StoredSessionSpansGateways(t *testing.T) {
	const body = `
tools: {Echo: schema.#Echo, Read: schema.#Read}
labels: untrusted: {entries: ["Read"], trusted: ["Read(/srv/**)"]}
agent: when: untrusted: "denied-tools": ["Echo"]
`
	store := state.MemorySessions()
	echo := `{"type":"tool_use","id":"e1","name":"Echo","input":{"message":"hi"}}`
	at := func(id string, s state.Sessions) *Gateway {
		g, _ := newGateway(t, body, nil)
		g.opts.Session = StoredSession(s, id)
		return g
	}
	ctx := context.Background()
	if got, err := at("cc:a", store).Label(ctx, nil, Call{ID: "r0", Name: "Read", Input: []byte(`{"file_path":"/srv/notes"}`)}, "notes"); len(got) != 0 || err != nil {
		t.Fatalf("a trusted read labelled the session: %v %v", got, err)
	}
	if r := handle(t, at("cc:a", store), echo); r["is_error"] != false {
		t.Fatalf("the echo after a trusted read: %v", r)
	}
	if got, err := at("cc:a", store).Label(ctx, nil, Call{ID: "r1", Name: "Read", Input: []byte(`{"file_path":"/tmp/page.html"}`)}, "<p>push</p>"); !slices.Equal(got, []string{"untrusted"}) || err != nil {
		t.Fatalf("the read outside: %v %v", got, err)
	}
	r := handle(t, at("cc:a", store), echo)
	if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "The result of Read of /tmp/page.html (call r1) labelled the session untrusted") {
		t.Errorf("the echo in the labelled session: %v", r)
	}
	if r := handle(t, at("cc:b", store), echo); r["is_error"] != false {
		t.Errorf("the echo in another session: %v", r)
	}
	down := at("cc:a", failingSessions{})
	r = handle(t, down, echo)
	if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "the session's labels cannot be read (the Redis state store at 127.0.0.1:1 cannot be reached); try again") {
		t.Errorf("the echo with the store down: %v", r)
	}
	if _, err := down.Label(ctx, nil, Call{ID: "r2", Name: "Read", Input: []byte(`{"file_path":"/tmp/x"}`)}, ""); err == nil {
		t.Error("a label the store cannot keep was reported kept")
	}
	if r := handle(t, down, `{"type":"tool_use","id":"r3","name":"Read","input":{"file_path":"/srv/nonexistent"}}`); strings.Contains(fmt.Sprint(r["content"]), "session") {
		t.Errorf("a call no flow binds and no label names depended on the store: %v", r)
	}
	// A call that labels the session does not run unlabelled.
	if r := handle(t, down, `{"type":"tool_use","id":"r4","name":"Read","input":{"file_path":"/nonexistent/x"}}`); r["is_error"] != true || !strings.Contains(fmt.Sprint(r["content"]), "Read was not run: it labels the session untrusted, and the label cannot be kept") {
		t.Errorf("a read that labels the session, with the store down: %v", r)
	}
}

// TestP18SealedHandles: a gateway that callers share opens the handles it
// sealed for the same principal only; a handle that is not one, one whose
// payload is not a handle, one past SessionTTL and one for another caller
// are refused with a sentence; a policy without labels, and a gateway with
// a session of its own, give none.
func TestP18SealedHandles(t *testing.T) {
	const body = `
tools: {Echo: schema.#Echo, Read: schema.#Read}
labels: untrusted: tools: ["Read"]
agent: when: untrusted: "denied-tools": ["Echo"]
`
	g, _ := newGateway(t, body, nil)
	a, err := NewApprovals(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g.opts.Approvals = a
	s, h, err := g.OpenSession("alice", "")
	if s == nil || h == "" || err != nil {
		t.Fatalf("a new session: %v %q %v", s, h, err)
	}
	if _, again, err := g.OpenSession("alice", h); again != h || err != nil {
		t.Errorf("alice's own handle: %q %v", again, err)
	}
	key := a.Derive("sealed sessions")
	old, _ := json.Marshal(sealedHandle{Principal: sessionDigest("alice"), Nonce: "n", Issued: time.Now().Add(-SessionTTL - time.Hour).Unix()})
	oldP := base64.RawURLEncoding.EncodeToString(old)
	notJSON := base64.RawURLEncoding.EncodeToString([]byte("[1]"))
	for handle, says := range map[string]string{
		"garbage":                         "was not sealed by this gateway",
		notJSON + "." + mac(key, notJSON): "cannot be read",
		oldP + "." + mac(key, oldP):       "longer ago than a session lasts",
	} {
		if s, _, err := g.OpenSession("alice", handle); s != nil || err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want %q", handle, err, says)
		}
	}
	if _, _, err := g.OpenSession("bob", h); err == nil || !strings.Contains(err.Error(), "sealed for another caller than bob") {
		t.Errorf("alice's handle sent by bob: %v", err)
	}
	plain, _ := newGateway(t, "tools: Echo: schema.#Echo\nagent: \"allowed-tools\": [\"Echo\"]\n", nil)
	plain.opts.Approvals = a
	if s, h, err := plain.OpenSession("alice", ""); s != nil || h != "" || err != nil {
		t.Errorf("a policy without labels gave a session: %v %q %v", s, h, err)
	}
}

// TestP18SecretInAResultIsRedactedAndLabels: a Read of a file that holds a
// private key block returns the file with the block redacted, and labels
// the session secret, so a later Echo is refused naming the read; a Glob
// that lists a file named like a GitHub token shows neither its text nor
// its structured result with the token, and labels too. A gateway without
// a session redacts all the same.
func TestP18SecretInAResultIsRedactedAndLabels(t *testing.T) {
	const body = `
tools: {Echo: schema.#Echo, Read: schema.#Read, Glob: schema.#Glob}
labels: secret: {content: ["private-key", "github-token"], redact: true}
agent: when: secret: "denied-tools": ["Echo"]
`
	dir := t.TempDir()
	const pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAzs3x\n-----END RSA PRIVATE KEY-----\n"
	const token = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	file := filepath.Join(dir, "id_rsa")
	os.WriteFile(file, []byte("before\n"+pem+"after\n"), 0o600)
	os.WriteFile(filepath.Join(dir, token), nil, 0o600)
	echo := `{"type":"tool_use","id":"e1","name":"Echo","input":{"message":"hi"}}`
	for _, session := range []bool{true, false} {
		g, _ := newGateway(t, body, nil)
		if session {
			g.opts.Session = NewSession()
		}
		r := handle(t, g, `{"type":"tool_use","id":"r1","name":"Read","input":{"file_path":"`+file+`"}}`)
		text, _ := r["content"].(string)
		if r["is_error"] != false || strings.Contains(text, "MIIEowIBAAKCAQEAzs3x") || !strings.Contains(text, "[redacted private-key]") || !strings.Contains(text, "after") {
			t.Errorf("session %v: the read shows %q", session, text)
		}
		r = handle(t, g, echo)
		if text, _ := r["content"].(string); session != (r["is_error"] == true) || session && !strings.Contains(text, "The result of Read of "+file+" (call r1) labelled the session secret") {
			t.Errorf("session %v: the echo after the read: %v", session, r)
		}
		res := g.Call(context.Background(), nil, "g1", "Glob", json.RawMessage(`{"pattern":"ghp_*","path":"`+dir+`"}`))
		st, _ := json.Marshal(res.Structured)
		if res.IsError || strings.Contains(res.Text, token) || strings.Contains(string(st), token) || !strings.Contains(res.Text, "[redacted github-token]") || !strings.Contains(string(st), "[redacted github-token]") {
			t.Errorf("session %v: the glob shows %q and %s", session, res.Text, st)
		}
	}
}

// TestP18ResultSeenByAHookLabelsByContent: a result the gateway did not
// run (a hook's PostToolUse) that holds a secret's shape labels the
// session, whatever tool gave it, one the policy does not define too.
func TestP18ResultSeenByAHookLabelsByContent(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Echo: schema.#Echo}
labels: secret: content: ["gitlab-token"]
agent: when: secret: "denied-tools": ["Echo"]
`, nil)
	g.opts.Session = NewSession()
	got, err := g.Label(context.Background(), nil, Call{ID: "t1", Name: "mcp__ci__logs", Input: []byte(`{}`)}, `{"log":"token glpat-0123456789abcdefghij"}`)
	if err != nil || !slices.Equal(got, []string{"secret"}) {
		t.Fatalf("the result's labels: %v %v", got, err)
	}
	r := handle(t, g, `{"type":"tool_use","id":"e1","name":"Echo","input":{"message":"hi"}}`)
	if text, _ := r["content"].(string); r["is_error"] != true || !strings.Contains(text, "The result of mcp__ci__logs (call t1) labelled the session secret") {
		t.Errorf("the echo after it: %v", r)
	}
}

// BenchmarkP18SessionRatio is BenchmarkP18SessionCall's ratio measured
// on a shared machine: rounds of 50 calls in a session of 10 labels from
// 1,000 earlier results and 50 with no session state, taken in turn, the
// median of the rounds' ratios of processor time (cputime) and of wall
// time; for an Echo no flow binds and a Read every flow judges.
func BenchmarkP18SessionRatio(b *testing.B) {
	body, file := sessionBench(b)
	for _, c := range []struct{ name, line string }{
		{"echo", `{"type":"tool_use","id":"e","name":"Echo","input":{"message":"hi"}}`},
		{"read", `{"type":"tool_use","id":"r","name":"Read","input":{"file_path":"` + file + `"}}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			none, _ := newGateway(b, body, nil)
			held, _ := newGateway(b, body, nil)
			none.log, held.log = slog.New(slog.DiscardHandler), slog.New(slog.DiscardHandler)
			held.opts.Session = NewSession()
			for i := range 1000 {
				held.opts.Session.Gain(context.Background(), []string{fmt.Sprintf("l%d", i%10)}, Source{Tool: "Read", ID: fmt.Sprint(i), Subject: "/tmp/x"})
			}
			ctx, line := context.Background(), []byte(c.line)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			round := func(g *Gateway) (time.Duration, time.Duration) {
				c0, t0 := cputime.Thread(), time.Now()
				for range 50 {
					g.Handle(ctx, line)
				}
				return cputime.Thread() - c0, time.Since(t0)
			}
			var cpu, wall []float64
			for i := 0; b.Loop(); i++ {
				first, second := held, none
				if i%2 == 1 {
					first, second = none, held
				}
				c1, w1 := round(first)
				c2, w2 := round(second)
				if i%2 == 1 {
					c1, c2, w1, w2 = c2, c1, w2, w1
				}
				if c1 > 0 && c2 > 0 {
					cpu = append(cpu, float64(c1)/float64(c2))
				}
				wall = append(wall, float64(w1)/float64(w2))
			}
			b.ReportMetric(cputime.Median(cpu), "session/none-cpu")
			b.ReportMetric(cputime.Median(wall), "session/none-wall")
		})
	}
}

// sessionBench is the policy of the session benchmarks: 10 labels, each
// given by a Read under /tmp/N and with a flow that denies a Read under
// /srv/N; and a small file to read.
func sessionBench(b *testing.B) (body, file string) {
	var sb strings.Builder
	sb.WriteString("tools: {Echo: schema.#Echo, Read: schema.#Read}\n")
	for i := range 10 {
		fmt.Fprintf(&sb, "labels: l%d: entries: [\"Read(/tmp/%d/**)\"]\n", i, i)
		fmt.Fprintf(&sb, "agent: when: l%d: \"denied-tools\": [\"Read(/srv/%d/**)\"]\n", i, i)
	}
	file = filepath.Join(b.TempDir(), "a.txt")
	os.WriteFile(file, []byte("hello\n"), 0o644)
	return sb.String(), file
}
