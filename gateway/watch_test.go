package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

const watchedPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read}
agent: "allowed-tools": ["Echo", "Read"]
`

// watch starts a gateway following the policy src written in a directory.
func watch(t *testing.T, src string, o gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	dir := writePolicy(t, src)
	if o.Workdir == "" {
		o.Workdir = t.TempDir()
	}
	gw, err := gateway.Watch(t.Context(), dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return gw, dir
}

// TestR3WatchedGatewayFollowsItsFiles: an edit of a watched gateway's
// policy goes in force for the calls after it (rule R3), an edit that does
// not load leaves the policy in force, and Policy is the one in force.
func TestR3WatchedGatewayFollowsItsFiles(t *testing.T) {
	gw, dir := watch(t, watchedPolicy, gateway.Options{Settle: 10 * time.Millisecond})
	echo := gateway.Call{Name: "Echo", Input: input(`{"message":"hi"}`)}
	if d := gw.Decide(t.Context(), echo); !d.Allowed {
		t.Fatalf("Echo is refused before the edit: %s", d.Reason)
	}
	first := gw.Policy().Revision()
	if got := strings.Join(gw.Policy().Tools(), ","); got != "Echo,Read" {
		t.Errorf("Policy().Tools() = %s, want Echo,Read", got)
	}
	edit := func(src string) {
		if err := os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A broken edit first: it is logged and leaves Echo allowed, which the
	// sound edit after it then refuses.
	edit("package policy\n\ntools: {")
	edit(strings.Replace(watchedPolicy, `["Echo", "Read"]`, `["Read"]`, 1))
	for deadline := time.Now().Add(time.Minute); gw.Decide(t.Context(), echo).Allowed; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the edit that drops Echo never went in force")
		}
	}
	if d := gw.Decide(t.Context(), echo); d.Rule != "P9" {
		t.Errorf("Echo after the edit: %s %s, want a P9 refusal", d.Rule, d.Reason)
	}
	if gw.Policy().Revision() == first {
		t.Error("Policy() is still the first revision after the edit went in force")
	}
}

// TestR10WatchedGatewayRecordsAndServes: a watched gateway answers the
// line protocol as aimon-gw serve does, recording each call in the
// decision log the program opened, before its result (rule R10); the log
// stays open after Close, for the program to close.
func TestR10WatchedGatewayRecordsAndServes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	dlog, err := gateway.OpenDecisionLog(path, gateway.DecisionLogOptions{Calls: true})
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := watch(t, watchedPolicy, gateway.Options{Decisions: dlog})
	var out strings.Builder
	in := `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"hi"}}` + "\n" +
		`{"type":"tool_use","id":"b","name":"Bash","input":{"command":"true"}}` + "\n"
	if err := gw.Serve(t.Context(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"tool_result","tool_use_id":"a","content":"hi","is_error":false}`
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || lines[0] != want || !strings.Contains(lines[1], `"is_error":true`) {
		t.Errorf("Serve answered:\n%s\nwant %s and a refusal of Bash", out.String(), want)
	}
	gw.Close()
	if err := dlog.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var r struct {
			Phase  string          `json:"phase"`
			CallID string          `json:"call_id"`
			Input  json.RawMessage `json:"input"`
		}
		json.Unmarshal(sc.Bytes(), &r)
		got = append(got, r.CallID+":"+r.Phase)
		if r.CallID == "a" && r.Phase == "running" && len(r.Input) == 0 {
			t.Errorf("DecisionLogOptions.Calls recorded no call: %s", sc.Text())
		}
	}
	if want := "a:running a:result b:decided"; strings.Join(got, " ") != want {
		t.Errorf("the decision log has %v, want %s", got, want)
	}
}

// TestR3WatchRefusesBadInput: every input Watch cannot serve is a sentence
// of its kind (ErrPolicy, ErrSurface, an option's), and nothing is started;
// a watched gateway's policy is its files', which Swap and Register refuse
// to change.
func TestR3WatchRefusesBadInput(t *testing.T) {
	dir := writePolicy(t, watchedPolicy)
	broken := writePolicy(t, "package policy\n\ntools: {")
	for _, tc := range []struct {
		note string
		dir  string
		o    gateway.Options
		kind error
		want string
	}{
		{"a policy that does not load", broken, gateway.Options{}, gateway.ErrPolicy, "policy.cue"},
		{"no such directory", filepath.Join(dir, "nosuch"), gateway.Options{}, gateway.ErrPolicy, "nosuch"},
		{"an undeclared surface", dir, gateway.Options{Surface: []string{"agent", "subagent:nosuch"}}, gateway.ErrSurface, "nosuch"},
		{"an empty surface", dir, gateway.Options{Surface: []string{}}, nil, "Options.Surface is empty"},
		{"a state store of no kind", dir, gateway.Options{State: "ftp://x"}, nil, "neither a directory nor a redis://"},
		{"a short key", dir, gateway.Options{ApprovalKey: []byte("short")}, nil, "Options.ApprovalKey"},
		{"two logs", dir, gateway.Options{DecisionLog: "x", Decisions: &gateway.DecisionLog{}}, nil, "two decision logs"},
		{"a log in no directory", dir, gateway.Options{DecisionLog: "/no/such/dir/log"}, nil, "Options.DecisionLog"},
	} {
		tc.o.Workdir = t.TempDir()
		gw, err := gateway.Watch(t.Context(), tc.dir, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a sentence with %q", tc.note, err, tc.want)
		}
		if tc.kind != nil && !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v is not %v", tc.note, err, tc.kind)
		}
		for _, kind := range []error{gateway.ErrPolicy, gateway.ErrSurface} {
			if kind != tc.kind && errors.Is(err, kind) {
				t.Errorf("%s: %v is %v too", tc.note, err, kind)
			}
		}
		if gw != nil {
			t.Errorf("%s: a gateway was returned with the error", tc.note)
		}
	}
	var errs policy.Errors
	if _, err := gateway.Watch(t.Context(), broken, gateway.Options{Workdir: t.TempDir()}); !errors.As(err, &errs) || len(errs) == 0 || errs[0].Pos.Line == 0 {
		t.Errorf("a policy that does not load: %v holds no policy.Errors with a place", err)
	}
	if _, err := gateway.OpenDecisionLog("/no/such/dir/log", gateway.DecisionLogOptions{}); err == nil || !strings.Contains(err.Error(), "/no/such/dir/log") {
		t.Errorf("OpenDecisionLog in no directory: %v, want a sentence naming the file", err)
	}

	gw, _ := watch(t, watchedPolicy, gateway.Options{})
	if err := gw.Swap(gw.Policy()); err == nil || !strings.Contains(err.Error(), "follows its policy directory") {
		t.Errorf("Swap of a watched gateway: %v, want a refusal", err)
	}
	if err := gw.Register("Echo", tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result { return tools.Result{} })); err == nil || !strings.Contains(err.Error(), "follows its policy directory") {
		t.Errorf("Register on a watched gateway: %v, want a refusal", err)
	}
}

// TestR2ServeMCPBadFrames: ServeMCP answers a frame it cannot take and
// goes on (rule R2): a member named twice under the frame's own id, a
// frame past Options.MaxLineBytes and a line that is not JSON with an
// error each; the call after them is answered, and nothing but answers is
// written.
func TestR2ServeMCPBadFrames(t *testing.T) {
	gw, _ := watch(t, watchedPolicy, gateway.Options{MaxLineBytes: 512})
	frames := []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Echo","name":"Read","arguments":{"message":"x"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"` + strings.Repeat("a", 600) + `"}}}`,
		`not json`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Echo","arguments":{"message":"after"}}}`,
	}
	var out strings.Builder
	if err := gw.ServeMCP(t.Context(), strings.NewReader(strings.Join(frames, "\n")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	var nulls []string // the errors of frames whose id cannot be read
	answers := map[string]map[string]any{}
	for line := range strings.Lines(out.String()) {
		var a map[string]any
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("ServeMCP wrote what is not JSON-RPC: %q", line)
		}
		if a["id"] == nil {
			nulls = append(nulls, string(mustJSON(a["error"])))
			continue
		}
		answers[string(mustJSON(a["id"]))] = a
	}
	if a := answers["1"]; a == nil || !strings.Contains(string(mustJSON(a["error"])), "twice") {
		t.Errorf("the frame naming a member twice has no error answer under its id: %v", a)
	}
	if a := answers["2"]; a != nil {
		t.Errorf("the frame past the bound was answered as read: %v", a)
	}
	if len(nulls) != 2 || !strings.Contains(nulls[0], "longer than the limit of 512 bytes") || !strings.Contains(nulls[1], "not valid JSON") {
		t.Errorf("the frame past the bound and the line that is not JSON: %v, want an error each", nulls)
	}
	if r, _ := answers["3"]["result"].(map[string]any); r == nil || r["isError"] == true || !strings.Contains(string(mustJSON(r["content"])), "after") {
		t.Errorf("the call after the bad frames: %v", answers["3"])
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// TestR5ListenRefusesBadInput: Listen serves no one until every caller
// authenticates (rule R5), and each option it cannot serve is a sentence
// that names it; nothing listens then.
func TestR5ListenRefusesBadInput(t *testing.T) {
	dir := writePolicy(t, watchedPolicy)
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("sha256:00 alice\n"), 0o644) // readable by others
	for _, tc := range []struct {
		note string
		o    gateway.Options
		l    gateway.ListenOptions
		want string
	}{
		{"no address", gateway.Options{}, gateway.ListenOptions{Tokens: tokens}, "ListenOptions.Addr is empty"},
		{"no one authenticates", gateway.Options{}, gateway.ListenOptions{Addr: "127.0.0.1:0"}, "every caller must authenticate"},
		{"two ways of knowing callers", gateway.Options{}, gateway.ListenOptions{Addr: "127.0.0.1:0", Tokens: tokens, Issuer: "https://idp.example"}, "two ways of knowing callers"},
		{"an issuer without an audience", gateway.Options{}, gateway.ListenOptions{Addr: "127.0.0.1:0", Issuer: "https://idp.example"}, "needs Resource"},
		{"a certificate without its key", gateway.Options{}, gateway.ListenOptions{Addr: "127.0.0.1:0", Tokens: tokens, TLSCert: "cert.pem"}, "go together"},
		{"a tokens file others may read", gateway.Options{Workdir: t.TempDir()}, gateway.ListenOptions{Addr: "127.0.0.1:0", Tokens: tokens}, "may be read or written by others (mode 0644); chmod 600 it."},
		{"two logs", gateway.Options{DecisionLog: "x", Decisions: &gateway.DecisionLog{}}, gateway.ListenOptions{Addr: "127.0.0.1:0", Tokens: tokens}, "two decision logs"},
	} {
		err := gateway.Listen(t.Context(), dir, tc.o, tc.l)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a sentence with %q", tc.note, err, tc.want)
		}
	}
}
