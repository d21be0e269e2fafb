package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// p18SecretPolicy redacts a private key block or a cloud or forge token in
// any result and labels the session secret; then the agent may not write,
// nor run a command, nor hand the work to a subagent whose reads would
// count as its own.
const p18SecretPolicy = `package policy

import "aimon.dev/gw/schema"

tools: {
	Read:  schema.#Read
	Write: schema.#Write
	Bash:  schema.#Bash & {sandbox: mode: "off"}
}
labels: secret: {content: ["private-key", "aws-access-key", "github-token", "gitlab-token"], redact: true}
agent: when: secret: "denied-tools": ["Write", "Bash"]
subagents: reviewer: "allowed-tools": ["Read"]
`

// TestP18ServeRedactsASecretAndLabels: through the binary's serve, a Read
// of a file that holds a private key and a token returns it with both
// redacted (the model never sees them), and the session is labelled
// secret: the Write and the command it tries next are refused naming the
// read, and nothing is written; a subagent's read of it taints the
// agent's session too. The same calls after a read of a file without a
// secret run.
func TestP18ServeRedactsASecretAndLabels(t *testing.T) {
	t.Parallel()
	dir, wd := moduleDir(t, p18SecretPolicy), t.TempDir()
	const key = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5rRvZ0TQ0gkNAoAoGCCqGSM49\n-----END EC PRIVATE KEY-----"
	const token = "AKIAIOSFODNN7EXAMPLE"
	writeFile(t, filepath.Join(wd, "deploy.env"), "# deploy\n"+key+"\nAWS_ACCESS_KEY_ID="+token+"\n")
	writeFile(t, filepath.Join(wd, "notes.txt"), "notes\n")
	written, touched := filepath.Join(wd, "out"), filepath.Join(wd, "touched")
	seq := func(read string, surface ...string) []string {
		return []string{
			p18Line("read_1", "Read", map[string]any{"file_path": filepath.Join(wd, read)}, surface...),
			p18Line("write_1", "Write", map[string]any{"file_path": written, "content": "x"}),
			p18Line("bash_1", "Bash", map[string]any{"command": "touch " + touched}),
		}
	}
	for _, c := range []struct {
		name    string
		lines   []string
		tainted bool
	}{
		{"agent", seq("deploy.env"), true},
		{"subagent", seq("deploy.env", "agent", "subagent:reviewer"), true},
		{"clean", seq("notes.txt"), false},
	} {
		rs := runServe(t, []string{"--policy", dir, "--workdir", wd}, nil, c.lines...)
		shown, _ := rs[0]["content"].(string)
		if rs[0]["is_error"] != false || strings.Contains(shown, "MHcCAQEEIBkg4LVWM9nu") || strings.Contains(shown, token) {
			t.Fatalf("%s: the read shows a secret: %v", c.name, rs[0])
		}
		if c.tainted && (!strings.Contains(shown, "[redacted private-key]") || !strings.Contains(shown, "AWS_ACCESS_KEY_ID=[redacted aws-access-key]")) {
			t.Errorf("%s: the read is not redacted as said: %q", c.name, shown)
		}
		for _, r := range rs[1:] {
			text, _ := r["content"].(string)
			refused := r["is_error"] == true && strings.Contains(text, "The result of Read of "+filepath.Join(wd, "deploy.env")+" (call read_1) labelled the session secret earlier")
			if refused != c.tainted {
				t.Errorf("%s: %v", c.name, r)
			}
		}
		if exists(written) != !c.tainted || exists(touched) != !c.tainted {
			t.Errorf("%s: written %v, touched %v", c.name, exists(written), exists(touched))
		}
	}
}
