package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/exec/builtin"
	"aimon.dev/gw/internal/runtime/provision"
	"aimon.dev/gw/internal/testkit/lockedbuf"
	"aimon.dev/gw/internal/testkit/policydir"
	"aimon.dev/gw/tools"
)

const header = "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n"

// fakePlugins stands in for a plugin host: it describes test tools and
// runs them in process, so the gateway's batching can be observed.
type fakePlugins map[string]tools.Tool

// Bind binds a plugin tool to the test tool of its name, declared as a
// plugin would declare it; a name starting with Seq is sequential.
func (f fakePlugins) Bind(_ context.Context, t *policy.Tool) (provision.Binding, error) {
	impl, ok := f[t.Plugin.Tool]
	if !ok {
		return provision.Binding{}, fmt.Errorf("no test tool %s", t.Plugin.Tool)
	}
	conc, intr := "concurrent_safe", "cooperative"
	if strings.HasPrefix(t.Plugin.Tool, "Seq") {
		conc = "sequential"
	}
	return provision.Binding{Tool: impl, Declared: &policy.Declared{
		InputSchema: []byte(`{"type":"object","properties":{"i":{"type":"integer"}}}`), Concurrency: conc, Interrupt: intr}}, nil
}

// registry is the built-ins and, when given, the fake plugins.
func registry(plugins fakePlugins) provision.Registry {
	r := provision.Registry{"builtin": provision.Builtins(builtin.Lookup)}
	if plugins != nil {
		r["plugin"] = plugins
	}
	return r
}

// provisioned provisions a loaded generation for a test.
func provisioned(t testing.TB, gen *policy.Generation, plugins fakePlugins) *provision.Generation {
	t.Helper()
	pg, err := registry(plugins).Provision(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

// newGateway loads the policy body and returns a gateway on it whose logs
// go to the returned buffer.
func newGateway(t testing.TB, body string, plugins fakePlugins) (*Gateway, *lockedbuf.Buffer) {
	t.Helper()
	gen, err := policy.Load(policydir.Write(t, map[string]string{"policy.cue": header + body}))
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o := Options{Workdir: t.TempDir(), Logger: log}
	return New(provisioned(t, gen, plugins), o), &logs
}

func handle(t *testing.T, g *Gateway, line string) map[string]any {
	t.Helper()
	out := g.Handle(context.Background(), []byte(line))
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("reply %q is not JSON: %v", out, err)
	}
	return m
}

func TestS9Modes(t *testing.T) {
	for _, mode := range []string{"off", "warn", "enforce"} {
		t.Run(mode, func(t *testing.T) {
			g, logs := newGateway(t, "validation: \""+mode+"\"\ntools: Echo: schema.#Echo\n", nil)
			r := handle(t, g, `{"type":"tool_use","id":"c1","name":"Echo","input":{"message":"hi","mesage":"typo"}}`)
			switch mode {
			case "enforce":
				want := "Unknown parameter 'mesage'. Did you mean 'message'? The tool was not executed."
				if r["is_error"] != true || r["content"] != want {
					t.Errorf("enforce: got %v, want the gate's sentence %q", r, want)
				}
			default:
				if r["is_error"] != false || r["content"] != "hi" {
					t.Errorf("%s: the tool must run, got %v", mode, r)
				}
			}
			warned := strings.Contains(logs.String(), "Unknown parameter 'mesage'") && strings.Contains(logs.String(), "id=c1") && strings.Contains(logs.String(), "tool=Echo")
			if warned != (mode != "off") {
				t.Errorf("%s: violation logged with tool and id = %v; logs:\n%s", mode, warned, logs)
			}
		})
	}
}

func TestS9ToolOverridesPolicyMode(t *testing.T) {
	g, _ := newGateway(t, "validation: \"off\"\ntools: Echo: schema.#Echo & {validation: \"enforce\"}\n", nil)
	r := handle(t, g, `{"type":"tool_use","id":"c1","name":"Echo","input":{"message":1}}`)
	if r["is_error"] != true || !strings.Contains(r["content"].(string), "Parameter 'message' must be a string") {
		t.Errorf("got %v", r)
	}
}

func TestP9ListAndRefusals(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Read: schema.#Read, Echo: schema.#Echo, Glob: schema.#Glob}
agent: "allowed-tools": ["Read(/tmp/**)", "Glob"]
`, nil)
	var names []string
	for _, tool := range handle(t, g, `{"type":"list_tools"}`)["tools"].([]any) {
		names = append(names, tool.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "Glob,Read" {
		t.Errorf("list_tools = %v: a pattern entry keeps its tool, a tool without an entry is left out", names)
	}
	notAllowed := handle(t, g, `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"x"}}`)["content"].(string)
	unknown := handle(t, g, `{"type":"tool_use","id":"b","name":"Ecko","input":{"message":"x"}}`)["content"].(string)
	if !strings.Contains(notAllowed, "not allowed") || strings.Contains(notAllowed, "Unknown") {
		t.Errorf("not allowed: %q", notAllowed)
	}
	if !strings.HasPrefix(unknown, "Unknown tool 'Ecko'.") || strings.Contains(unknown, "Echo") {
		t.Errorf("unknown: %q (it must not reveal tools the surface may not use)", unknown)
	}
	denied := handle(t, g, `{"type":"tool_use","id":"c","name":"Read","input":{"file_path":"/tmp/../etc/passwd"}}`)
	if denied["is_error"] != true || !strings.Contains(denied["content"].(string), "/etc/passwd") {
		t.Errorf("a path outside the pattern must be denied with its subject: %v", denied)
	}
}

func TestListToolsFormats(t *testing.T) {
	g, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	for format, key := range map[string]string{"anthropic": "input_schema", "mcp": "inputSchema"} {
		tool := handle(t, g, `{"type":"list_tools","format":"`+format+`"}`)["tools"].([]any)[0].(map[string]any)
		schema, ok := tool[key].(map[string]any)
		if !ok || schema["additionalProperties"] != false || tool["name"] != "Echo" {
			t.Errorf("%s: %v", format, tool)
		}
	}
	fn := handle(t, g, `{"type":"list_tools","format":"openai"}`)["tools"].([]any)[0].(map[string]any)
	if fn["type"] != "function" || fn["function"].(map[string]any)["name"] != "Echo" {
		t.Errorf("openai: %v", fn)
	}
	if r := handle(t, g, `{"type":"list_tools","format":"xml"}`); r["type"] != "error" {
		t.Errorf("an unknown format must be an error line, got %v", r)
	}
}

func TestSurfaceFromLine(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Echo: schema.#Echo, Glob: schema.#Glob}
subagents: narrow: "allowed-tools": ["Glob"]
`, nil)
	r := handle(t, g, `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"x"},"surface":["agent","subagent:narrow"]}`)
	if r["is_error"] != true {
		t.Errorf("the line's own surface must bind it: %v", r)
	}
	r = handle(t, g, `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"x"},"surface":["agent","subagent:nobody"]}`)
	if r["is_error"] != true || !strings.Contains(r["content"].(string), "not declared") {
		t.Errorf("an undeclared surface must be refused: %v", r)
	}
}

func TestC2PanicBecomesErrorResult(t *testing.T) {
	plugins := fakePlugins{"Boom": tools.Func(func(context.Context, *tools.Env, tools.Input) tools.Result { panic("kaboom") })}
	g, logs := newGateway(t, "tools: Echo: schema.#Echo\ntools: Boom: plugin: command: [\"boom\"]\n", plugins)
	r := handle(t, g, `{"type":"tool_use","id":"a","name":"Boom","input":{}}`)
	if r["is_error"] != true || strings.Contains(r["content"].(string), "kaboom") {
		t.Errorf("a panic must become an error result without its internals: %v", r)
	}
	if !strings.Contains(logs.String(), "kaboom") || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the panic's cause must be logged at error level (rule C7):\n%s", logs)
	}
	if r := handle(t, g, `{"type":"tool_use","id":"b","name":"Boom","input":{}}`); r["is_error"] != true {
		t.Error("the gateway must keep serving after a panic")
	}
}

// TestP2SubjectDefault: Glob without a path searches the working
// directory, so it is decided as that directory, not denied for want of a
// subject (rule P5 still holds for tools with no declared default).
func TestP2SubjectDefault(t *testing.T) {
	g, _ := newGateway(t, `
tools: {Glob: schema.#Glob, Read: schema.#Read}
agent: "allowed-tools": ["Glob(/nowhere/**)", "Read(/nowhere/**)"]
`, nil)
	wd := g.opts.Workdir
	inside, _ := newGateway(t, `
tools: {Glob: schema.#Glob, Read: schema.#Read}
agent: "allowed-tools": ["Glob(`+wd+`)", "Glob(`+wd+`/**)"]
`, nil)
	inside.opts.Workdir = wd
	if r := handle(t, inside, `{"type":"tool_use","id":"a","name":"Glob","input":{"pattern":"*.txt"}}`); r["is_error"] != false {
		t.Errorf("Glob in the working directory, allowed there: %v", r)
	}
	if r := handle(t, g, `{"type":"tool_use","id":"b","name":"Glob","input":{"pattern":"*.txt"}}`); r["is_error"] != true || !strings.Contains(r["content"].(string), wd) {
		t.Errorf("Glob in a working directory the patterns do not allow must be denied, naming it: %v", r)
	}
	if r := handle(t, g, `{"type":"tool_use","id":"c","name":"Read","input":{}}`); r["is_error"] != true {
		t.Errorf("Read has no default subject: %v", r)
	}
}

// FuzzHandle: whatever a line holds, the gateway answers it with exactly
// one JSON line and keeps serving (rules R1, R2, C2).
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool_use","id":"a","name":"Echo","input":{"message":"m","times":2}}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"Glob","input":{"pattern":"*"}},{"type":"tool_use","id":"b","name":"Echo","input":{"message":"x"}}]}`,
		`{"type":"list_tools","format":"openai","surface":["agent","subagent:narrow"]}`,
		`{"type":"status"}`, `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"a","message":"b"}}`,
		`{"type":"tool_use","id":"a","name":"Read","input":{"file_path":"/dev/zero"}}`, `[`, `""`,
		// Issue 19's hostile lines.
		`{"type":"tool_use","id":"a","name":"Echo","name":"Bash","input":{"message":"m"}}`,
		`{"type":"tool_use","id":"a","NAME":"Bash","name":"Echo","input":{"message":"m"}}`,
		`{"type":"tool_use","id":"a\ud800","name":"Echo","input":{"message":"m"}}`, "{\"id\":\"\xff\"}",
		`{"role":"assistant","type":"tool_use","id":"a","name":"Echo","input":{"message":"m"}}`,
		"\u00a0", "\v", `null`, `{"type":"tool_use","id":"a","name":"Echo","input":{"message":"m","times":99999999999999999999999}}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"Echo","arguments":"{\"message\":\"x\"}"}}]}`,
		`{"type":"function_call","call_id":"c","name":"Echo","arguments":"not json"}`,
		`{"object":"response","output":[{"type":"function_call","call_id":"c","name":"Echo","arguments":"{}"}]}`,
	} {
		f.Add([]byte(s))
	}
	g, _ := newGateway(f, `
tools: {Echo: schema.#Echo & {input: times?: <=100}, Glob: schema.#Glob, Read: schema.#Read}
subagents: narrow: "allowed-tools": ["Glob(/tmp/**)"]
parallel: enabled: true
`, nil)
	f.Fuzz(func(t *testing.T, line []byte) {
		out := g.Handle(context.Background(), line)
		if len(out) == 0 || out[len(out)-1] != '\n' || bytes.Count(out, []byte("\n")) != 1 {
			t.Fatalf("reply to %q is not one line: %q", line, out)
		}
		// An object, or (forms 4 and 5) an array of OpenAI items.
		var m any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("reply to %q is not JSON: %v", line, err)
		}
	})
}

// TestP11ListingSaysNoExecution: a listing for a surface the policy does not
// declare says so, and never that a tool was not executed (no tool was
// called); a call on it does.
func TestP11ListingSaysNoExecution(t *testing.T) {
	gw, _ := newGateway(t, "tools: Echo: schema.#Echo\n", nil)
	list := string(gw.Handle(context.Background(), []byte(`{"type":"list_tools","surface":["agent","skill:ghost"]}`)))
	if !strings.Contains(list, `not declared`) || strings.Contains(list, "not executed") {
		t.Errorf("list_tools on an undeclared surface = %s", list)
	}
	run := string(gw.Handle(context.Background(), []byte(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"x"},"surface":["agent","skill:ghost"]}`)))
	if !strings.Contains(run, `not declared`) || !strings.Contains(run, "The tool was not executed.") {
		t.Errorf("a call on an undeclared surface = %s", run)
	}
}
