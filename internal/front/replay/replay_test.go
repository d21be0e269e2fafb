package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
	"aimon.dev/gw/internal/testkit/policydir"
)

// policyDir writes a policy module whose body follows the schema import.
func policyDir(t testing.TB, body string) string {
	return policydir.Write(t, map[string]string{"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\n" + body})
}

const strict = `tools: {Read: schema.#Read, Write: schema.#Write, Echo: schema.#Echo}
labels: untrusted: {entries: ["Read"], trusted: ["Read(./**)"]}
agent: when: untrusted: "denied-tools": ["Write"]
`

// rec is one record of a replayable log.
func rec(session, phase, id, tool string, in map[string]any, allowed, failed bool) string {
	m := map[string]any{"time": "2026-12-03T10:00:00Z", "phase": phase, "call_id": id, "tool": tool, "surface": []string{"agent"}, "allowed": allowed, "v": 1, "session": session, "workdir": "/srv/project"}
	if in != nil {
		m["input"] = in
	}
	if phase == "result" {
		m["result_error"] = failed
	}
	b, _ := json.Marshal(m)
	return string(b) + "\n"
}

// TestP18ReplayKeepsSessionsApart: a label a session's result gives binds
// that session's later calls only, under the candidate's labels; a result
// that was an error gives it too, and so does a hook's allowed decision
// with no result after it (probe V6: the runtime reports no failed
// result); a call's own session follows it across interleaved records.
func TestP18ReplayKeepsSessionsApart(t *testing.T) {
	page := map[string]any{"file_path": "/tmp/page.html"}
	write := map[string]any{"file_path": "/srv/project/out.txt", "content": "x"}
	log := rec("a", "running", "r1", "Read", page, true, false) +
		rec("b", "running", "r1", "Read", page, true, false) +
		rec("a", "result", "r1", "Read", nil, true, false) +
		rec("b", "result", "r1", "Read", nil, true, true) + // failed: labels too
		rec("d", "decided", "r1", "Read", page, true, false) + // a hook's: no result
		rec("c", "running", "w1", "Write", write, true, false) +
		rec("a", "running", "w1", "Write", write, true, false) +
		rec("b", "running", "w1", "Write", write, true, false) +
		rec("d", "decided", "w1", "Write", write, true, false)
	rep, err := Run(context.Background(), strings.NewReader(log), Options{Policy: policyDir(t, strict), LoadTimeout: time.Minute, Name: "log"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calls != 7 || rep.Sessions != 4 || len(rep.Changes) != 3 {
		t.Fatalf("report %+v", rep)
	}
	for i, want := range []struct {
		session string
		line    int
	}{{"a", 7}, {"b", 8}, {"d", 9}} {
		if c := rep.Changes[i]; c.Session != want.session || c.Call != "w1" || c.Line != want.line || c.Was != Allowed || c.Now != Refused || !strings.Contains(c.Reason, "The result of Read of /tmp/page.html (call r1) labelled the session untrusted") {
			t.Errorf("change %d: %+v", i, c)
		}
	}
}

// BenchmarkP18Replay100k replays 100,000 recorded calls (100 sessions of
// 1,000: reads in and outside the tree, writes, echoes, each with its
// result record) under a policy whose flow the reads bind (issue 48: under
// 10 s).
func BenchmarkP18Replay100k(b *testing.B) {
	var buf bytes.Buffer
	calls := 0
	for s := range 100 {
		session := fmt.Sprintf("s%03d", s)
		for i := range 250 {
			read := map[string]any{"file_path": fmt.Sprintf("/srv/project/src/%d.go", i)}
			if i == 200 {
				read["file_path"] = "/tmp/page.html"
			}
			for j, c := range []struct {
				tool string
				in   map[string]any
			}{
				{"Read", read},
				{"Echo", map[string]any{"message": fmt.Sprintf("step %d", i)}},
				{"Write", map[string]any{"file_path": fmt.Sprintf("/srv/project/out/%d.txt", i), "content": "x"}},
				{"Echo", map[string]any{"message": "done"}},
			} {
				id := fmt.Sprintf("c%d_%d", i, j)
				buf.WriteString(rec(session, "running", id, c.tool, c.in, true, false))
				buf.WriteString(rec(session, "result", id, c.tool, nil, true, false))
				calls++
			}
		}
	}
	dir := policyDir(b, strict)
	b.ResetTimer()
	// The machine is shared: the process's CPU time says what the replay
	// costs beside the wall clock.
	c0 := cputime.Process()
	for b.Loop() {
		rep, err := Run(context.Background(), bytes.NewReader(buf.Bytes()), Options{Policy: dir, LoadTimeout: time.Minute, Name: "log"})
		if err != nil {
			b.Fatal(err)
		}
		if rep.Calls != calls || len(rep.Changes) != 100*50 {
			b.Fatalf("%d calls, %d changes", rep.Calls, len(rep.Changes))
		}
	}
	b.ReportMetric(float64(calls), "calls/op")
	b.ReportMetric((cputime.Process()-c0).Seconds()/float64(b.N), "cpu-s/op")
}

// FuzzP18ReplayLog: whatever a log holds, replay answers with a report or
// a sentence that names where it stopped, and never panics (rule R2).
func FuzzP18ReplayLog(f *testing.F) {
	page := map[string]any{"file_path": "/tmp/page.html"}
	f.Add(rec("a", "running", "r1", "Read", page, true, false) + rec("a", "result", "r1", "Read", nil, true, false))
	f.Add(`{"v":2,"phase":"running"}` + "\n")
	f.Add(`{"v":1,"phase":"result","call_id":"x","text":"t"}` + "\n" + `{"v":1,"phase":"user","text":"hi"}`)
	f.Add("not json\n")
	dir := policyDir(f, strict)
	f.Fuzz(func(t *testing.T, log string) {
		rep, err := Run(context.Background(), strings.NewReader(log), Options{Policy: dir, LoadTimeout: time.Minute, Name: "log"})
		if err == nil && rep == nil || err != nil && !strings.HasPrefix(err.Error(), "log") && !strings.HasPrefix(err.Error(), "none of the") {
			t.Fatalf("report %v, error %v", rep, err)
		}
	})
}
