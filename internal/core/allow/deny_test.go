package allow

import (
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/core/rule"
)

// chainDecl compiles each declaration (outermost first) and chains them.
func chainDecl(t testing.TB, decls ...Decl) *Effective {
	t.Helper()
	var ls []*List
	for _, d := range decls {
		l, errs := CompileDecl(testCtx, d, testSubjects)
		if len(errs) > 0 {
			t.Fatalf("CompileDecl(%+v): %v", d, errs)
		}
		ls = append(ls, l)
	}
	return mustChain(t, ls...)
}

// outcome names a decision: allowed, ask or denied, and by which rule.
func outcome(d Decision) string {
	switch {
	case d.Allowed:
		return "allowed"
	case d.Ask:
		return "ask " + string(d.Rule)
	}
	return "denied " + string(d.Rule)
}

// TestP14DenyAskAllow: deny beats ask beats allow, and along a chain deny
// and ask accumulate: a child can never lift its caller's.
func TestP14DenyAskAllow(t *testing.T) {
	tests := []struct {
		note    string
		chain   []Decl
		tool    string
		in      map[string]any
		want    string
		entries []string
	}{
		{"deny in a caller binds a child",
			[]Decl{{Allow: []string{"Bash(git:*)"}, Deny: []string{"Bash(git push:*)"}}, {Allow: []string{"Bash(git push:*)"}}},
			"Bash", map[string]any{"command": "git push origin main"}, "denied P14", []string{"Bash(git push:*)"}},
		{"deny in a caller leaves the rest",
			[]Decl{{Allow: []string{"Bash(git:*)"}, Deny: []string{"Bash(git push:*)"}}, {Allow: []string{"Bash"}}},
			"Bash", map[string]any{"command": "git log"}, "allowed", []string{"Bash(git:*)", "Bash"}},
		{"ask in a child",
			[]Decl{{Allow: []string{"Bash(git:*)"}}, {Allow: []string{"Bash"}, Ask: []string{"Bash(git push:*)"}}},
			"Bash", map[string]any{"command": "git push"}, "ask P14", []string{"Bash(git push:*)"}},
		{"ask in a caller binds a child that allows by name",
			[]Decl{{AllowNone: true, Ask: []string{"Bash(git push:*)"}}, {Allow: []string{"Bash"}}},
			"Bash", map[string]any{"command": "git push"}, "ask P14", []string{"Bash(git push:*)"}},
		{"a child adding deny",
			[]Decl{{Allow: []string{"Read"}}, {Allow: []string{"Read"}, Deny: []string{"Read(/srv/**/.env)"}}},
			"Read", map[string]any{"file_path": "/srv/app/.env"}, "denied P14", []string{"Read(/srv/**/.env)"}},
		{"a child's deny does not widen",
			[]Decl{{Allow: []string{"Read(/srv/**)"}}, {Deny: []string{"Read(/srv/secret/**)"}, AllowNone: true}},
			"Read", map[string]any{"file_path": "/etc/passwd"}, "denied P4", []string{"Read(/srv/**)"}},
		{"deny by name against a name-only allow",
			[]Decl{{Allow: []string{"Bash", "Read"}, Deny: []string{"Bash"}}},
			"Bash", map[string]any{"command": "ls"}, "denied P14", []string{"Bash"}},
		{"deny by name beats an ask",
			[]Decl{{AllowNone: true, Deny: []string{"Bash"}, Ask: []string{"Bash"}}},
			"Bash", map[string]any{"command": "ls"}, "denied P14", []string{"Bash"}},
		{"overlapping patterns: deny inside the allow",
			[]Decl{{Allow: []string{"Read(/srv/**)"}, Deny: []string{"Read(/srv/repo/*.key)"}}},
			"Read", map[string]any{"file_path": "/srv/repo/id.key"}, "denied P14", []string{"Read(/srv/repo/*.key)"}},
		{"overlapping patterns: beside the deny",
			[]Decl{{Allow: []string{"Read(/srv/**)"}, Deny: []string{"Read(/srv/repo/*.key)"}}},
			"Read", map[string]any{"file_path": "/srv/repo/sub/id.key"}, "allowed", []string{"Read(/srv/**)"}},
		{"deny on the resolved path",
			[]Decl{{Allow: []string{"Read"}, Deny: []string{"Read(/etc/**)"}}},
			"Read", map[string]any{"file_path": "../etc/passwd"}, "denied P14", []string{"Read(/etc/**)"}},
		{"deny patterns need a subject (P5)",
			[]Decl{{Allow: []string{"Read"}, Deny: []string{"Read(/etc/**)"}}},
			"Read", map[string]any{"file_path": 3}, "denied P5", []string{"Read(/etc/**)"}},
		{"a chained command under a deny pattern",
			[]Decl{{Allow: []string{"Bash"}, Deny: []string{"Bash(rm:*)"}}},
			"Bash", map[string]any{"command": "echo x; rm -rf /"}, "denied P14", []string{"Bash(rm:*)"}},
		{"spaces do not hide a denied command",
			[]Decl{{Allow: []string{"Bash"}, Deny: []string{"Bash(git push:*)"}}},
			"Bash", map[string]any{"command": "git \t push  origin"}, "denied P14", []string{"Bash(git push:*)"}},
		{"ask beats allow: allowed entries and the ask",
			[]Decl{{Allow: []string{"Bash(git push:*)"}, Ask: []string{"Bash(git push:*)"}}},
			"Bash", map[string]any{"command": "git push"}, "ask P14", []string{"Bash(git push:*)"}},
		{"ask does not widen the allow lists",
			[]Decl{{Allow: []string{"Bash(git log:*)"}, Ask: []string{"Bash(git push:*)"}}},
			"Bash", map[string]any{"command": "git push"}, "denied P3", []string{"Bash(git log:*)"}},
		{"an ask by name",
			[]Decl{{Allow: []string{"Write"}, Ask: []string{"Write"}}},
			"Write", map[string]any{"file_path": "/x"}, "ask P14", []string{"Write"}},
		{"an ask by name of a tool without a subject asks",
			[]Decl{{Allow: []string{"Echo"}, Ask: []string{"Echo"}}},
			"Echo", map[string]any{"message": "hi"}, "ask P14", []string{"Echo"}},
		{"an ask by name of a tool without a subject, with no allow list",
			[]Decl{{AllowNone: true, Ask: []string{"Echo"}}},
			"Echo", map[string]any{"message": "hi"}, "ask P14", []string{"Echo"}},
		{"an ask by name in a caller binds a child's tool without a subject",
			[]Decl{{AllowNone: true, Ask: []string{"Echo"}}, {Allow: []string{"Echo", "Read"}}},
			"Echo", map[string]any{}, "ask P14", []string{"Echo"}},
		{"a deny pattern that cannot be used denies (P7)",
			[]Decl{{Allow: []string{"Read"}, Deny: []string{"Read(rel/**)"}}},
			"Read", map[string]any{"file_path": "/x"}, "denied P7", []string{"Read(rel/**)"}},
		{"a domain deny",
			[]Decl{{AllowNone: true, Deny: []string{"WebFetch(domain:*.evil.com)"}}},
			"WebFetch", map[string]any{"url": "https://a.evil.com/x"}, "denied P14", []string{"WebFetch(domain:*.evil.com)"}},
		{"a rule's deny",
			[]Decl{{Allow: []string{"Browser"}, Deny: []string{"Browser(navigate:http://)"}}},
			"Browser", map[string]any{"action": "navigate", "url": "http://x"}, "denied P14", []string{"Browser(navigate:http://)"}},
	}
	subjects := map[string]Subject{"WebFetch": {Field: "url", Kind: Domain}}
	for k, v := range testSubjects {
		subjects[k] = v
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			e := mustChain(t, declsOf(subjects, tc.chain...)...)
			d := e.Decide(tc.tool, tc.in, "/srv")
			if got := outcome(d); got != tc.want || !slices.Equal(d.Entries, tc.entries) || d.Reason == "" {
				t.Errorf("%s %v = %s by %q (%s), want %s by %q", tc.tool, tc.in, got, d.Entries, d.Reason, tc.want, tc.entries)
			}
			// An approval lifts the ask, nothing else.
			if a := e.Approved(tc.tool, tc.in, nil, "/srv"); a.Ask || a.Allowed != (d.Allowed || d.Ask) {
				t.Errorf("Approved = %+v", a)
			}
		})
	}
}

// TestP14AskWithoutSubjectAsks: an ask entry that names a tool without a
// subject asks for every call of it, with a sentence that names the entry,
// and an approval runs it; a name-only ask beside pattern ask entries asks
// too, while a deny pattern that needs a subject still refuses (P5).
func TestP14AskWithoutSubjectAsks(t *testing.T) {
	e := chainDecl(t, Decl{Allow: []string{"Echo"}, Ask: []string{"Echo"}})
	d := e.Decide("Echo", map[string]any{"message": "hi"}, "/")
	if !d.Ask || d.Allowed || d.Reason != "Echo needs approval on this surface: Echo asks for it, and Echo is allowed by name." ||
		strings.Contains(d.Reason, "limited by .") || strings.Contains(d.Reason, "subject") {
		t.Errorf("ask-tools [Echo]: %+v", d)
	}
	if a := e.Approved("Echo", map[string]any{"message": "hi"}, nil, "/"); !a.Allowed {
		t.Errorf("the approved Echo call: %+v", a)
	}
	e = chainDecl(t, Decl{Allow: []string{"Read"}, Ask: []string{"Read", "Read(/etc/**)"}})
	if d := e.Decide("Read", map[string]any{"file_path": 3}, "/"); !d.Ask || d.Rule != rule.P14 {
		t.Errorf("Read without a subject under a name-only ask: %+v", d)
	}
	e = chainDecl(t, Decl{Allow: []string{"Read"}, Deny: []string{"Read(/etc/**)"}, Ask: []string{"Read"}})
	if d := e.Decide("Read", map[string]any{"file_path": 3}, "/"); d.Allowed || d.Ask || d.Rule != rule.P5 {
		t.Errorf("Read without a subject under a deny pattern: %+v", d)
	}
}

// TestP14DeniedByNameIsNotListed: a tool a name-only deny entry denies is
// left out of the definitions, and its calls say why.
func TestP14DeniedByNameIsNotListed(t *testing.T) {
	e := chainDecl(t, Decl{Allow: []string{"Read", "Write(/w/**)"}}, Decl{AllowNone: true, Deny: []string{"Write"}})
	if e.Listed("Write") || !e.Listed("Read") || !slices.Equal(e.Tools(), []string{"Read"}) || e.Unlimited() {
		t.Errorf("Listed(Write) %v, Tools %v", e.Listed("Write"), e.Tools())
	}
	if dirs, all := e.Prefixes("Write"); dirs != nil || all {
		t.Errorf("Prefixes(Write) = %v, %v; a denied tool writes nowhere", dirs, all)
	}
	if got := e.Entries("Write"); !slices.Equal(got, []string{"Write(/w/**)", "Write"}) {
		t.Errorf("Entries(Write) = %q", got)
	}
	d := e.Decide("Write", map[string]any{"file_path": "/w/x"}, "/")
	if d.Allowed || d.Rule != rule.P14 || !strings.Contains(d.Reason, "denied on this surface by Write") {
		t.Errorf("%+v", d)
	}
	// Without allow lists, deny entries still bind.
	e = chainDecl(t, Decl{AllowNone: true, Deny: []string{"Bash"}})
	if e.Unlimited() || e.Listed("Bash") || !e.Listed("Read") || e.Decide("Bash", map[string]any{"command": "ls"}, "/").Allowed || !e.Decide("Read", map[string]any{"file_path": "/x"}, "/").Allowed {
		t.Errorf("deny without allow lists: %+v", e)
	}
}

// TestP14BadEntries: deny and ask entries that cannot be used are reported
// as such, under their own list's name.
func TestP14BadEntries(t *testing.T) {
	_, errs := CompileDecl(testCtx, Decl{Allow: []string{"Read"}, Deny: []string{"Raed(/x)", "Read(rel)", "Re ad"}, Ask: []string{"Echo(hi)"}}, testSubjects)
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	want := []string{`denied-tools entry "Raed(/x)"`, `denied-tools entry "Read(rel)"`, `denied-tools entry "Re ad"`, `ask-tools entry "Echo(hi)"`}
	if len(got) != len(want) {
		t.Fatalf("errors %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
}

func TestP14Covers(t *testing.T) {
	tests := []struct {
		note        string
		k           Kind
		deny, allow string
		want        bool
	}{
		{"a name-only deny covers a pattern", Command, "Bash", "Bash(git:*)", true},
		{"a name-only deny covers the name", Command, "Bash", "Bash", true},
		{"another tool", Command, "Bash", "Read", false},
		{"a pattern does not cover the name", Command, "Bash(rm:*)", "Bash", false},
		{"equal patterns", Path, "Read(/a/*.go)", "Read(/a/*.go)", true},
		{"a wider command prefix", Command, "Bash(git:*)", "Bash(git push:*)", true},
		{"a command within the prefix", Command, "Bash(git push:*)", "Bash(git push origin)", true},
		{"a narrower command prefix", Command, "Bash(git push:*)", "Bash(git:*)", false},
		{"a word boundary", Command, "Bash(git:*)", "Bash(gitk)", false},
		{"an exact deny covers only itself", Command, "Bash(git)", "Bash(git:*)", false},
		{"a tree holds a glob", Path, "Read(/srv/**)", "Read(/srv/repo/*.go)", true},
		{"a tree beside", Path, "Read(/srv/**)", "Read(/srvx/**)", false},
		{"a glob deny cannot tell", Path, "Read(/srv/*/x)", "Read(/srv/a/x)", false},
		{"the root tree", Path, "Read(/**)", "Read(/etc/passwd)", true},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			d, _ := ParseEntry(tc.deny)
			a, _ := ParseEntry(tc.allow)
			if got := Covers(tc.k, d, a); got != tc.want {
				t.Errorf("Covers(%s, %s) = %v", tc.deny, tc.allow, got)
			}
		})
	}
}

// TestR7SentenceQuotesTheSubjectAsWritten: given an input made canonical
// by its caller and the subject as the call wrote it, the lattice's own
// sentence names both, whichever entry decides; the gateway does not edit
// the sentence afterwards.
func TestR7SentenceQuotesTheSubjectAsWritten(t *testing.T) {
	e := chainDecl(t, Decl{Allow: []string{"Write(/home/u/**)"}, Deny: []string{"Write(/home/u/.ssh/**)"}, Ask: []string{"Write(/home/u/.bashrc)"}})
	const both = `"~/.bashrc" (resolved to "/home/u/.bashrc")`
	for _, tc := range []struct {
		note    string
		in      string
		written any
		want    string // outcome
		says    string
	}{
		{"ask, written with ~", "/home/u/.bashrc", "~/.bashrc", "ask P14", both},
		{"allowed, written relative", "/home/u/a.txt", "a.txt", "allowed", `"a.txt" (resolved to "/home/u/a.txt") is allowed`},
		{"denied by a deny entry, written with white space", "/home/u/.ssh/k", " ~/.ssh/k", "denied P14", `" ~/.ssh/k" (resolved to "/home/u/.ssh/k")`},
		{"refused by the allow list", "/etc/passwd", " /etc/passwd", "denied P4", `" /etc/passwd" (resolved to "/etc/passwd") is not allowed`},
		{"written as decided: quoted once", "/home/u/a.txt", "/home/u/a.txt", "allowed", `path "/home/u/a.txt" is allowed`},
		{"nothing written (a default): quoted once", "/home/u/a.txt", nil, "allowed", `path "/home/u/a.txt" is allowed`},
	} {
		d := e.DecideAsWritten("Write", map[string]any{"file_path": tc.in}, tc.written, "/w")
		if outcome(d) != tc.want || !strings.Contains(d.Reason, tc.says) {
			t.Errorf("%s: %s %q; want %s saying %q", tc.note, outcome(d), d.Reason, tc.want, tc.says)
		}
		if tc.written == tc.in || tc.written == nil {
			if strings.Contains(d.Reason, "resolved") {
				t.Errorf("%s: %q names a resolution that did not happen", tc.note, d.Reason)
			}
		}
	}
}

// TestP14LongDenyAndAskListsAreNamedBounded: a refusal or an ask that
// names deny or ask entries it could not judge by (no subject, a chained
// command) names at most maxShown of them and says how many more there
// are; short lists are named whole, as before.
func TestP14LongDenyAndAskListsAreNamedBounded(t *testing.T) {
	var deny, ask []string
	for i := range 1000 {
		deny = append(deny, "Bash(tool"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+":*)", "Read(/srv/d"+strings.Repeat("9", i%5)+string(rune('a'+i%26))+"/**)")
		ask = append(ask, "Grep(/srv/a"+string(rune('a'+i%26))+"/**)")
	}
	long := chainDecl(t, Decl{Allow: []string{"Bash", "Read", "Grep"}, Deny: deny, Ask: ask})
	short := chainDecl(t, Decl{Allow: []string{"Bash", "Read", "Grep"}, Deny: []string{"Bash(rm:*)", "Read(/etc/**)"}, Ask: []string{"Grep(/srv/**)"}})
	for _, c := range []struct {
		note      string
		e         *Effective
		tool      string
		in        map[string]any
		want      string // the outcome
		wantMore  string // in the sentence; "" for none
		wantNamed int    // len(Entries)
	}{
		{note: "no subject under 2,000 deny entries", e: long, tool: "Read", in: map[string]any{}, want: "denied P5", wantMore: ", and 990 more", wantNamed: maxShown},
		{note: "a chained command under 1,000 deny entries", e: long, tool: "Bash", in: map[string]any{"command": "ls; rm -rf /"}, want: "denied P14", wantMore: ", and 990 more", wantNamed: maxShown},
		{note: "no subject under 1 deny entry", e: short, tool: "Read", in: map[string]any{}, want: "denied P5", wantNamed: 1},
		{note: "a chained command under 1 deny entry", e: short, tool: "Bash", in: map[string]any{"command": "ls; rm -rf /"}, want: "denied P14", wantNamed: 1},
		{note: "an ask that matches", e: short, tool: "Grep", in: map[string]any{"pattern": "x", "path": "/srv/x"}, want: "ask P14", wantNamed: 1},
	} {
		d := c.e.Decide(c.tool, c.in, "/")
		if outcome(d) != c.want || len(d.Entries) != c.wantNamed || len(d.Reason) > 1000 ||
			c.wantMore != "" && !strings.Contains(d.Reason, c.wantMore) || c.wantMore == "" && strings.Contains(d.Reason, "more") {
			t.Errorf("%s: %s with %d entries named, %q; want %s with %d named and %q", c.note, outcome(d), len(d.Entries), d.Reason, c.want, c.wantNamed, c.wantMore)
		}
	}
}
