// Package cedar measures issue 49's decision row: aimon-gw's one decision
// of a call (its input read, the gate, the subject, the lists) against
// Cedar-go's authorization of the same call under the same policy written
// in Cedar, without a gate, at 10 and at 1,000 entries of each tool.
package cedar

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	cedar "github.com/cedar-policy/cedar-go"

	"aimon.dev/gw/gateway"
	"aimon.dev/gw/internal/testkit/cputime"
	"aimon.dev/gw/policy"
)

// calls are the gateway's BenchmarkP10EntriesPerCall's: allowed and
// refused Bash and Read calls.
var calls = []struct {
	name, input string
	allowed     bool
}{
	{"Bash", `{"command":"tool7 run --all 'Grüße.txt'"}`, true},
	{"Bash", `{"command":"rm -rf /tmp/x"}`, false},
	{"Bash", `{"command":"tool7x run"}`, false},
	{"Read", `{"file_path":"/srv/d7/src/Grüße.go"}`, true},
	{"Read", `{"file_path":"/srv/d7/../d8/x"}`, true},
	{"Read", `{"file_path":"/etc/passwd"}`, false},
	{"Read", `{"file_path":"/srv/d77x/y"}`, false},
}

// gatewayOf is aimon-gw's gateway of a policy whose agent lists n Bash and
// n Read entries.
func gatewayOf(b *testing.B, n int) *gateway.Gateway {
	var entries []string
	for i := range n {
		entries = append(entries, fmt.Sprintf("%q", fmt.Sprintf("Bash(tool%d:*)", i)), fmt.Sprintf("%q", fmt.Sprintf("Read(/srv/d%d/**)", i)))
	}
	src := "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n" +
		"tools: {Read: schema.#Read, Bash: schema.#Bash & {sandbox: mode: \"off\"}}\n" +
		"agent: \"allowed-tools\": [" + strings.Join(entries, ", ") + "]\n"
	pol, err := policy.LoadFS(context.Background(), fstest.MapFS{
		"cue.mod/module.cue": {Data: []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")},
		"policy.cue":         {Data: []byte(src)},
	}, policy.WithWorkdir(b.TempDir()))
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(pol, gateway.Options{Workdir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// cedarOf is the same lists in Cedar: a permit of each entry, a Bash
// command that is the word or begins with it and a space, a Read path
// under the directory.
func cedarOf(b *testing.B, n int) *cedar.PolicySet {
	var src strings.Builder
	for i := range n {
		fmt.Fprintf(&src, "permit (principal, action == Action::\"Bash\", resource) when { context.command == \"tool%d\" || context.command like \"tool%d *\" };\n", i, i)
		fmt.Fprintf(&src, "permit (principal, action == Action::\"Read\", resource) when { context.file_path like \"/srv/d%d/*\" };\n", i)
	}
	ps, err := cedar.NewPolicySetFromBytes("policy.cedar", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	return ps
}

// BenchmarkDecisionVsCedar decides the calls with aimon-gw (Decide, as
// aimon-gw check) and with Cedar-go (the input decoded into the request's
// context, then IsAuthorized), in turn, on one locked thread, at 10 and
// 1,000 entries; x:10 and x:1000 are medians of per-round ratios of
// processor time aimon-gw/Cedar, 1000/10 each one's own growth.
func BenchmarkDecisionVsCedar(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	gws := map[int]*gateway.Gateway{10: gatewayOf(b, 10), 1000: gatewayOf(b, 1000)}
	pss := map[int]*cedar.PolicySet{10: cedarOf(b, 10), 1000: cedarOf(b, 1000)}
	const reps = 200
	gwRound := func(g *gateway.Gateway) {
		for range reps {
			for _, c := range calls {
				if d := g.Decide(ctx, gateway.Call{ID: "c", Name: c.name, Input: json.RawMessage(c.input)}); d.Allowed != c.allowed {
					b.Fatalf("aimon-gw: %s %s: allowed %v: %s", c.name, c.input, d.Allowed, d.Reason)
				}
			}
		}
	}
	principal, resource := cedar.NewEntityUID("Agent", "agent"), cedar.NewEntityUID("Tool", "call")
	actions := map[string]cedar.EntityUID{"Bash": cedar.NewEntityUID("Action", "Bash"), "Read": cedar.NewEntityUID("Action", "Read")}
	cedarRound := func(ps *cedar.PolicySet) {
		for range reps {
			for _, c := range calls {
				var in cedar.Record
				if err := in.UnmarshalJSON([]byte(c.input)); err != nil {
					b.Fatal(err)
				}
				ok, _ := ps.IsAuthorized(cedar.EntityMap{}, cedar.Request{Principal: principal, Action: actions[c.name], Resource: resource, Context: in})
				if bool(ok) != c.allowed {
					b.Fatalf("Cedar: %s %s: %v", c.name, c.input, ok)
				}
			}
		}
	}
	var x10, x1000, gwGrowth, cedarGrowth []float64
	var per [4]time.Duration
	for i := 0; b.Loop(); i++ {
		var d [4]time.Duration // gw 10, cedar 10, gw 1000, cedar 1000
		rounds := []func(){func() { gwRound(gws[10]) }, func() { cedarRound(pss[10]) }, func() { gwRound(gws[1000]) }, func() { cedarRound(pss[1000]) }}
		for j := range rounds {
			k := (i + j) % len(rounds)
			// Each round starts with no collection owed: Cedar's 1,000
			// entries allocate enough to make the next round pay for it.
			runtime.GC()
			t0 := cputime.Thread()
			rounds[k]()
			d[k] = cputime.Thread() - t0
			per[k] += d[k]
		}
		x10 = append(x10, float64(d[0])/float64(d[1]))
		x1000 = append(x1000, float64(d[2])/float64(d[3]))
		gwGrowth = append(gwGrowth, float64(d[2])/float64(d[0]))
		cedarGrowth = append(cedarGrowth, float64(d[3])/float64(d[1]))
	}
	n := float64(b.N * reps * len(calls))
	b.ReportMetric(cputime.Median(x10), "x:10")
	b.ReportMetric(cputime.Median(x1000), "x:1000")
	b.ReportMetric(cputime.Median(gwGrowth), "gw-1000/10")
	b.ReportMetric(cputime.Median(cedarGrowth), "cedar-1000/10")
	b.ReportMetric(float64(per[0].Nanoseconds())/n/1e3, "gw-10-µs/call")
	b.ReportMetric(float64(per[1].Nanoseconds())/n/1e3, "cedar-10-µs/call")
	b.ReportMetric(float64(per[3].Nanoseconds())/n/1e3, "cedar-1000-µs/call")
}
