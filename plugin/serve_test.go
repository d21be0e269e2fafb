package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"aimon.dev/gw/plugin/pluginpb"
	"aimon.dev/gw/tools"
)

const object = `{"type":"object"}`

func ok(context.Context, Request) Result { return Text("ok") }

func TestNewServerRefusesBadDefinitions(t *testing.T) {
	for _, tc := range []struct {
		name string
		ts   []Tool
		want string
	}{
		{"none", nil, "it serves no tools"},
		{"bad name", []Tool{{Name: "a b", InputSchema: object, Run: ok}}, `tool name "a b" is not valid`},
		{"long name", []Tool{{Name: strings.Repeat("a", 65), InputSchema: object, Run: ok}}, "is not valid"},
		{"twice", []Tool{{Name: "A", InputSchema: object, Run: ok}, {Name: "A", InputSchema: object, Run: ok}}, "declares the tool A twice"},
		{"no run", []Tool{{Name: "A", InputSchema: object}}, "tool A has no Run function"},
		{"no schema", []Tool{{Name: "A", Run: ok}}, "tool A declares no input schema"},
		{"schema not JSON", []Tool{{Name: "A", InputSchema: `{"type":`, Run: ok}}, "tool A declares an input schema that is not JSON"},
		{"schema not object", []Tool{{Name: "A", InputSchema: `["object"]`, Run: ok}}, "is not a JSON object"},
		{"bad concurrency", []Tool{{Name: "A", InputSchema: object, Concurrency: "parallel", Run: ok}}, `declares concurrency "parallel"`},
		{"bad interrupt", []Tool{{Name: "A", InputSchema: object, Interrupt: "kill", Run: ok}}, `declares interrupt "kill"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewServer(tc.ts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewServer = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDescribeFillsK1Defaults(t *testing.T) {
	srv, err := NewServer(
		Tool{Name: "A", Description: "a", InputSchema: object, Run: ok},
		Tool{Name: "B", InputSchema: object, Concurrency: tools.ConcurrentSafe, Interrupt: tools.Cooperative, Run: ok},
	)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Describe(context.Background(), &pluginpb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetTools()
	if len(got) != 2 || got[0].Concurrency != tools.Sequential || got[0].Interrupt != tools.NonInterruptible ||
		got[0].Description != "a" || string(got[0].InputSchema) != object ||
		got[1].Concurrency != tools.ConcurrentSafe || got[1].Interrupt != tools.Cooperative {
		t.Errorf("Describe = %v", got)
	}
}

func TestExecute(t *testing.T) {
	echo := Tool{Name: "Echo", InputSchema: object, Run: func(_ context.Context, r Request) Result {
		var in struct {
			N float64 `json:"n"`
			S *string `json:"s"`
		}
		if res, ok := r.Bind(&in); !ok {
			return res
		}
		b, _ := json.Marshal(map[string]any{"in": r.Input, "wd": r.Workdir, "chain": r.Chain, "id": r.CallID, "tool": r.Tool})
		return Text(string(b))
	}}
	boom := Tool{Name: "Boom", InputSchema: object, Run: func(context.Context, Request) Result { panic("boom") }}
	srv, err := NewServer(echo, boom)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		req     *pluginpb.ExecuteRequest
		want    string
		isError bool
	}{
		{"call", &pluginpb.ExecuteRequest{Tool: "Echo", Input: []byte(`{"n": 3.0}`), Workdir: "/w", Chain: []string{"agent"}, CallId: "c1"},
			`{"chain":["agent"],"id":"c1","in":{"n":3.0},"tool":"Echo","wd":"/w"}`, false},
		{"bind violation", &pluginpb.ExecuteRequest{Tool: "Echo", Input: []byte(`{"s": 1}`)},
			"Missing required parameter 'n'. Parameter 's' must be a string, got number 1. The tool was not executed.", true},
		{"unknown tool", &pluginpb.ExecuteRequest{Tool: "Nope", Input: []byte(`{}`)},
			`This plugin serves no tool named "Nope"; it serves Boom, Echo.`, true},
		{"input not JSON", &pluginpb.ExecuteRequest{Tool: "Echo", Input: []byte(`{"n":`)},
			"The input of Echo is not a JSON object; the tool was not executed.", true},
		{"input null", &pluginpb.ExecuteRequest{Tool: "Echo", Input: []byte(`null`)},
			"The input of Echo is not a JSON object; the tool was not executed.", true},
		{"input array", &pluginpb.ExecuteRequest{Tool: "Echo", Input: []byte(`[1]`)},
			"The input of Echo is not a JSON object; the tool was not executed.", true},
		{"panic", &pluginpb.ExecuteRequest{Tool: "Boom", Input: []byte(`{}`)},
			"The tool Boom failed unexpectedly (boom); the plugin logged the details.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logged bytes.Buffer
			defer func(w io.Writer) { stderr = w }(stderr)
			stderr = &logged
			resp, err := srv.Execute(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != tc.want || resp.IsError != tc.isError {
				t.Errorf("Execute = %q (error %v); want %q (error %v)", resp.Text, resp.IsError, tc.want, tc.isError)
			}
			if tc.name == "panic" && !strings.Contains(logged.String(), "tool Boom panicked: boom") {
				t.Errorf("the panic was not logged: %q", logged.String())
			}
		})
	}
}

// The gateway reads these keys back into its log (internal/exec/pluginhost lineLog).
func TestLoggerWritesHCLogJSON(t *testing.T) {
	var buf bytes.Buffer
	defer func(w io.Writer) { stderr = w }(stderr)
	stderr = &buf
	Logger().Warn("disk full", "path", "/x")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if m["@level"] != "warn" || m["@message"] != "disk full" || m["path"] != "/x" || m["@timestamp"] == nil {
		t.Errorf("Logger wrote %v", m)
	}
}

func TestInProcess(t *testing.T) {
	tl := InProcess(Tool{Name: "T", InputSchema: object, Run: func(_ context.Context, r Request) Result {
		return Result{Text: r.Tool + " " + r.Workdir + " " + r.CallID + " " + strings.Join(r.Chain, ","), IsError: true}
	}})
	res := tl.Run(context.Background(), &tools.Env{Workdir: "/w", CallID: "c", Chain: []string{"agent", "skill:x"}}, tools.Input{})
	if res.Text != "T /w c agent,skill:x" || !res.IsError {
		t.Errorf("InProcess = %+v", res)
	}
	if res := tl.Run(context.Background(), nil, nil); res.Text != "T   " {
		t.Errorf("InProcess without env = %+v", res)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{object, `{`, `[]`, `null`, ``, `{"type":"object","properties":{"a":{"$ref":"#"}}}`, `"x"`} {
		f.Add("Tool", s, "", "")
	}
	f.Add("bad name", object, "parallel", "kill")
	f.Fuzz(func(t *testing.T, name, schema, conc, intr string) {
		info := &pluginpb.ToolInfo{Name: name, InputSchema: []byte(schema), Concurrency: conc, Interrupt: intr}
		if Normalize(info) != nil {
			return
		}
		var v map[string]any
		if !tools.ValidName(info.Name) || json.Unmarshal(info.InputSchema, &v) != nil || v == nil {
			t.Errorf("Normalize accepted %+v", info)
		}
		if !tools.MayRunInParallel(info.Concurrency, tools.NonInterruptible) && info.Concurrency != tools.Sequential {
			t.Errorf("Normalize accepted concurrency %q", info.Concurrency)
		}
	})
}
