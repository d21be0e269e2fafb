package policy

import (
	"strings"
	"testing"
)

const approversPolicy = header + `
tools: {Read: schema.#Read, Bash: schema.#Bash}
agent: {"allowed-tools": ["Read", "Bash"], "ask-tools": ["Bash(git push:*)", "Read(./secret/**)"]}
subagents: ops: "ask-tools": ["Bash(kubectl:*)"]
approvers: {
	release: {group: "release-managers", ask: ["Bash(git push:*)"]}
	owner:   {subject: "olga", ask: ["Read(./secret/**)", "Bash(kubectl:*)"], self: true}
	both:    {subject: "bob", group: "sre", ask: ["Bash(kubectl:*)"]}
}
`

// TestP15ApproversCoverTheirAskEntries: an approver covers the calls its
// ask-tools entries decided, as written, and
// admits the people its group and subject name, both where it gives both.
func TestP15ApproversCoverTheirAskEntries(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": approversPolicy}))
	if err != nil {
		t.Fatal(err)
	}
	names := func(as []*Approver) string {
		var n []string
		for _, a := range as {
			n = append(n, a.Name)
		}
		return strings.Join(n, ",")
	}
	for _, tc := range []struct {
		entries []string
		want    string
	}{
		{[]string{"Bash(git push:*)"}, "release"},
		{[]string{"Read(/w/secret/**)"}, ""},
		{[]string{"Read(./secret/**)"}, "owner"},
		{[]string{"Bash(kubectl:*)"}, "both,owner"},
		{[]string{"Bash(git:*)"}, ""},
		{nil, ""},
	} {
		if got := names(g.ApproversOf(tc.entries)); got != tc.want {
			t.Errorf("%v: approvers %q, want %q", tc.entries, got, tc.want)
		}
	}
	by := map[string]*Approver{}
	for _, a := range g.Approvers {
		by[a.Name] = a
	}
	for _, tc := range []struct {
		approver string
		claims   Claims
		admits   bool
	}{
		{"release", Claims{Subject: "rm", Groups: []string{"dev", "release-managers"}}, true},
		{"release", Claims{Subject: "rm", Groups: []string{"release-manager"}}, false},
		{"owner", Claims{Subject: "olga"}, true},
		{"owner", Claims{Subject: "olga2", Groups: []string{"olga"}}, false},
		{"both", Claims{Subject: "bob", Groups: []string{"sre"}}, true},
		{"both", Claims{Subject: "bob"}, false},
		{"both", Claims{Subject: "eve", Groups: []string{"sre"}}, false},
	} {
		if got := by[tc.approver].Admits(tc.claims); got != tc.admits {
			t.Errorf("%s admits %v: %v", tc.approver, tc.claims, got)
		}
	}
	if !by["owner"].Self || by["release"].Self {
		t.Error("self is not as written")
	}
}

// TestP15ApproversBadInput: an approver naming no one, a group no token
// carries, an entry that cannot be parsed or that no ask-tools holds, a
// misspelt field or an empty list stops the load at its place.
func TestP15ApproversBadInput(t *testing.T) {
	base := header + "tools: {Bash: schema.#Bash}\nagent: {\"allowed-tools\": [\"Bash\"], \"ask-tools\": [\"Bash(git push:*)\"]}\n"
	tests := []struct {
		note, body, want string
	}{
		{"no one", `approvers: r: {ask: ["Bash(git push:*)"]}`, `policy.cue:7:12: approver "r" names no one`},
		{"a group with white space", `approvers: r: {group: "release managers", ask: ["Bash(git push:*)"]}`, `policy.cue:7:23: approver "r"'s group "release managers" holds white space`},
		{"an entry no ask-tools holds", `approvers: r: {group: "g", ask: ["Bash(git push:*)", "Bash(git pull:*)"]}`, `policy.cue:7:54: approver "r" approves "Bash(git pull:*)", which no surface's ask-tools holds`},
		{"an entry that cannot be parsed", `approvers: r: {group: "g", ask: ["Bash(git push:*"]}`, `approver "r"'s entry "Bash(git push:*" cannot be parsed`},
		{"an empty list", `approvers: r: {group: "g", ask: []}`, "approvers.r.ask"},
		{"a group that is a list", `approvers: r: {group: ["a"], ask: ["Bash(git push:*)"]}`, "approvers.r.group"},
		{"a misspelt field", `approvers: r: {groups: "g", ask: ["Bash(git push:*)"]}`, "field not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			_, err := Load(writePolicy(t, map[string]string{"policy.cue": base + tc.body + "\n"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestP15ApproversSurviveSave: a restored generation (the hook's cache)
// knows the approvers the load compiled.
func TestP15ApproversSurviveSave(t *testing.T) {
	_, r := loadRestored(t, approversPolicy)
	if got := r.ApproversOf([]string{"Bash(git push:*)"}); len(got) != 1 || got[0].Group != "release-managers" {
		t.Fatalf("restored approvers %v", got)
	}
}
