package gateway_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/gateway"
)

// recorded is a decision log of one session, written with its calls
// (--decision-log-calls): a read of a page outside the tree, its result,
// then a write, which the policy that served it allowed.
const recorded = `{"time":"2026-12-03T09:56:57Z","phase":"running","call_id":"r1","tool":"Read","surface":["agent"],"subject":"/tmp/page.html","allowed":true,"rule":"P11","revision":"e4038670eed4","generation":1,"v":1,"session":"s1","workdir":"/srv/project","input":{"file_path":"/tmp/page.html"}}
{"time":"2026-12-03T09:56:57Z","phase":"result","call_id":"r1","tool":"Read","surface":["agent"],"revision":"e4038670eed4","generation":1,"result_error":false,"v":1,"session":"s1","text_sha256":"sha256:c3b43e959d88f066523302276a4e4377686a18149866ef9a8a2855ac7c1e10d0","text_bytes":25}
{"time":"2026-12-03T09:56:58Z","phase":"running","call_id":"w1","tool":"Write","surface":["agent"],"subject":"/srv/project/out.txt","allowed":true,"rule":"P11","revision":"e4038670eed4","generation":1,"v":1,"session":"s1","workdir":"/srv/project","input":{"content":"x","file_path":"/srv/project/out.txt"}}
`

// candidate writes a policy directory whose flow denies a write once the
// session has read a page outside the tree.
func candidate() string {
	dir, _ := os.MkdirTemp("", "candidate")
	os.MkdirAll(filepath.Join(dir, "cue.mod"), 0o755)
	os.WriteFile(filepath.Join(dir, "cue.mod", "module.cue"), []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Write: schema.#Write}
labels: untrusted: {entries: ["Read"], trusted: ["Read(./**)"]}
agent: when: untrusted: "denied-tools": ["Write"]
`), 0o644)
	return dir
}

// Replay a decision log under a candidate policy before putting it in
// force: what it would have changed, call by call.
func ExampleReplay() {
	dir := candidate()
	defer os.RemoveAll(dir)
	rep, err := gateway.Replay(context.Background(), strings.NewReader(recorded), dir, gateway.ReplayOptions{Name: "decisions.jsonl"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.Calls, "calls in", rep.Sessions, "session")
	for _, c := range rep.Changes {
		fmt.Printf("line %d: %s %s: %s → %s by %s\n", c.Line, c.Tool, c.Subject, c.Was, c.Now, c.Rule)
	}
	// Output:
	// 2 calls in 1 session
	// line 3: Write /srv/project/out.txt: allowed → refused by P18
}

// Each log Replay cannot read is an error that places it at its line and
// says what to give instead, and no report (rule P18: a replay judges a
// candidate on what was recorded, or not at all): a torn last record, a
// line that is not a record, a record of a later version, a log of no
// call, a candidate that does not load. The report prints as aimon-gw
// replay prints it.
func TestP18ReplayBadInput(t *testing.T) {
	dir := candidate()
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, c := range []struct{ note, log, candidate, want string }{
		{"torn", strings.TrimSuffix(recorded, "\n"), dir, "d.jsonl:3: the last record is cut short (no newline ends it)"},
		{"not a record", "{\"v\":1}\nnot json\n", dir, "d.jsonl:2: the line is not a decision record"},
		{"later version", strings.Replace(recorded, `"v":1,"session":"s1","workdir"`, `"v":2,"session":"s1","workdir"`, 1), dir, "d.jsonl:1: the record is of version 2"},
		{"no call", "\n", dir, "d.jsonl holds no record, so there is nothing to replay"},
		{"candidate", recorded, filepath.Join(dir, "none"), "the candidate policy in " + filepath.Join(dir, "none") + " does not load"},
	} {
		rep, err := gateway.Replay(context.Background(), strings.NewReader(c.log), c.candidate, gateway.ReplayOptions{Name: "d.jsonl"})
		if err == nil || rep != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Replay = %v, %v; want no report and an error saying %q", c.note, rep, err, c.want)
		}
	}
	rep, err := gateway.Replay(context.Background(), strings.NewReader(recorded), dir, gateway.ReplayOptions{Name: "d.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rep.Print(&b); err != nil {
		t.Fatal(err)
	}
	if want := "d.jsonl:3: session s1 call w1 Write(/srv/project/out.txt): allowed → refused by P18: Write is denied on this surface"; !strings.HasPrefix(b.String(), want) || !strings.Contains(b.String(), "1 call changes (1 allowed → refused)") {
		t.Errorf("Print:\n%s\nwant it to begin %q", b.String(), want)
	}
}
