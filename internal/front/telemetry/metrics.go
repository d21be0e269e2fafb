// Package telemetry is what an operator watches a resident gateway by:
// Prometheus metrics at /metrics (calls by tool, rule and verdict, their
// latency, the policy generation in force and the last reload error, the
// upstream servers' health) and OpenTelemetry traces of each call's steps.
// It observes the gateway through its seams (the decision log every
// decision goes through, Options.Trace) and changes no decision.
package telemetry

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/decisionlog"
	"aimon.dev/gw/internal/runtime/gateway"
)

// Metrics counts what the gateway decides. Safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	limited  *prometheus.CounterVec
}

// Verdicts, as the calls_total metric labels them.
const (
	VerdictAllow = "allow"
	VerdictDeny  = "deny"
	VerdictAsk   = "ask"
)

// NewMetrics returns metrics on a registry of their own (with the Go
// runtime's and the process's), so that tests and replicas in one process
// do not share counters.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aimon_gw_calls_total",
			Help: "Decided tool calls, by tool, the rule that decided and the verdict (allow, deny, ask).",
		}, []string{"tool", "rule", "verdict"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aimon_gw_call_errors_total",
			Help: "Allowed calls whose result was an error, by tool.",
		}, []string{"tool"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aimon_gw_call_duration_seconds",
			Help: "Time from a call's decision starting to its result (its decision alone for check and the hook), by tool and verdict.",
			// A decision takes microseconds, a command seconds.
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool", "verdict"}),
	}
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aimon_gw_limit_refusals_total",
		Help: "Calls a limit of the policy refused (rule P19), by limit: over its rate or quota, or its count not known (the state store down).",
	}, []string{"limit"})
	m.reg.MustRegister(m.calls, m.errors, m.duration, m.limited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics are registered, for more of a front end's own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus's exposition formats (/metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Decisions returns a decision log that counts every record and passes it
// on to next (the --decision-log file), nil for none. Set it as
// gateway.Options.Decisions: every decision of every front end goes
// through it (rule R7).
func (m *Metrics) Decisions(next gateway.DecisionLog) gateway.DecisionLog {
	return &counting{m: m, next: next}
}

type counting struct {
	m    *Metrics
	next gateway.DecisionLog
}

// Log counts a call at its decision and its failure at its result; an
// allowed decision that could not be written is not counted, since the
// gateway refuses that call instead and records (and counts) the refusal.
func (c *counting) Log(r decisionlog.Record) error {
	var err error
	if c.next != nil {
		err = c.next.Log(r)
	}
	if err != nil && r.Allowed && r.Phase != decisionlog.Result {
		return err
	}
	v := verdictOf(r.Allowed, r.Ask)
	if r.Phase != decisionlog.Result {
		c.m.calls.WithLabelValues(r.Tool, string(r.Rule), v).Inc()
		if r.Rule == rule.P19 {
			if name := gateway.LimitedName(r.Entries); name != "" {
				c.m.limited.WithLabelValues(name).Inc()
			}
		}
	}
	if r.Phase != decisionlog.Running {
		c.m.duration.WithLabelValues(r.Tool, v).Observe(r.DurationMS / 1000)
	}
	if r.Phase == decisionlog.Result && r.ResultError != nil && *r.ResultError {
		c.m.errors.WithLabelValues(r.Tool).Inc()
	}
	return err
}

// Detail is what next's records carry for replay (--decision-log-calls):
// without it, mcp --listen's gateway recorded no call replay could read.
func (c *counting) Detail() decisionlog.Detail {
	if d, ok := c.next.(interface{ Detail() decisionlog.Detail }); ok {
		return d.Detail()
	}
	return decisionlog.Detail{}
}

func (c *counting) Err() error {
	if c.next == nil {
		return nil
	}
	return c.next.Err()
}

// Follow reports the state of the gateway that current returns (nil while
// there is none): the generation in force, whether the newest policy edit
// was rejected, and which upstream servers are up. It is read at each
// scrape, so it is never stale.
func (m *Metrics) Follow(current func() *gateway.Gateway) {
	m.reg.MustRegister(&following{current: current})
}

var (
	generationDesc = prometheus.NewDesc("aimon_gw_policy_generation",
		"The policy generation in force: 1 for the one loaded at start, one more for each reload put in force.", nil, nil)
	revisionDesc = prometheus.NewDesc("aimon_gw_policy_info",
		"1, labelled with the revision of the policy in force.", []string{"revision"}, nil)
	loadedDesc = prometheus.NewDesc("aimon_gw_policy_loaded_timestamp_seconds",
		"When the generation in force was put in force.", nil, nil)
	reloadErrorDesc = prometheus.NewDesc("aimon_gw_policy_reload_error",
		"1 when the newest policy edit was rejected (the last good policy stays in force), else 0.", nil, nil)
	reloadErrorAtDesc = prometheus.NewDesc("aimon_gw_policy_reload_error_timestamp_seconds",
		"When the newest policy edit was rejected; absent while it is not.", nil, nil)
	upstreamDesc = prometheus.NewDesc("aimon_gw_upstream_up",
		"1 when the upstream MCP server answered at the last load, 0 when its tools are withheld (rule R4).", []string{"server"}, nil)
)

type following struct{ current func() *gateway.Gateway }

func (f *following) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{generationDesc, revisionDesc, loadedDesc, reloadErrorDesc, reloadErrorAtDesc, upstreamDesc} {
		ch <- d
	}
}

func (f *following) Collect(ch chan<- prometheus.Metric) {
	gw := f.current()
	if gw == nil {
		return
	}
	cur := gw.Current()
	ch <- prometheus.MustNewConstMetric(generationDesc, prometheus.GaugeValue, float64(cur.Number))
	ch <- prometheus.MustNewConstMetric(revisionDesc, prometheus.GaugeValue, 1, cur.Revision)
	ch <- prometheus.MustNewConstMetric(loadedDesc, prometheus.GaugeValue, seconds(cur.LoadedAt))
	problem, at := gw.LastReload()
	failed := 0.0
	if problem != "" {
		failed = 1
		ch <- prometheus.MustNewConstMetric(reloadErrorAtDesc, prometheus.GaugeValue, seconds(at))
	}
	ch <- prometheus.MustNewConstMetric(reloadErrorDesc, prometheus.GaugeValue, failed)
	up := map[string]float64{}
	for _, n := range cur.Names() {
		if u := cur.Tools[n].Upstream; u != nil {
			up[u.Server] = 1
		}
	}
	for _, u := range cur.Unavailable {
		up[u.Server] = 0
	}
	for server, v := range up {
		ch <- prometheus.MustNewConstMetric(upstreamDesc, prometheus.GaugeValue, v, server)
	}
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
