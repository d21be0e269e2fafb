package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"

	"aimon.dev/gw/internal/runtime/gateway"
)

// Tracing traces each call's steps (gateway.StepCall and its children
// decode, decide, run) as OpenTelemetry spans, children of the trace the
// request carried (W3C traceparent). A nil *Tracing traces nothing.
type Tracing struct {
	tp       trace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// scope names the spans' instrumentation.
const scope = "aimon.dev/gw"

// New traces to tp (a test's, with an in-memory exporter).
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{tp: tp, tracer: tp.Tracer(scope),
		prop:     propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		shutdown: func(context.Context) error { return nil }}
}

// FromEnv configures tracing from the standard OpenTelemetry environment
// variables, and returns nil (no tracing) when they ask for none: it is on
// when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set or OTEL_TRACES_EXPORTER is "otlp", and off when OTEL_SDK_DISABLED is
// "true" or OTEL_TRACES_EXPORTER is "none". OTEL_EXPORTER_OTLP_PROTOCOL
// (or ..._TRACES_PROTOCOL) chooses "grpc" or "http/protobuf" (the
// default); the exporters read the endpoint, headers, timeout and TLS
// variables themselves, the SDK the sampler (OTEL_TRACES_SAMPLER), and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func FromEnv(ctx context.Context) (*Tracing, error) {
	return fromEnv(ctx, os.Getenv)
}

func fromEnv(ctx context.Context, env func(string) string) (*Tracing, error) {
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch e := env("OTEL_TRACES_EXPORTER"); e {
	case "none":
		return nil, nil
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER is %q, which aimon-gw does not export to; set it to \"otlp\" or \"none\"", e)
	}
	protocol := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	var err error
	switch protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL is %q, which aimon-gw does not speak; set it to \"grpc\" or \"http/protobuf\"", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter cannot be set up from the OTEL_* environment: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(serviceName(env))))
	if err != nil {
		return nil, fmt.Errorf("the OpenTelemetry resource cannot be made from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := New(tp)
	t.shutdown = tp.Shutdown
	return t, nil
}

// serviceName is OTEL_SERVICE_NAME, else aimon-gw.
func serviceName(env func(string) string) string {
	if s := env("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "aimon-gw"
}

// Shutdown exports the spans not yet sent.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// Tracer is the gateway's seam (gateway.Options.Trace); nil when t is nil.
func (t *Tracing) Tracer() gateway.Tracer {
	if t == nil {
		return nil
	}
	return t.step
}

func (t *Tracing) step(ctx context.Context, step, tool string) (context.Context, func(gateway.Outcome)) {
	name := step
	if step == gateway.StepCall && tool != "" {
		name = "call " + tool
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithAttributes(attribute.String("aimon.tool", tool)))
	return ctx, func(o gateway.Outcome) {
		if o.Decided {
			span.SetAttributes(attribute.String("aimon.verdict", verdictOf(o.Allowed, o.Ask)), attribute.String("aimon.rule", string(o.Rule)))
		}
		if o.IsError {
			span.SetStatus(codes.Error, "the tool's result is an error")
		}
		span.End()
	}
}

func verdictOf(allowed, ask bool) string {
	switch {
	case allowed:
		return VerdictAllow
	case ask:
		return VerdictAsk
	}
	return VerdictDeny
}

// Middleware wraps an HTTP handler in a server span whose parent is the
// trace context the request carries (traceparent, tracestate, baggage),
// so the calls it serves are spans of the client's trace. With t nil it
// returns next itself.
func (t *Tracing) Middleware(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return otelhttp.NewHandler(next, "aimon-gw", otelhttp.WithTracerProvider(t.tp), otelhttp.WithPropagators(t.prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}
