package policy

import (
	"strings"
	"testing"
)

// Shapes of secrets as they appear in results; none is a real credential.
const (
	testPEM    = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----"
	testAWS    = "AKIAIOSFODNN7EXAMPLE"
	testGitHub = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	testGitLab = "glpat-0123456789abcdefghij"
)

const contentPolicy = header + `
tools: {Read: schema.#Read, Bash: schema.#Bash}
labels: {
	secret: {content: ["private-key", "aws-access-key", "github-token", "gitlab-token"], redact: true}
	internal: content: [{name: "internal-token", pattern: "itk_[a-z0-9]{8}"}]
}
agent: when: {secret: "denied-tools": ["Bash"], internal: "denied-tools": ["Bash(curl:*)"]}
`

// TestP18ContentLabelsAndRedacts: a result that holds a secret's shape
// gives the label whose content names it, whatever tool returned it; a
// redacting label's matches are replaced with [redacted NAME] (a private
// key block whole, or to the end of a text that cuts it off), the rest of
// the text kept; a pattern of the policy's own labels without redacting;
// a text that holds none comes back as it was. A restored plan does the
// same.
func TestP18ContentLabelsAndRedacts(t *testing.T) {
	g, err := Load(writePolicy(t, map[string]string{"policy.cue": contentPolicy}))
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := g.Save()
	restored, err := Restore(saved)
	if err != nil {
		t.Fatal(err)
	}
	for name, g := range map[string]*Generation{"loaded": g, "restored": restored} {
		for _, c := range []struct{ text, want, shown string }{
			{"key:\n" + testPEM + "\nend", "secret", "key:\n[redacted private-key]\nend"},
			{"cut: " + testPEM[:60], "secret", "cut: [redacted private-key]"},
			{"id=" + testAWS + " ok", "secret", "id=[redacted aws-access-key] ok"},
			{"token " + testGitHub, "secret", "token [redacted github-token]"},
			{`{"t":"` + testGitLab + `"}`, "secret", `{"t":"[redacted gitlab-token]"}`},
			{"itk_abcd1234 and " + testAWS, "internal,secret", "itk_abcd1234 and [redacted aws-access-key]"},
			{"ghp_short AKIA and -----BEGIN PUBLIC KEY-----", "", "ghp_short AKIA and -----BEGIN PUBLIC KEY-----"},
		} {
			shown, labels := g.Content(c.text)
			if strings.Join(labels, ",") != c.want || shown != c.shown {
				t.Errorf("%s: %q gives %q and shows %q, want %q and %q", name, c.text, labels, shown, c.want, c.shown)
			}
		}
	}
	if ws := vetText(g); strings.Contains(ws, "P18") {
		t.Errorf("vet finds problems in a sound policy: %s", ws)
	}
}

// TestP18BadContentIsReported: a shape the gateway does not know (with
// the closest it knows), a pattern that is not RE2, one that matches an
// empty text, and a redact with no content stop the load at their places;
// a shape that is neither a name nor {name, pattern} is the schema's error.
func TestP18BadContentIsReported(t *testing.T) {
	_, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Bash: schema.#Bash}
labels: {
	a: content: ["github-tokn", {name: "mine", pattern: "x("}, {name: "all", pattern: "a*"}]
	b: {tools: ["Bash"], redact: true}
}
agent: when: {a: "denied-tools": ["Bash"], b: "denied-tools": ["Bash"]}
`}))
	if err == nil {
		t.Fatal("a policy with bad content loaded")
	}
	for _, w := range []string{
		`policy.cue:8:15: label a content names the shape "github-tokn", which the gateway does not know, so it would match nothing; did you mean "github-token"?`,
		`policy.cue:8:54: label a content mine: the pattern "x(" is not a regular expression (RE2) the gateway can use: missing closing ): ` + "`x(`",
		`label a content all: the pattern "a*" matches an empty text, so it would match every result`,
		`policy.cue:9:31: label b redacts, and names no content to redact`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the load error lacks %q; got:\n%s", w, err)
		}
	}
	if _, err := Load(writePolicy(t, map[string]string{"policy.cue": header + `
tools: {Bash: schema.#Bash}
labels: a: content: [{pattern: "x"}]
agent: when: a: "denied-tools": ["Bash"]
`})); err == nil || !strings.Contains(err.Error(), "policy.cue:7:22: label a content: a shape of the policy's own needs a name") {
		t.Errorf("a shape without a name: %v", err)
	}
}
