package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/reload"
	"aimon.dev/gw/internal/testkit/mcptest"
	"aimon.dev/gw/internal/testkit/policydir"
)

// start serves the embedded default policy (Echo, and Read, Glob, Grep
// under the working directory) with opts.
func start(t *testing.T, opts gateway.Options) *reload.Runtime {
	t.Helper()
	opts.Workdir = t.TempDir()
	rt, err := reload.Start(t.Context(), reload.Options{Gateway: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return rt
}

// scrape reads /metrics as Prometheus would.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return scrapeBody(t, rec.Result())
}

func scrapeBody(t *testing.T, resp *http.Response) map[string]*dto.MetricFamily {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics answered %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// value is the value of the series of family fam with exactly labels;
// ok is false when there is no such series.
func value(fams map[string]*dto.MetricFamily, fam string, labels map[string]string) (float64, bool) {
	f := fams[fam]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// Every decision reaches the decision log (rule R7), so the metrics
// count every call by tool, deciding rule and verdict.
func TestR7MetricsCountCallsByToolRuleAndVerdict(t *testing.T) {
	m := NewMetrics()
	rt := start(t, gateway.Options{Decisions: m.Decisions(nil)})
	m.Follow(rt.Gateway)
	gw := rt.Gateway()
	calls := []struct {
		note, tool, input string
		times             int
	}{
		{"allowed by name", "Echo", `{"message":"hi"}`, 3},
		{"a path outside the working directory", "Read", `{"file_path":"/etc/passwd"}`, 2},
		{"an unknown tool", "Bash", `{"command":"ls"}`, 1},
		{"an undeclared parameter under enforce", "Echo", `{"message":"hi","x":1}`, 1},
	}
	for _, c := range calls {
		for range c.times {
			gw.Call(t.Context(), nil, "1", c.tool, json.RawMessage(c.input))
		}
	}
	// A decision without a run (check, the hook) is counted too.
	gw.Check(nil, "2", "Echo", json.RawMessage(`{"message":"hi"}`))
	fams := scrape(t, m.Handler())
	for _, w := range []struct {
		note                string
		tool, rule, verdict string
		want                float64
	}{
		{"three runs and a check", "Echo", "P6", VerdictAllow, 4},
		{"denied by its path pattern", "Read", "P4", VerdictDeny, 2},
		{"refused as unknown", "Bash", "P9", VerdictDeny, 1},
		{"refused by the gate", "Echo", "S9", VerdictDeny, 1},
	} {
		got, ok := value(fams, "aimon_gw_calls_total", map[string]string{"tool": w.tool, "rule": w.rule, "verdict": w.verdict})
		if !ok || got != w.want {
			t.Errorf("%s: aimon_gw_calls_total{tool=%q,rule=%q,verdict=%q} = %v (present %v), want %v", w.note, w.tool, w.rule, w.verdict, got, ok, w.want)
		}
	}
	if n, _ := value(fams, "aimon_gw_call_duration_seconds", map[string]string{"tool": "Echo", "verdict": VerdictAllow}); n != 4 {
		t.Errorf("the latency histogram of allowed Echo calls has %v samples, want 4", n)
	}
	if g, ok := value(fams, "aimon_gw_policy_generation", nil); !ok || g != 1 {
		t.Errorf("aimon_gw_policy_generation = %v (present %v), want 1", g, ok)
	}
	if g, ok := value(fams, "aimon_gw_policy_reload_error", nil); !ok || g != 0 {
		t.Errorf("aimon_gw_policy_reload_error = %v (present %v), want 0: the embedded policy is never rejected", g, ok)
	}
}

// The counting log passes every record on, and its failure, so that a
// decision log that cannot be written still stops allowing calls.
func TestR7MetricsPassRecordsToTheDecisionLog(t *testing.T) {
	path := t.TempDir() + "/decisions.jsonl"
	f, err := decisionlog.Open(path, decisionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	rt := start(t, gateway.Options{Decisions: m.Decisions(f)})
	rt.Gateway().Call(t.Context(), nil, "1", "Echo", json.RawMessage(`{"message":"hi"}`))
	f.Close() // a write now fails: the log is closed
	r := rt.Gateway().Call(t.Context(), nil, "2", "Echo", json.RawMessage(`{"message":"hi"}`))
	if !r.IsError || !strings.Contains(r.Text, "decision log") {
		t.Errorf("a call after the decision log failed = %+v, want it refused because of the log", r)
	}
	fams := scrape(t, m.Handler())
	if n, _ := value(fams, "aimon_gw_calls_total", map[string]string{"tool": "Echo", "rule": "R1", "verdict": VerdictDeny}); n != 1 {
		t.Errorf("calls refused for the decision log: %v, want 1", n)
	}
	if n, _ := value(fams, "aimon_gw_calls_total", map[string]string{"tool": "Echo", "rule": "P6", "verdict": VerdictAllow}); n != 1 {
		t.Errorf("calls allowed: %v, want 1: the one refused for its record is not counted as allowed", n)
	}
}

// A metrics handler with nothing to follow yet serves the counters alone.
func TestR3MetricsBeforeAnyPolicy(t *testing.T) {
	m := NewMetrics()
	m.Follow(func() *gateway.Gateway { return nil })
	fams := scrape(t, m.Handler())
	if _, ok := value(fams, "aimon_gw_policy_generation", nil); ok {
		t.Error("aimon_gw_policy_generation is reported before a policy is in force")
	}
}

func tracing(t *testing.T) (*Tracing, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return New(tp), exp
}

// Each call is a span with its steps decode, decide and run as children,
// in the trace that the request's traceparent names (rule R7: one
// decision, whichever front end).
func TestR7TracesDecodeDecideRunUnderTheRequestsTrace(t *testing.T) {
	tr, exp := tracing(t)
	rt := start(t, gateway.Options{Trace: tr.Tracer()})
	h := tr.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&c)
		json.NewEncoder(w).Encode(rt.Gateway().Call(r.Context(), nil, "1", c.Name, c.Input))
	}))
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, c := range []struct {
		note, body string
		steps      []string
	}{
		{"an allowed call runs", `{"name":"Echo","input":{"message":"hi"}}`, []string{"decode", "decide", "run"}},
		{"a denied call does not", `{"name":"Read","input":{"file_path":"/etc/passwd"}}`, []string{"decode", "decide"}},
	} {
		exp.Reset()
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(c.body))
		req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
		h.ServeHTTP(httptest.NewRecorder(), req)
		spans := map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if got := s.SpanContext.TraceID().String(); got != traceID {
				t.Errorf("%s: span %q is in trace %s, want the request's %s", c.note, s.Name, got, traceID)
			}
			spans[s.Name] = s
		}
		server, ok := spans["POST /mcp"]
		if !ok || server.Parent.SpanID().String() != parentID || !server.Parent.IsRemote() {
			t.Fatalf("%s: the request's span has parent %v, want the traceparent's span %s; spans %v", c.note, server.Parent.SpanID(), parentID, names(spans))
		}
		var tool string
		json.Unmarshal([]byte(c.body), &struct{ Name *string }{&tool})
		call, ok := spans["call "+tool]
		if !ok || call.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Fatalf("%s: no span \"call %s\" under the request's; spans %v", c.note, tool, names(spans))
		}
		for _, step := range c.steps {
			s, ok := spans[step]
			if !ok || s.Parent.SpanID() != call.SpanContext.SpanID() {
				t.Errorf("%s: no span %q under the call's; spans %v", c.note, step, names(spans))
			}
		}
		if len(spans) != 2+len(c.steps) {
			t.Errorf("%s: spans %v, want the request's, the call's and %v", c.note, names(spans), c.steps)
		}
		if d := spans["decide"]; !hasAttr(d, "aimon.tool", tool) || !hasAttr(d, "aimon.verdict", map[bool]string{true: "allow", false: "deny"}[len(c.steps) == 3]) {
			t.Errorf("%s: the decide span's attributes are %v", c.note, d.Attributes)
		}
	}
}

func names(spans map[string]tracetest.SpanStub) []string {
	var out []string
	for n := range spans {
		out = append(out, n)
	}
	return out
}

func hasAttr(s tracetest.SpanStub, key, want string) bool {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.AsString() == want
		}
	}
	return false
}

// A line of serve, and a decision alone (check, the hook), are traced too.
func TestR7TracesEveryFrontEnd(t *testing.T) {
	tr, exp := tracing(t)
	rt := start(t, gateway.Options{Trace: tr.Tracer()})
	gw := rt.Gateway()
	for _, c := range []struct {
		note  string
		do    func()
		steps []string
	}{
		{"a line of serve", func() {
			gw.Handle(t.Context(), []byte(`{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}`))
		}, []string{"call Echo", "decode", "decide", "run"}},
		{"a decision alone", func() {
			gw.DecideContext(t.Context(), nil, gateway.Call{ID: "1", Name: "Echo", Input: json.RawMessage(`{"message":"hi"}`)})
		}, []string{"call Echo", "decode", "decide"}},
		{"a line that is not a call", func() { gw.Handle(t.Context(), []byte(`{"type":"status"}`)) }, nil},
	} {
		exp.Reset()
		c.do()
		var got []string
		for _, s := range exp.GetSpans() {
			got = append(got, s.Name)
		}
		if strings.Join(sorted(got), ",") != strings.Join(sorted(c.steps), ",") {
			t.Errorf("%s: spans %v, want %v", c.note, got, c.steps)
		}
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// Tracing is off unless the OTEL_* environment asks for it, and an
// environment that asks for what cannot be done is refused with a sentence.
func TestR7TracingFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		note    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{"nothing set", nil, false, ""},
		{"an endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, ""},
		{"a traces endpoint over gRPC", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"the exporter named", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{"the SDK disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false, ""},
		{"no exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{"bad input: an exporter we lack", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, `OTEL_TRACES_EXPORTER is "zipkin"`},
		{"bad input: a protocol we lack", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, `OTEL_EXPORTER_OTLP_PROTOCOL is "http/json"`},
	} {
		tr, err := fromEnv(t.Context(), func(k string) string { return c.env[k] })
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error %v, want one saying %s", c.note, err, c.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", c.note, err)
		case (tr != nil) != c.on:
			t.Errorf("%s: tracing on = %v, want %v", c.note, tr != nil, c.on)
		}
		if tr != nil {
			tr.Shutdown(t.Context())
		}
		if tr == nil && (tr.Tracer() != nil || tr.Middleware(http.NotFoundHandler()) == nil) {
			t.Errorf("%s: off, yet it traces", c.note)
		}
	}
}

// An upstream server that is down has its tools withheld (rule R4), and
// /metrics says which: 1 for a server that answered at the last load, 0
// for one that did not or has not yet.
func TestR4MetricsShowUpstreamHealth(t *testing.T) {
	echo := mcptest.NewEcho(t, "s3cret")
	t.Setenv("AIMON_TEST_TOKEN", "s3cret")
	dir := t.TempDir()
	policydir.WriteIn(t, dir, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

servers: gone: {command: [%q], expose: ["read_file"], pin: false}
servers: web: {url: %q, headers: Authorization: "Bearer ${AIMON_TEST_TOKEN}", expose: "*", pin: false}
tools: Echo: schema.#Echo
agent: "allowed-tools": ["Echo", "gone__read_file", "web__echo"]
`, filepath.Join(dir, "no-such-server"), echo.URL)})
	m := NewMetrics()
	rt, err := reload.Start(t.Context(), reload.Options{Dir: dir, Gateway: gateway.Options{Workdir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	m.Follow(rt.Gateway)
	// The first load waits for no server (rule R10): web's tools go in
	// force when it answers, gone's are withheld when it fails to start.
	fams := scrape(t, m.Handler())
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if v, ok := value(fams, "aimon_gw_upstream_up", map[string]string{"server": "web"}); ok && v == 1 {
			break
		}
		fams = scrape(t, m.Handler())
	}
	for _, c := range []struct {
		note, server string
		want         float64
	}{
		{"a server whose command is missing", "gone", 0},
		{"a server that answers", "web", 1},
	} {
		if v, ok := value(fams, "aimon_gw_upstream_up", map[string]string{"server": c.server}); !ok || v != c.want {
			t.Errorf("%s: aimon_gw_upstream_up{server=%q} = %v (present %v), want %v", c.note, c.server, v, ok, c.want)
		}
	}
}
