package policy

import (
	"strings"
	"testing"
)

// TestP18ProvenanceCompiles: provenance reads a list of sources or
// {from, values}, by tool and field, sorted; a restored plan keeps it, so a
// cached decision checks what a loaded one does.
func TestP18ProvenanceCompiles(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Echo: schema.#Echo, Bash: schema.#Bash}
provenance: {
	Bash: command: ["user", "trusted"]
	Echo: message: {from: ["user", "policy"], values: ["ops@example.com"]}
}
`}))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := g.Save()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(saved)
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*Generation{"loaded": g, "restored": restored} {
		echo := g.ProvenanceOf("Echo")
		if len(echo) != 1 || echo[0].Field != "message" || !echo[0].Vouches("ops@example.com") || echo[0].Vouches("bob@example.com") || !echo[0].Allows(FromUser) || echo[0].Allows(FromTrusted) {
			t.Errorf("%s: Echo's provenance is %+v", name, echo)
		}
		if fetch := g.ProvenanceOf("Bash"); len(fetch) != 1 || !fetch[0].Allows(FromTrusted) || fetch[0].Vouches("x") {
			t.Errorf("%s: Bash's provenance is %+v", name, fetch)
		}
		if g.ProvenanceOf("Read") != nil {
			t.Errorf("%s: a tool provenance does not name has some", name)
		}
	}
}

// TestP18ProvenanceBadInput: a provenance of a tool the policy does not
// define, of a field its input has not, with no source, with the policy's
// source and no value, or an unknown source: errors at their places.
func TestP18ProvenanceBadInput(t *testing.T) {
	_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Echo: schema.#Echo, Read: schema.#Read}
provenance: {
	Ecko: message: ["user"]
	Echo: mesage: ["user"]
	Read: file_path: []
	Echo: message: ["policy"]
}
`}))
	if err == nil {
		t.Fatal("the policy loaded")
	}
	text := err.Error()
	for _, w := range []string{
		`policy.cue:8:2: provenance names the tool "Ecko", which the policy does not define, so it would check nothing; did you mean "Echo"?`,
		`policy.cue:9:8: provenance of Echo names the field "mesage", which its input does not have, so it would check nothing; its fields are message`,
		`provenance of Read.file_path names no source, so no value could pass`,
		`provenance of Echo.message names the source "policy" but lists no value`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("the load error lacks %q; got:\n%s", w, text)
		}
	}
	_, err = Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
provenance: Echo: message: ["the user"]
`}))
	if err == nil || !strings.Contains(err.Error(), "policy.cue:") {
		t.Errorf("an unknown source: %v", err)
	}
}

// TestP18TestSessionBadInput: a test's session step that gives both the
// user's words and a call, neither, a tool the policy does not define, or
// no input: a warning at its place, as the rest of a test's problems are.
func TestP18TestSessionBadInput(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: Echo: schema.#Echo
tests: t: {tool: "Echo", input: message: "x", allowed: true, session: [
	{user: "hi", tool: "Echo", input: message: "x"},
	{result: "x"},
	{tool: "Ecko", input: message: "x"},
	{tool: "Echo"},
	{user: "fine"},
]}
`}))
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, w := range g.Warnings {
		text = append(text, w.String())
	}
	all := strings.Join(text, "\n")
	for _, w := range []string{
		`policy.cue:8:2: test "t": step 1 of its session must give either user (the user's words) or tool and input`,
		`policy.cue:9:2: test "t": step 2 of its session must give either`,
		`policy.cue:10:2: test "t": step 3 of its session calls Ecko, a tool the policy does not define; did you mean "Echo"?`,
		`policy.cue:11:2: test "t": step 4 of its session needs its call's input as concrete JSON.`,
	} {
		if !strings.Contains(all, w) {
			t.Errorf("the warnings lack %q; got:\n%s", w, all)
		}
	}
	if len(g.Tests) != 1 || len(g.Tests[0].Session) != 1 || g.Tests[0].Session[0].User != "fine" {
		t.Errorf("the test's session: %+v", g.Tests)
	}
}

// TestP18VetFlowsAndLabels: vet warns of a flow's entry that names a tool
// its surface cannot use (not allowed along the chain, or denied whole
// already), at the entry; an entry on a tool the surface allows is not
// reported; a label that no flow uses is not reported while a provenance
// trusts unlabelled results, since the label then decides what is trusted.
func TestP18VetFlowsAndLabels(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Read: schema.#Read, Write: schema.#Write, Echo: schema.#Echo}
labels: {untrusted: entries: ["Read"], web: tools: ["Echo"]}
agent: {"allowed-tools": ["Read", "Echo"], when: untrusted: {"denied-tools": ["Write"], "ask-tools": ["Echo"]}}
subagents: reviewer: {"denied-tools": ["Echo"], when: untrusted: "ask-tools": ["Echo", "Read"]}
provenance: Echo: message: ["user", "trusted"]
`}))
	if err != nil {
		t.Fatal(err)
	}
	text := vetText(g)
	for _, w := range []string{
		`policy.cue:8:79: agent when untrusted denied-tools entry "Write" names Write, which agent cannot use`,
		`policy.cue:9:80: subagent:reviewer when untrusted ask-tools entry "Echo" names Echo, which subagent:reviewer cannot use`,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("vet lacks %q; got:\n%s", w, text)
		}
	}
	for _, not := range []string{`entry "Read" names Read`, `ask-tools entry "Echo" names Echo, which agent`, "label web is used by no"} {
		if strings.Contains(text, not) {
			t.Errorf("vet says %q; got:\n%s", not, text)
		}
	}
}
