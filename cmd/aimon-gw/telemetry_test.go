package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace endpoint that keeps the span names
// it is sent, and each span's service.
type otlpReceiver struct {
	mu      sync.Mutex
	spans   []string
	service []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				o.service = append(o.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(b)
}

// serve exports each call's spans to the OTLP endpoint the standard
// environment names, the last ones when its input ends; with none named
// it exports nothing, and an exporter it lacks is refused with a sentence.
func TestR7ServeExportsTracesByOTLP(t *testing.T) {
	t.Parallel()
	recv := &otlpReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	line := `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"hi"}}` + "\n"
	for _, c := range []struct {
		note    string
		env     []string
		spans   []string
		failure string
	}{
		{"an endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_SERVICE_NAME=gw-test"}, []string{"call Echo", "decide", "decode", "run"}, ""},
		{"no endpoint", nil, nil, ""},
		{"bad input: an exporter aimon-gw lacks", []string{"OTEL_TRACES_EXPORTER=jaeger"}, nil, `OTEL_TRACES_EXPORTER is "jaeger"`},
	} {
		recv.mu.Lock()
		recv.spans, recv.service = nil, nil
		recv.mu.Unlock()
		cmd := exec.Command(gatewayBinary(t), "serve", "--workdir", t.TempDir())
		cmd.Env = append(cleanEnv(), c.env...)
		cmd.Stdin = strings.NewReader(line)
		out, err := cmd.CombinedOutput()
		if c.failure != "" {
			if err == nil || !strings.Contains(string(out), c.failure) {
				t.Errorf("%s: %v, output %q; want a refusal saying %s", c.note, err, out, c.failure)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: serve: %v\n%s", c.note, err, out)
		}
		recv.mu.Lock()
		got := slices.Sorted(slices.Values(recv.spans))
		service := recv.service
		recv.mu.Unlock()
		if !slices.Equal(got, c.spans) {
			t.Errorf("%s: spans exported %v, want %v", c.note, got, c.spans)
		}
		if c.spans != nil && (len(service) == 0 || service[0] != "gw-test") {
			t.Errorf("%s: the spans' service is %v, want OTEL_SERVICE_NAME's gw-test", c.note, service)
		}
	}
}

// cleanEnv is the test's environment without OTEL_* variables, so that
// each case names its own.
func cleanEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OTEL_") })
}
