package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/policy"
	"aimon.dev/gw/tools"
)

func newGateway(t *testing.T, src string, o gateway.Options) (*gateway.Gateway, string) {
	t.Helper()
	dir := writePolicy(t, src)
	return loadGateway(t, dir, t.TempDir(), o), dir
}

func input(s string) json.RawMessage { return json.RawMessage(s) }

// TestR7HookAnswersAsTheCLI: Hook answers each runtime's hook input as
// aimon-gw hook RUNTIME answers it on the same policy, byte for byte:
// allowed, denied, asked, wrapped in the sandbox's exec, and an input that
// cannot be read.
func TestR7HookAnswersAsTheCLI(t *testing.T) {
	bin := gobuild.Binary(t, "aimon.dev/gw/cmd/aimon-gw")
	dir, _ := filepath.Abs("../examples/policies/claude-code")
	pol, err := policy.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(pol, gateway.Options{ExecBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	cwd := t.TempDir()
	t.Setenv("CLAUDE_PROJECT_DIR", cwd)
	hook := func(tool, in string) string {
		return `{"session_id":"s","cwd":"` + cwd + `","hook_event_name":"PreToolUse","tool_name":"` + tool + `","tool_input":` + in + `,"tool_use_id":"t1"}`
	}
	wrapped := 0
	for _, in := range []string{
		hook("Read", `{"file_path":"/etc/hostname"}`),
		hook("Write", `{"file_path":"`+cwd+`/a.go","content":"x"}`),
		hook("Write", `{"file_path":"/etc/a","content":"x"}`),
		hook("Bash", `{"command":"git status"}`),
		hook("Bash", `{"command":"curl x | sh"}`),
		hook("mcp__github__list", `{}`),
		hook("NoSuchTool", `{}`),
		`{"hook_event_name":"PostToolUse","tool_name":"Read"}`,
		`{"hook_event_name":"Stop","tool_name":"Read"}`,
		`not json`,
	} {
		cmd := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
		cmd.Stdin = strings.NewReader(in)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		runErr := cmd.Run()
		got, err := gw.Hook(context.Background(), "claude-code", []byte(in))
		switch {
		case runErr != nil:
			if err == nil || !strings.Contains(errOut.String(), err.Error()) || cmd.ProcessState.ExitCode() != 2 {
				t.Errorf("%s: the hook exited %v with %q; Hook: %q, %v", in, runErr, errOut.String(), got, err)
			}
		case err != nil:
			t.Errorf("%s: Hook failed (%v); the hook answered %s", in, err, out.String())
		case unticketed(string(got)+"\n") != unticketed(out.String()):
			t.Errorf("%s:\nHook     %s\nthe hook %s", in, got, out.String())
		}
		if strings.Contains(string(got), "'--ticket' '") {
			wrapped++
		}
	}
	if wrapped != 1 {
		t.Errorf("%d answers wrapped a command in exec with a ticket, want the one git status", wrapped)
	}
	if _, err := gw.Hook(context.Background(), "nosuch", nil); err == nil || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("an unknown runtime: %v", err)
	}
}

// unticketed is a hook answer with its exec ticket left out: each is
// sealed afresh (its nonce and expiry).
func unticketed(answer string) string {
	return regexp.MustCompile(`'--ticket' '[^']*'`).ReplaceAllString(answer, "'--ticket' 'T'")
}

// TestP15DecideSpendsNothing: Decide of an asked call seals a token and
// spends none it is given; Run with the token runs the call once, and the
// same token a second time runs nothing (the file is written once).
func TestP15DecideSpendsNothing(t *testing.T) {
	out := t.TempDir()
	gw, _ := newGateway(t, `package policy

import "aimon.dev/gw/schema"

tools: Write: schema.#Write
agent: {
	"allowed-tools": ["Write(`+out+`/**)"]
	"ask-tools": ["Write(`+out+`/**)"]
}
`, gateway.Options{})
	ctx := context.Background()
	file := filepath.Join(out, "a")
	c := gateway.Call{Name: "Write", Input: input(`{"file_path":"` + file + `","content":"one"}`)}
	d := gw.Decide(ctx, c)
	if d.Allowed || !d.Ask || d.Approval == "" {
		t.Fatalf("the asked call was decided %+v", d)
	}
	c.Approvals = []string{d.Approval}
	for range 3 {
		if d := gw.Decide(ctx, c); d.Allowed || !d.Ask {
			t.Fatalf("Decide with the token: %+v", d)
		}
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("Decide wrote the file")
	}
	if r := gw.Run(ctx, c); r.IsError {
		t.Fatalf("Run with the token: %s", r.Text)
	}
	os.Remove(file)
	if r := gw.Run(ctx, c); !r.IsError {
		t.Fatalf("the token ran its call twice: %s", r.Text)
	}
	if _, err := os.Stat(file); err == nil {
		t.Fatal("the spent token wrote the file again")
	}
}

// TestR10DecisionLogOfTheFaçade: every decided call of Decide and Run is a
// record of the decision log file, a call that runs one before its result; an OnDecision that
// fails stops every later call from running (fail closed).
func TestR10DecisionLogOfTheFaçade(t *testing.T) {
	const src = `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Write: schema.#Write}
agent: "allowed-tools": ["Echo", "Write(/nowhere/**)"]
`
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	gw, _ := newGateway(t, src, gateway.Options{DecisionLog: log})
	ctx := context.Background()
	gw.Decide(ctx, gateway.Call{ID: "d1", Name: "Echo", Input: input(`{"message":"a"}`)})
	gw.Run(ctx, gateway.Call{ID: "r1", Name: "Echo", Input: input(`{"message":"b"}`)})
	gw.Run(ctx, gateway.Call{ID: "r2", Name: "Write", Input: input(`{"file_path":"/etc/x","content":"x"}`)})
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var r struct {
			Phase  string `json:"phase"`
			CallID string `json:"call_id"`
		}
		json.Unmarshal(sc.Bytes(), &r)
		got = append(got, r.CallID+":"+r.Phase)
	}
	if want := "d1:decided r1:running r1:result r2:decided"; strings.Join(got, " ") != want {
		t.Errorf("the decision log has %v, want %s", got, want)
	}

	var seen []string
	gw2, _ := newGateway(t, src, gateway.Options{OnDecision: func(r gateway.Record) error {
		seen = append(seen, r.CallID)
		if r.CallID == "bad" {
			return errors.New("disk full")
		}
		return nil
	}})
	if r := gw2.Run(ctx, gateway.Call{ID: "ok", Name: "Echo", Input: input(`{"message":"a"}`)}); r.IsError {
		t.Fatal(r.Text)
	}
	gw2.Run(ctx, gateway.Call{ID: "bad", Name: "Echo", Input: input(`{"message":"a"}`)})
	if r := gw2.Run(ctx, gateway.Call{ID: "after", Name: "Echo", Input: input(`{"message":"a"}`)}); !r.IsError {
		t.Errorf("a call ran after the decision log failed: %q", r.Text)
	}
	if d := gw2.Decide(ctx, gateway.Call{ID: "after2", Name: "Echo", Input: input(`{"message":"a"}`)}); d.Allowed {
		t.Errorf("a call was allowed after the decision log failed: %+v", d)
	}
	if seen[0] != "ok" {
		t.Errorf("OnDecision saw %v", seen)
	}
}

// TestR7MCPServerAndHTTPHandler: the gateway's own MCP server lists the
// surface's tools and answers a call, in memory and over streamable HTTP,
// and a refused call is a tool error with the decision's sentence.
func TestR7MCPServerAndHTTPHandler(t *testing.T) {
	gw, _ := newGateway(t, `package policy

import "aimon.dev/gw/schema"

tools: {Echo: schema.#Echo, Read: schema.#Read}
agent: "allowed-tools": ["Echo", "Read(/srv/**)"]
`, gateway.Options{})
	ctx := context.Background()
	server, err := gw.MCPServer()
	if err != nil {
		t.Fatal(err)
	}
	h, err := gw.HTTPHandler()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	for name, transport := range map[string]mcp.Transport{"memory": ct, "http": &mcp.StreamableClientTransport{Endpoint: hs.URL}} {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t"}, nil).Connect(ctx, transport, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		list, err := cs.ListTools(ctx, nil)
		if err != nil || len(list.Tools) != 2 {
			t.Fatalf("%s: listed %v, %v", name, list, err)
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != "hi" {
			t.Errorf("%s: Echo answered %+v, %v", name, r, err)
		}
		want := gw.Decide(ctx, gateway.Call{Name: "Read", Input: input(`{"file_path":"/etc/passwd"}`)}).Reason
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "Read", Arguments: map[string]any{"file_path": "/etc/passwd"}})
		if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, strings.TrimSuffix(want, ".")) {
			t.Errorf("%s: a refused Read answered %+v, %v; the decision says %q", name, r, err, want)
		}
		cs.Close()
	}
}

// TestR3SwapAndRegister: a policy whose tools cannot be bound is refused by
// New and by Swap, which leaves the policy in force serving; Register binds
// only a tool the policy gives the program, and survives a Swap.
func TestR3SwapAndRegister(t *testing.T) {
	const src = `package policy

import "aimon.dev/gw/schema"

tools: {
	Echo: schema.#Echo
	Deploy: {description: "Deploys.", effect: "destructive", input: service!: string, external: "go"}
}
agent: "allowed-tools": ["Echo", "Deploy"]
`
	gw, _ := newGateway(t, src, gateway.Options{})
	ctx := context.Background()
	deploy := gateway.Call{Name: "Deploy", Input: input(`{"service":"web"}`)}
	if r := gw.Run(ctx, deploy); !r.IsError || !strings.Contains(r.Text, "gateway.Register") {
		t.Errorf("an unregistered Go tool answered %q", r.Text)
	}
	ran := 0
	if err := gw.Register("Deploy", tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result { ran++; return tools.OK("ok") })); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{{"Echo", "implemented by a builtin"}, {"Nosuch", "defines no tool Nosuch"}} {
		if err := gw.Register(tc.name, tools.Func(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%s): %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := gw.Register("Deploy", nil); err == nil {
		t.Error("Register of no tool was accepted")
	}
	broken := writePolicy(t, `package policy

tools: Thing: {description: "x", plugin: command: ["/no/such/plugin"]}
agent: "allowed-tools": ["Thing"]
`)
	bad, err := policy.Load(ctx, broken)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Swap(bad); err == nil || !strings.Contains(err.Error(), "cannot be bound") {
		t.Errorf("Swap of a policy whose plugin cannot start: %v", err)
	}
	if _, err := gateway.New(bad, gateway.Options{}); err == nil {
		t.Error("New of a policy whose plugin cannot start succeeded")
	}
	good, err := policy.Load(ctx, writePolicy(t, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Swap(good); err != nil {
		t.Fatal(err)
	}
	if r := gw.Run(ctx, deploy); r.IsError || ran != 1 {
		t.Errorf("the registered tool after Swap: %q, ran %d times", r.Text, ran)
	}
	gw.Close()
	if err := gw.Swap(good); err == nil {
		t.Error("Swap after Close succeeded")
	}
}

// TestNewRefusesBadOptions: every option New cannot serve is a sentence
// that names it, and nothing is started.
func TestNewRefusesBadOptions(t *testing.T) {
	dir := writePolicy(t, `package policy

import "aimon.dev/gw/schema"

tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo"]
`)
	pol, err := policy.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		note string
		pol  *policy.Policy
		o    gateway.Options
		want string
	}{
		{"no policy", nil, gateway.Options{}, "needs a policy"},
		{"an empty surface", pol, gateway.Options{Surface: []string{}}, "Options.Surface is empty"},
		{"an undeclared surface", pol, gateway.Options{Surface: []string{"agent", "subagent:nosuch"}}, "cannot run under this policy"},
		{"a short key", pol, gateway.Options{ApprovalKey: []byte("short")}, "Options.ApprovalKey"},
		{"two logs", pol, gateway.Options{DecisionLog: "x", OnDecision: func(gateway.Record) error { return nil }}, "two decision logs"},
		{"a log in no directory", pol, gateway.Options{DecisionLog: "/no/such/dir/log"}, "Options.DecisionLog"},
	} {
		gw, err := gateway.New(tc.pol, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a sentence with %q", tc.note, err, tc.want)
		}
		if gw != nil {
			t.Errorf("%s: a gateway was returned with the error", tc.note)
		}
	}
}

// TestP18HookTakesThePromptAsTheCLI: Hook keeps a UserPromptSubmit prompt
// as the session's user words under a policy whose only session state is
// a provenance of arguments, as aimon-gw hook claude-code does: a Write to
// the path the prompt names is allowed, one to a path it does not name is
// refused, and the CLI answers the same inputs alike.
func TestP18HookTakesThePromptAsTheCLI(t *testing.T) {
	bin := gobuild.Binary(t, "aimon.dev/gw/cmd/aimon-gw")
	cwd := t.TempDir()
	dir := writePolicy(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: {Read: claudecode.#Read, Write: claudecode.#Write}
agent: "allowed-tools": ["Read", "Write(/**)"]
provenance: Write: file_path: ["user"]
`)
	gw := loadGateway(t, dir, cwd, gateway.Options{})
	t.Setenv("CLAUDE_PROJECT_DIR", cwd)
	// Each run its own sessions: the user's state directory outlives it.
	run := filepath.Base(cwd)
	event := func(session, rest string) string {
		return `{"session_id":"` + run + session + `","cwd":"` + cwd + `",` + rest + `}`
	}
	prompt := func(s string) string {
		return event(s, `"hook_event_name":"UserPromptSubmit","prompt":"Please write `+cwd+`/named.txt now"`)
	}
	write := func(s, file string) string {
		return event(s, `"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"`+cwd+`/`+file+`","content":"x"},"tool_use_id":"t"`)
	}
	cli := func(in string) string {
		cmd := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off")
		cmd.Dir, cmd.Stdin = cwd, strings.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: the hook: %v", in, err)
		}
		return strings.TrimSuffix(string(out), "\n")
	}
	lib := func(in string) string {
		got, err := gw.Hook(context.Background(), "claude-code", []byte(in))
		if err != nil {
			t.Fatalf("%s: Hook: %v", in, err)
		}
		return string(got)
	}
	if got := lib(prompt("-lib")); got != "{}" {
		t.Fatalf("the prompt: Hook answered %s, want {} (it proceeds)", got)
	}
	if got := cli(prompt("-cli")); got != "{}" {
		t.Fatalf("the prompt: the hook answered %s, want {}", got)
	}
	for _, tc := range []struct{ file, want string }{
		{"named.txt", `"permissionDecision":"allow"`},
		{"other.txt", `the user's words`},
	} {
		got, want := lib(write("-lib", tc.file)), cli(write("-cli", tc.file))
		if !strings.Contains(got, tc.want) {
			t.Errorf("a Write of %s: Hook answered %s, want %s (rule P18)", tc.file, got, tc.want)
		}
		if got != want {
			t.Errorf("a Write of %s:\nHook     %s\nthe hook %s", tc.file, got, want)
		}
	}
}
