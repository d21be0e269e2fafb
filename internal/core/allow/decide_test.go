package allow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"cuelang.org/go/cue/cuecontext"

	"aimon.dev/gw/internal/core/rule"
)

// TestP5NoSubjectDenies: without a subject a patterned tool is denied, and
// the sentence says what was wrong with the field.
func TestP5NoSubjectDenies(t *testing.T) {
	e := chain(t, []string{"Read(/tmp/**)", "Bash(git:*)", "Grep(/tmp/**)"})
	for _, c := range []struct {
		tool, workdir string
		in            map[string]any
		why           string
	}{
		{"Read", "", map[string]any{"file_path": "x"}, "no absolute working directory"},
		{"Read", "relative/dir", map[string]any{"file_path": "x"}, "no absolute working directory"},
		{"Read", "/tmp", map[string]any{}, "is missing"},
		{"Read", "/tmp", map[string]any{"file_path": nil}, "is missing"},
		{"Read", "/tmp", map[string]any{"file_path": json.Number("3")}, "is a number"},
		{"Read", "/tmp", map[string]any{"file_path": true}, "is a boolean"},
		{"Read", "/tmp", map[string]any{"file_path": []any{"/tmp/x"}}, "is an array"},
		{"Read", "/tmp", map[string]any{"file_path": map[string]any{"path": "/tmp/x"}}, "is an object"},
		{"Read", "/tmp", map[string]any{"file_path": ""}, "is blank"},
		{"Read", "/tmp", map[string]any{"file_path": "/tmp/a\x00b"}, "NUL"},
		{"Read", "/tmp", nil, "is missing"},
		{"Grep", "/tmp", map[string]any{"pattern": "x"}, "is missing"},
		{"Bash", "/tmp", map[string]any{"command": "   "}, "is blank"},
		{"Bash", "/tmp", map[string]any{"command": json.Number("1")}, "is a number"},
	} {
		d := e.Decide(c.tool, c.in, c.workdir)
		if d.Allowed || d.Rule != "P5" || !strings.Contains(d.Reason, c.why) || !strings.Contains(d.Reason, c.tool+"(") {
			t.Errorf("%s %v in %q: %+v, want a P5 denial saying %q", c.tool, c.in, c.workdir, d, c.why)
		}
	}
	// A relative path with a working directory does have a subject.
	if d := e.Decide("Read", map[string]any{"file_path": "x"}, "/tmp"); !d.Allowed {
		t.Errorf("relative path under the working directory denied: %+v", d)
	}
	if d := e.Decide("Read", map[string]any{"file_path": "../etc/passwd"}, "/tmp"); d.Allowed || d.Rule != "P4" || !strings.Contains(d.Reason, `resolved to "/etc/passwd"`) {
		t.Errorf("../etc/passwd from /tmp: %+v, want a P4 denial naming the resolved path", d)
	}
}

// TestP5NameOnlyNeedsNoSubject: a tool allowed by name runs whatever its
// input, since nothing narrows it.
func TestP5NameOnlyNeedsNoSubject(t *testing.T) {
	e := chain(t, []string{"Read", "Echo"})
	for _, in := range []map[string]any{nil, {}, {"file_path": 3}, {"file_path": "rel"}} {
		if d := e.Decide("Read", in, ""); !d.Allowed || d.Rule != "P6" {
			t.Errorf("Read %v: %+v, want allowed by name", in, d)
		}
	}
	if d := e.Decide("Echo", map[string]any{"message": "hi"}, ""); !d.Allowed || !slices.Equal(d.Entries, []string{"Echo"}) {
		t.Errorf("Echo: %+v", d)
	}
}

// TestP6ByNameDecisionIsEachCalls: a tool listed by name along the chain
// is decided from the one decision made with the chain (issue 49), its
// reason and entries the list's; a caller that appends to or changes a
// decision's own fields leaves the next call's decision as it was.
func TestP6ByNameDecisionIsEachCalls(t *testing.T) {
	e := mustChain(t, compile(t, "Echo", "Read"), compile(t, "Echo"))
	first := e.Decide("Echo", map[string]any{"message": "a"}, "/")
	if !first.Allowed || first.Rule != "P6" || first.Reason != "Echo is allowed by name." || strings.Join(first.Entries, ",") != "Echo,Echo" {
		t.Fatalf("by name: %+v", first)
	}
	first.Entries = append(first.Entries, "Bash")
	first.Reason, first.Allowed = "changed", false
	again := e.Decide("Echo", map[string]any{"message": "b"}, "/")
	if !again.Allowed || again.Reason != "Echo is allowed by name." || strings.Join(again.Entries, ",") != "Echo,Echo" {
		t.Errorf("a change to one decision reached the next: %+v", again)
	}
	if d := e.Decide("Read", map[string]any{"file_path": "/x"}, "/"); d.Allowed {
		t.Errorf("Read is not in the second list: %+v", d)
	}
}

func TestP6MixedEntries(t *testing.T) {
	for _, entries := range [][]string{
		{"Read", "Read(/tmp/**)"},
		{"Read(/tmp/**)", "Read"},
		{"Read", "Read(/tmp/**)", "Read"},
	} {
		e := chain(t, entries)
		if d := e.Decide("Read", map[string]any{"file_path": "/tmp/x"}, ""); !d.Allowed {
			t.Errorf("%q: /tmp/x denied: %+v", entries, d)
		}
		if d := e.Decide("Read", map[string]any{"file_path": "/etc/passwd"}, ""); d.Allowed {
			t.Errorf("%q: /etc/passwd allowed: a name-only entry beside a pattern is not unlimited", entries)
		}
	}
}

// TestP4PathBypasses: escapes by .., sibling prefixes, separators and
// relative paths do not get out of the pattern.
func TestP4PathBypasses(t *testing.T) {
	e := chain(t, []string{"Read(/tmp/**)", "Write(/work/*.txt)", "Edit(/work/report(1).csv)"})
	for _, c := range []struct {
		tool, path, workdir string
		want                bool
	}{
		{"Read", "/tmp/x", "", true},
		{"Read", "/tmp", "", true},
		{"Read", "/tmp/a/b/c", "", true},
		{"Read", "/tmp/../etc/passwd", "", false},
		{"Read", "/tmp/./../etc/passwd", "", false},
		{"Read", "/tmpevil", "", false},
		{"Read", "/tmpevil/x", "", false},
		{"Read", "//tmp//x", "", true},
		{"Read", "/etc/passwd", "", false},
		{"Read", "x", "/tmp", true},
		{"Read", "../etc/passwd", "/tmp", false},
		{"Read", "x/../../etc/passwd", "/tmp", false},
		{"Read", "x", "/etc", false},
		{"Read", "/tmp/x\x00/../../etc/passwd", "", false},
		{"Read", "/tmp/a;rm -rf /", "", true}, // metacharacters are ordinary in paths
		{"Write", "/work/a.txt", "", true},
		{"Write", "/work/sub/a.txt", "", false},
		{"Write", "/work/.txt", "", true},
		{"Write", "/work/a.txt/../../etc/x.txt", "", false},
		{"Edit", "/work/report(1).csv", "", true},
		{"Edit", "report(1).csv", "/work", true},
		{"Edit", "/work/report1.csv", "", false},
	} {
		d := e.Decide(c.tool, map[string]any{"file_path": c.path}, c.workdir)
		if d.Allowed != c.want {
			t.Errorf("%s %q in %q: %+v, want allowed=%v", c.tool, c.path, c.workdir, d, c.want)
		}
	}
}

// TestP7PatternWithoutSubject: a pattern for a tool with neither subject nor
// rule denies every call, and the list reports it.
func TestP7PatternWithoutSubject(t *testing.T) {
	l, errs := Compile(testCtx, []string{"Echo(hello)", "Echo", "Read(src/**)", "Read"}, testSubjects)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "Echo(hello)") || !strings.Contains(errs[1].Error(), "relative") {
		t.Fatalf("errors %v, want one for Echo(hello) and one for the relative Read(src/**)", errs)
	}
	e, err := Chain(l)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Listed("Echo") || !e.Listed("Read") {
		t.Errorf("a tool with a pattern entry must stay listed (P9)")
	}
	for _, c := range []struct {
		tool string
		in   map[string]any
	}{{"Echo", map[string]any{"message": "hello"}}, {"Read", map[string]any{"file_path": "/src/x"}}, {"Read", map[string]any{"file_path": "src/x"}}} {
		if d := e.Decide(c.tool, c.in, "/"); d.Allowed || d.Rule != "P7" || !strings.Contains(d.Reason, "cannot be used") {
			t.Errorf("%s %v: %+v, want a P7 denial", c.tool, c.in, d)
		}
	}
}

// TestP9NotAllowedDiffersFromPattern: no entry and a failed pattern are
// different sentences, and both name the tool.
func TestP9NotAllowedDiffersFromPattern(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Read"})
	no := e.Decide("Write", map[string]any{"file_path": "/x"}, "")
	pat := e.Decide("Bash", map[string]any{"command": "rm -rf /"}, "")
	if no.Allowed || no.Rule != "P9" || !strings.Contains(no.Reason, "Write is not allowed") || !strings.Contains(no.Reason, "no entry") {
		t.Errorf("Write: %+v", no)
	}
	want := `Bash command "rm -rf /" is not allowed on this surface: allowed are Bash(git:*).`
	if pat.Allowed || pat.Rule != "P3" || pat.Reason != want {
		t.Errorf("Bash rm: %+v, want reason %q", pat, want)
	}
	if e.Listed("Write") || !e.Listed("Bash") || !e.Listed("Read") {
		t.Errorf("Listed is wrong: Write %v Bash %v Read %v", e.Listed("Write"), e.Listed("Bash"), e.Listed("Read"))
	}
	if got := e.Tools(); !slices.Equal(got, []string{"Bash", "Read"}) {
		t.Errorf("Tools() = %v", got)
	}
}

// TestP10Intersection: a child is bound by its own list and its caller's.
func TestP10Intersection(t *testing.T) {
	for _, c := range []struct {
		name          string
		parent, child []string
		tool          string
		in            map[string]any
		want          bool
	}{
		{"name meets pattern keeps the pattern", []string{"Bash(git:*)"}, []string{"Bash"}, "Bash", map[string]any{"command": "rm -rf /"}, false},
		{"name meets pattern keeps the pattern (reverse)", []string{"Bash"}, []string{"Bash(git:*)"}, "Bash", map[string]any{"command": "rm -rf /"}, false},
		{"both narrow: inner pattern", []string{"Bash(git:*)"}, []string{"Bash(git log:*)"}, "Bash", map[string]any{"command": "git log -1"}, true},
		{"both narrow: outside the inner", []string{"Bash(git:*)"}, []string{"Bash(git log:*)"}, "Bash", map[string]any{"command": "git push"}, false},
		{"child wider than parent", []string{"Bash(git log:*)"}, []string{"Bash(git:*)"}, "Bash", map[string]any{"command": "git push"}, false},
		{"disjoint paths", []string{"Read(/a/**)"}, []string{"Read(/b/**)"}, "Read", map[string]any{"file_path": "/b/x"}, false},
		{"nested paths", []string{"Read(/a/**)"}, []string{"Read(/a/b/**)"}, "Read", map[string]any{"file_path": "/a/b/c"}, true},
		{"nested paths outside", []string{"Read(/a/**)"}, []string{"Read(/a/b/**)"}, "Read", map[string]any{"file_path": "/a/c"}, false},
		{"tool only in child", []string{"Read"}, []string{"Read", "Write"}, "Write", map[string]any{"file_path": "/x"}, false},
		{"tool only in parent", []string{"Read", "Write"}, []string{"Read"}, "Write", map[string]any{"file_path": "/x"}, false},
		{"name and name", []string{"Read", "Write"}, []string{"Read"}, "Read", map[string]any{"file_path": "/x"}, true},
	} {
		e := chain(t, c.parent, c.child)
		if d := e.Decide(c.tool, c.in, "/"); d.Allowed != c.want {
			t.Errorf("%s: %+v, want allowed=%v", c.name, d, c.want)
		}
	}
	// The denial names both levels.
	e := chain(t, []string{"Bash(git:*)"}, []string{"Bash(git log:*)"})
	d := e.Decide("Bash", map[string]any{"command": "git push"}, "")
	if !strings.Contains(d.Reason, "Bash(git log:*)") || !strings.Contains(d.Reason, "Bash(git:*)") {
		t.Errorf("reason %q does not name both lists", d.Reason)
	}
	// Disjoint patterns leave the tool listed; the empty intersection
	// only shows on a concrete subject.
	e = chain(t, []string{"Read(/a/**)"}, []string{"Read(/b/**)"})
	if !e.Listed("Read") {
		t.Errorf("Read with disjoint patterns is not listed")
	}
	for _, p := range []string{"/a/x", "/b/x", "/c"} {
		if d := e.Decide("Read", map[string]any{"file_path": p}, ""); d.Allowed {
			t.Errorf("disjoint patterns allowed %q", p)
		}
	}
}

// TestP10ThreeLevels: every level of a longer chain binds.
func TestP10ThreeLevels(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Read"}, []string{"Bash", "Read(/w/**)"}, []string{"Bash(git log:*)", "Bash(git status)", "Read"})
	for _, c := range []struct {
		tool string
		in   map[string]any
		want bool
	}{
		{"Bash", map[string]any{"command": "git status"}, true},
		{"Bash", map[string]any{"command": "git log -3"}, true},
		{"Bash", map[string]any{"command": "git push"}, false},
		{"Read", map[string]any{"file_path": "/w/x"}, true},
		{"Read", map[string]any{"file_path": "/etc/x"}, false},
	} {
		if d := e.Decide(c.tool, c.in, ""); d.Allowed != c.want {
			t.Errorf("%s %v: %+v, want %v", c.tool, c.in, d, c.want)
		}
	}
}

func TestP11Unlimited(t *testing.T) {
	for _, e := range []*Effective{nil, mustChain(t), mustChain(t, nil, nil)} {
		if !e.Unlimited() || !e.Listed("Anything") || e.Tools() != nil {
			t.Errorf("no list must be unlimited: %+v", e)
		}
		if d := e.Decide("Bash", map[string]any{"command": "rm -rf /"}, ""); !d.Allowed || d.Rule != "P11" {
			t.Errorf("unlimited chain denied: %+v", d)
		}
	}
	// A surface without a list under one with a list is bound by that list.
	e := mustChain(t, compile(t, "Read"), nil)
	if e.Unlimited() || e.Decide("Bash", map[string]any{"command": "ls"}, "").Allowed {
		t.Errorf("nil list widened the chain")
	}
}

// TestP11UnlimitedReasonIsEachTools: the reason of an unlimited chain's
// call, kept per tool after its first (issue 49), names the tool decided,
// from many goroutines at once, past the number of tools kept too (a
// name arriving after that is told its own reason, made again).
func TestP11UnlimitedReasonIsEachTools(t *testing.T) {
	for _, e := range []*Effective{nil, mustChain(t)} {
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range maxUnlimitedReasons/2 + 100 {
					tool := fmt.Sprintf("T%d", (i*4+g)%(maxUnlimitedReasons+300))
					d := e.Decide(tool, nil, "")
					if want := tool + " is allowed: no allowed-tools list limits this surface."; !d.Allowed || d.Rule != "P11" || d.Reason != want {
						t.Errorf("%s: %+v, want the reason %q", tool, d, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

func mustChain(t testing.TB, ls ...*List) *Effective {
	t.Helper()
	e, err := Chain(ls...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestP11NoToolLeftIsRefused: an empty intersection is an error, never an
// empty (unlimited) list.
func TestP11NoToolLeftIsRefused(t *testing.T) {
	for _, c := range [][2][]string{
		{{"Read"}, {"Write"}},
		{{"Read", "Bash(git:*)"}, {"Write", "Grep"}},
		{{}, {"Read"}},
		{{"Read"}, {}},
		{{"Nope"}, {"Nope"}}, // only unknown tools
	} {
		_, err := Chain(compile(t, c[0]...), compile(t, c[1]...))
		if !errors.Is(err, ErrNoTool) || !strings.Contains(err.Error(), "no tool in common") {
			t.Errorf("%q within %q: err = %v, want ErrNoTool", c[1], c[0], err)
		}
	}
	// The same list twice binds once.
	l := compile(t, "Bash(git:*)")
	e := mustChain(t, l, l, l)
	if d := e.Decide("Bash", map[string]any{"command": "git log"}, ""); !d.Allowed || !slices.Equal(d.Entries, []string{"Bash(git:*)"}) {
		t.Errorf("a repeated list: %+v", d)
	}
	if _, err := Chain(compile(t)); !errors.Is(err, ErrNoTool) {
		t.Errorf("a declared empty list: err = %v, want ErrNoTool", err)
	}
	// A list of MCP entries leaves the client's MCP tools, which its front
	// end decides by name: the run is not refused, and a tool it does not
	// name is.
	e, err := Chain(compile(t, "mcp__github"))
	if err != nil {
		t.Fatalf("a list of only mcp__github: %v", err)
	}
	if d := e.Decide("Read", map[string]any{"file_path": "/x"}, "/"); d.Allowed || d.Ask {
		t.Errorf("Read under [mcp__github]: %+v", d)
	}
}

func TestP12ToolsAndUnknown(t *testing.T) {
	l := compile(t, "Read", "Raed", "Bash(git:*)", "Bash")
	if got := l.Tools(); !slices.Equal(got, []string{"Bash", "Read"}) {
		t.Errorf("Tools() = %v", got)
	}
	if got := l.Unknown(); !slices.Equal(got, []string{"Raed"}) {
		t.Errorf("Unknown() = %v", got)
	}
	l, errs := Compile(testCtx, []string{"Raed", "Wirte(/x)"}, testSubjects)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "not a tool this policy defines") {
		t.Errorf("errors %v", errs)
	}
	if len(l.Tools()) != 0 || !slices.Equal(l.Unknown(), []string{"Raed", "Wirte"}) {
		t.Errorf("a list of typos: Tools %v Unknown %v", l.Tools(), l.Unknown())
	}
	var nilList *List
	if nilList.Tools() != nil || nilList.Unknown() != nil {
		t.Errorf("a nil list has tools")
	}
}

// TestCompileDropsUnreadableEntries: an entry without a readable name is
// reported and dropped; the others still apply.
func TestCompileDropsUnreadableEntries(t *testing.T) {
	l, errs := Compile(testCtx, []string{"Re ad", "Read(/tmp/**)"}, testSubjects)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `"Re ad"`) {
		t.Fatalf("errors %v", errs)
	}
	e := mustChain(t, l)
	if d := e.Decide("Read", map[string]any{"file_path": "/tmp/x"}, ""); !d.Allowed {
		t.Errorf("%+v", d)
	}
}

func TestChainRejectsMixedContexts(t *testing.T) {
	other, _ := Compile(cuecontext.New(), []string{"Read"}, testSubjects)
	if _, err := Chain(compile(t, "Read"), other); err == nil || !strings.Contains(err.Error(), "contexts") {
		t.Errorf("err = %v", err)
	}
}

// TestP2OwnRule: a tool with its own rule is decided by it, under the
// intersection of the chain's patterns.
func TestP2OwnRule(t *testing.T) {
	e := chain(t, []string{"Browser(navigate:https://)", "Browser(click:)"}, []string{"Browser(navigate:https://docs.)", "Browser(click:)"})
	for _, c := range []struct {
		in   map[string]any
		want bool
	}{
		{map[string]any{"action": "navigate", "url": "https://docs.example"}, true},
		{map[string]any{"action": "navigate", "url": "https://evil.example"}, false},
		{map[string]any{"action": "navigate", "url": "http://docs.example"}, false},
		{map[string]any{"action": "click", "url": "anything"}, true},
		{map[string]any{"action": "type"}, false},
		{nil, false},
	} {
		if d := e.Decide("Browser", c.in, ""); d.Allowed != c.want || d.Rule != "P2" {
			t.Errorf("Browser %v: %+v, want allowed=%v", c.in, d, c.want)
		}
	}
	// An error or a panic in the rule denies, with the rule's sentence.
	e = chain(t, []string{"Browser(nocolon)", "Browser(panic:x)"})
	d := e.Decide("Browser", map[string]any{"action": "panic"}, "")
	if d.Allowed || !strings.Contains(d.Reason, "not action:url") || !strings.Contains(d.Reason, "rule failed") {
		t.Errorf("%+v", d)
	}
}

// TestP2SubjectFirst: a tool with a subject and its own rule is judged on
// its subject; the rule decides only a call without one.
func TestP2SubjectFirst(t *testing.T) {
	e := chain(t, []string{"Fetch(/data/**)", "Fetch(get:https://ok.)"})
	for _, c := range []struct {
		in   map[string]any
		want bool
		rule rule.ID
	}{
		{map[string]any{"path": "/data/x"}, true, rule.P4},
		{map[string]any{"path": "/etc/x", "action": "get", "url": "https://ok.x"}, false, rule.P4},
		{map[string]any{"action": "get", "url": "https://ok.x"}, true, rule.P2},
		{map[string]any{"action": "get", "url": "https://bad.x"}, false, rule.P2},
	} {
		if d := e.Decide("Fetch", c.in, ""); d.Allowed != c.want || d.Rule != c.rule {
			t.Errorf("Fetch %v: %+v, want allowed=%v by %s", c.in, d, c.want, c.rule)
		}
	}
}

func TestDecisionEntries(t *testing.T) {
	e := chain(t, []string{"Read(/a/**)", "Read(/b/**)", "Bash"}, []string{"Read(/a/x/**)", "Bash"})
	d := e.Decide("Read", map[string]any{"file_path": "/a/x/y"}, "")
	if !d.Allowed || !slices.Equal(d.Entries, []string{"Read(/a/**)", "Read(/a/x/**)"}) {
		t.Errorf("%+v", d)
	}
	d = e.Decide("Bash", map[string]any{"command": "ls"}, "")
	if !d.Allowed || !slices.Equal(d.Entries, []string{"Bash", "Bash"}) {
		t.Errorf("%+v", d)
	}
}

// TestChainsCachesOnce: the effective list of a chain is computed once and
// shared.
func TestChainsCachesOnce(t *testing.T) {
	c := &Chains{}
	a, b := compile(t, "Read"), compile(t, "Read", "Write")
	e1, err1 := c.Get("agent\x00skill:x", a, b)
	e2, err2 := c.Get("agent\x00skill:x", a, b)
	if err1 != nil || err2 != nil || e1 != e2 {
		t.Errorf("not cached: %p %p %v %v", e1, e2, err1, err2)
	}
	defer func(n int) { maxChains = n }(maxChains)
	maxChains = 8
	for i := 0; i < maxChains+10; i++ {
		if _, err := c.Get(fmt.Sprint("deep", i), a, b); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) != maxChains {
		t.Errorf("the cache holds %d chains, want at most %d", len(c.m), maxChains)
	}
	var d Chains
	c = &d
	_, err := c.Get("agent\x00skill:y", a, compile(t, "Write"))
	_, again := c.Get("agent\x00skill:y")
	if !errors.Is(err, ErrNoTool) || err != again {
		t.Errorf("refusal not cached: %v %v", err, again)
	}
}

// TestDecideConcurrently runs decisions on one effective list from many
// goroutines, for the race detector.
func TestDecideConcurrently(t *testing.T) {
	e := chain(t, []string{"Bash(git:*)", "Read(/tmp/**)", "Browser(click:)"}, []string{"Bash(git log:*)", "Read", "Browser"})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				cmd := fmt.Sprintf("git log -%d", i)
				if !e.Decide("Bash", map[string]any{"command": cmd}, "").Allowed {
					t.Errorf("%q denied", cmd)
				}
				if e.Decide("Read", map[string]any{"file_path": "/etc/x"}, "").Allowed {
					t.Errorf("/etc/x allowed")
				}
				if !e.Decide("Browser", map[string]any{"action": "click"}, "").Allowed {
					t.Errorf("click denied")
				}
			}
		}()
	}
	wg.Wait()
}

// FuzzDecide: whatever the tool name, input and working directory, Decide
// answers without panicking, and a denial always has a reason.
func FuzzDecide(f *testing.F) {
	e := chain(f, []string{"Bash(git:*)", "Read(/tmp/**)", "Grep", "Browser(click:)", "Echo"}, []string{"Bash", "Read", "Grep(/w/**)", "Browser", "Echo", "Write(/w/*)"})
	f.Add("Bash", "command", "git log", "/w")
	f.Add("Read", "file_path", "../x", "")
	f.Add("Browser", "action", "click", "/")
	f.Add("Nope", "x", "\x00", "rel")
	f.Fuzz(func(t *testing.T, tool, field, value, workdir string) {
		for _, v := range []any{value, json.Number(value), []any{value}, map[string]any{field: value}, nil} {
			d := e.Decide(tool, map[string]any{field: v, "action": value, "url": value}, workdir)
			if !d.Allowed && (d.Reason == "" || d.Rule == "") {
				t.Fatalf("%s %s=%v: denial without reason: %+v", tool, field, v, d)
			}
			if d.Allowed && !e.Listed(tool) {
				t.Fatalf("%s allowed but not listed", tool)
			}
		}
	})
}

func TestEffectiveEntries(t *testing.T) {
	e := chain(t, []string{"Read", "Bash(git:*)"}, []string{"Read(/w/**)", "Bash"})
	if got := e.Entries("Bash"); !slices.Equal(got, []string{"Bash(git:*)", "Bash"}) {
		t.Errorf("Entries(Bash) = %q", got)
	}
	if got := e.Entries("Write"); got == nil || len(got) != 0 {
		t.Errorf("Entries(Write) = %#v, want empty", got)
	}
	var unlimited *Effective
	if got := unlimited.Entries("Read"); got != nil {
		t.Errorf("unlimited Entries = %q", got)
	}
}

// TestP7MalformedEntryDenies: an entry that cannot be parsed but names a
// tool counts as a pattern entry of it (rule P6), so the list denies as vet
// says it does, rather than leaving a bare name unlimited.
func TestP7MalformedEntryDenies(t *testing.T) {
	tests := []struct {
		note    string
		entries []string
	}{
		{"space before the parenthesis", []string{"Read (/tmp/**)", "Read"}},
		{"unclosed pattern", []string{"Read(/tmp/**", "Read"}},
		{"trailing space, no pattern", []string{"Read ", "Read"}},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			l, errs := Compile(testCtx, tc.entries, testSubjects)
			if len(errs) == 0 {
				t.Error("Compile reported no problem")
			}
			e, err := Chain(l)
			if err != nil {
				t.Fatal(err)
			}
			d := e.Decide("Read", map[string]any{"file_path": "/etc/passwd"}, "/")
			if d.Allowed || d.Rule != rule.P7 {
				t.Errorf("Read /etc/passwd = %+v, want a P7 denial", d)
			}
		})
	}
}

// TestP10RefusalNamesClosestEntries: under long lists a refusal names a
// bounded number of entries, the closest to the subject first among them,
// and says how many more there are; short lists are named whole.
func TestP10RefusalNamesClosestEntries(t *testing.T) {
	agent, skill := longLists(t, 1000)
	e := mustChain(t, agent, skill)
	d := e.Decide("Read", map[string]any{"file_path": "/srv/d500/src/x.go"}, "/")
	if d.Allowed || len(d.Entries) > maxShown || !slices.Contains(d.Entries, "Read(/srv/d500/docs/**)") || !slices.Contains(d.Entries, "Read(/srv/d500/**)") {
		t.Errorf("Entries = %q, want at most %d, the closest of both levels among them", d.Entries, maxShown)
	}
	if !strings.Contains(d.Reason, "and 995 more") || len(d.Reason) > 1000 {
		t.Errorf("reason (%d bytes) %q, want the count of the entries left out", len(d.Reason), d.Reason)
	}
	d = e.Decide("Bash", map[string]any{"command": "rm -rf /"}, "/")
	if d.Allowed || len(d.Entries) != maxShown || !strings.Contains(d.Reason, "more") {
		t.Errorf("%+v", d)
	}
	e = chain(t, []string{"Bash(git:*)", "Bash(ls)"})
	if d := e.Decide("Bash", map[string]any{"command": "rm"}, "/"); !slices.Equal(d.Entries, []string{"Bash(git:*)", "Bash(ls)"}) || strings.Contains(d.Reason, "more") {
		t.Errorf("a short list: %+v", d)
	}
}

// linearClosest is closest as a scan of every entry: the reference the
// sorted search must agree with.
func linearClosest(te *toolEntries, subj string, n int) ([]string, int) {
	type scored struct{ i, score int }
	top := make([]scored, 0, n+1)
	total := 0
	for i, in := range te.infos {
		if !in.HasPattern {
			continue
		}
		total++
		k := 0
		for k < len(in.Pattern) && k < len(subj) && in.Pattern[k] == subj[k] {
			k++
		}
		j := len(top)
		for j > 0 && top[j-1].score < k {
			j--
		}
		if j < n {
			top = slices.Insert(top, j, scored{i, k})
			if len(top) > n {
				top = top[:n]
			}
		}
	}
	slices.SortFunc(top, func(a, b scored) int { return a.i - b.i })
	out := make([]string, len(top))
	for j, s := range top {
		out[j] = te.infos[s.i].Raw
	}
	return out, total - len(top)
}

// TestP10ClosestIsTheLinearScan: the entries a refusal names are the same
// whether found through the sorted patterns or by scanning them all: the
// n sharing the longest prefix with the subject, the earlier first among
// equals, name-only entries and duplicates among them.
func TestP10ClosestIsTheLinearScan(t *testing.T) {
	levelOf := func(patterns []string) *toolEntries {
		te := &toolEntries{}
		for i, p := range patterns {
			e := Entry{Raw: fmt.Sprintf("Read(%s)#%d", p, i), Tool: "Read", Pattern: p, HasPattern: p != ""}
			if p == "" {
				e.Raw = fmt.Sprintf("Read#%d", i)
			}
			te.infos = append(te.infos, entryInfo{Entry: e, idx: i})
		}
		te.index(None)
		return te
	}
	for _, c := range []struct {
		note     string
		patterns []string
		subj     string
		n        int
	}{
		{note: "no subject: the first ones", patterns: []string{"/b", "/a", "/c", "/d"}, subj: "", n: 2},
		{note: "one tier larger than n: the earliest", patterns: []string{"/x/1", "/x/2", "/x/3", "/y"}, subj: "/x/9", n: 2},
		{note: "both sides of where the subject sorts", patterns: []string{"/a/b", "/a/d", "/a/c", "/b"}, subj: "/a/c/x", n: 2},
		{note: "duplicates and name-only entries", patterns: []string{"", "/a", "/a", "", "/a", "/b"}, subj: "/a", n: 2},
		{note: "subject sorts past every pattern", patterns: []string{"/a", "/b", "/c"}, subj: "/z", n: 1},
		{note: "n covers them all", patterns: []string{"/a", "", "/b"}, subj: "/b", n: 5},
		{note: "a pattern longer than the subject", patterns: []string{"/srv/d500/docs/**", "/srv/d50/**", "/srv/d5/**"}, subj: "/srv/d5", n: 1},
	} {
		te := levelOf(c.patterns)
		got, more := te.closest(c.subj, c.n, nil)
		want, wantMore := linearClosest(te, c.subj, c.n)
		if !slices.Equal(got, want) || more != wantMore {
			t.Errorf("%s: closest = %q and %d more, the scan %q and %d more", c.note, got, more, want, wantMore)
		}
	}
	rng := rand.New(rand.NewPCG(32, 10))
	word := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteByte("/ab*"[rng.IntN(4)])
		}
		return b.String()
	}
	for round := range 3000 {
		patterns := make([]string, 1+rng.IntN(60))
		for i := range patterns {
			if rng.IntN(8) > 0 {
				patterns[i] = "/" + word()
			}
		}
		te, subj, n := levelOf(patterns), "/"+word(), 1+rng.IntN(12)
		if rng.IntN(10) == 0 {
			subj = ""
		}
		got, more := te.closest(subj, n, nil)
		want, wantMore := linearClosest(te, subj, n)
		if !slices.Equal(got, want) || more != wantMore {
			t.Fatalf("round %d: closest(%q, %d) of %q = %q and %d more, the scan %q and %d more", round, subj, n, patterns, got, more, want, wantMore)
		}
	}
}

// TestP10EntriesGatheredOnce: Entries, gathered once per chain, gives for
// every tool what the lists give (allow, then deny and ask entries), empty
// for a tool no list names, the same slice on every call, and without
// room that an append could write in (issue 32).
func TestP10EntriesGatheredOnce(t *testing.T) {
	agent, errs := CompileDecl(testCtx, Decl{Allow: []string{"Read", "Bash(git:*)", "Grep"}, Deny: []string{"Bash(git push:*)", "Write"}, Ask: []string{"Read(/etc/**)"}}, testSubjects)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e := mustChain(t, agent, compile(t, "Read(/w/**)", "Bash"))
	for _, tc := range []struct {
		note, tool string
		want       []string
	}{
		{note: "allow entries of both lists", tool: "Bash", want: []string{"Bash(git:*)", "Bash", "Bash(git push:*)"}},
		{note: "allow then ask", tool: "Read", want: []string{"Read", "Read(/w/**)", "Read(/etc/**)"}},
		{note: "denied only", tool: "Write", want: []string{"Write"}},
		{note: "bad input: a tool no list names", tool: "Nope", want: []string{}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			got := e.Entries(tc.tool)
			if !slices.Equal(got, tc.want) || got == nil || !slices.Equal(got, e.entriesOf(tc.tool)) {
				t.Fatalf("Entries(%s) = %#v, want %#v", tc.tool, got, tc.want)
			}
			if again := e.Entries(tc.tool); len(got) > 0 && &again[0] != &got[0] {
				t.Errorf("Entries(%s) gathered again", tc.tool)
			}
			if cap(got) != len(got) {
				t.Errorf("Entries(%s) has room past its end, which an append would write in the shared array", tc.tool)
			}
		})
	}
}

// TestP10RefusalSentence pins a refusal's words: the surface's own entries
// within its caller's, the count of those left out, and Entries with the
// caller's first.
func TestP10RefusalSentence(t *testing.T) {
	many := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("Read(%s%d/**)", prefix, i))
		}
		return out
	}
	for _, c := range []struct {
		note        string
		lists       [][]string
		path        string
		wantReason  string
		wantEntries []string
	}{
		{note: "one short list", lists: [][]string{{"Read(/a/**)", "Read(/b/**)"}}, path: "/c",
			wantReason:  `Read path "/c" is not allowed on this surface: allowed are Read(/a/**), Read(/b/**).`,
			wantEntries: []string{"Read(/a/**)", "Read(/b/**)"}},
		{note: "a surface within its caller", lists: [][]string{{"Read(/a/**)", "Read(/b/**)"}, {"Read(/a/x/**)"}}, path: "/b/y",
			wantReason:  `Read path "/b/y" is not allowed on this surface: allowed are Read(/a/x/**) within the caller's Read(/a/**), Read(/b/**).`,
			wantEntries: []string{"Read(/a/**)", "Read(/b/**)", "Read(/a/x/**)"}},
		{note: "a long list: the closest, then how many more", lists: [][]string{many("/d", 12)}, path: "/d1x",
			wantReason:  `Read path "/d1x" is not allowed on this surface: allowed are Read(/d0/**), Read(/d1/**), Read(/d2/**), Read(/d3/**), Read(/d4/**), Read(/d5/**), Read(/d6/**), Read(/d7/**), Read(/d10/**), Read(/d11/**), and 2 more.`,
			wantEntries: []string{"Read(/d0/**)", "Read(/d1/**)", "Read(/d2/**)", "Read(/d3/**)", "Read(/d4/**)", "Read(/d5/**)", "Read(/d6/**)", "Read(/d7/**)", "Read(/d10/**)", "Read(/d11/**)"}},
		{note: "two long levels share the bound", lists: [][]string{many("/d", 120), many("/d1", 7)}, path: "/e",
			wantReason:  `Read path "/e" is not allowed on this surface: allowed are Read(/d10/**), Read(/d11/**), Read(/d12/**), Read(/d13/**), Read(/d14/**), and 2 more within the caller's Read(/d0/**), Read(/d1/**), Read(/d2/**), Read(/d3/**), Read(/d4/**), and 115 more.`,
			wantEntries: []string{"Read(/d0/**)", "Read(/d1/**)", "Read(/d2/**)", "Read(/d3/**)", "Read(/d4/**)", "Read(/d10/**)", "Read(/d11/**)", "Read(/d12/**)", "Read(/d13/**)", "Read(/d14/**)"}},
	} {
		var ls []*List
		for _, l := range c.lists {
			ls = append(ls, compile(t, l...))
		}
		d := mustChain(t, ls...).Decide("Read", map[string]any{"file_path": c.path}, "/")
		if d.Allowed || d.Reason != c.wantReason || !slices.Equal(d.Entries, c.wantEntries) {
			t.Errorf("%s:\n reason  %s\n want    %s\n entries %q\n want    %q", c.note, d.Reason, c.wantReason, d.Entries, c.wantEntries)
		}
	}
}
