package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// p17Layout is a project with secrets that Read's deny and ask entries
// name, by a directory of their own and by a pattern without one, and a
// policy that lets the agent search and run commands there.
func p17Layout(t *testing.T, u gatewayUser) (proj, policy string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-p17")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, policy = root+"/proj", root+"/policy"
	for name, content := range map[string]string{
		"open.txt":        "open-words\n",
		".env":            "TOKEN=env-top-secret\n",
		"sub/.env":        "TOKEN=env-sub-secret\n",
		"sub/code.go":     "package sub // open-words\n",
		"secret/key.txt":  "key-secret\n",
		"asked/notes.txt": "asked-secret\n",
	} {
		writeFile(t, proj+"/"+name, content)
	}
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Grep: schema.#Grep, Glob: schema.#Glob, Bash: schema.#Bash}
agent: "allowed-tools": ["Read(%[1]s/**)", "Grep(%[1]s/**)", "Glob(%[1]s/**)", "Bash"]
agent: "denied-tools": ["Read(**/.env)", "Read(%[1]s/secret/**)"]
agent: "ask-tools": ["Read(%[1]s/asked/**)"]
`, proj)})
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return proj, policy
}

// TestP17AReadDenyBindsEveryReader: a deny or ask entry of Read keeps what
// it names from Grep, from Glob and from the programs a command runs, as
// root and as nobody, whether the entry has a directory of its own (hidden
// by a mount) or is a pattern without one (Read(**/.env): each file it
// names that exists when the command starts is hidden). What no entry
// names is still found.
func TestP17AReadDenyBindsEveryReader(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	secrets := []string{"env-top-secret", "env-sub-secret", "key-secret", "asked-secret"}
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			proj, policy := p17Layout(t, u)
			lines := []string{
				toolUse("grep", "Grep", map[string]any{"pattern": "secret|open-words", "path": proj, "output_mode": "content"}),
				toolUse("glob", "Glob", map[string]any{"pattern": "**/*", "path": proj}),
				toolUse("grep env", "Grep", map[string]any{"pattern": "TOKEN", "path": proj + "/sub/.env"}),
				toolUse("grep secret", "Grep", map[string]any{"pattern": "key", "path": proj + "/secret"}),
				bashLine("cat", "cat .env sub/.env secret/key.txt asked/notes.txt; grep -r secret . ; echo open-words"),
			}
			replies := runServeAs(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", proj}, nil, lines...)
			if len(replies) != len(lines) {
				t.Fatalf("%d replies to %d calls: %v", len(replies), len(lines), replies)
			}
			for i, r := range replies {
				s := fmt.Sprint(r["content"])
				for _, secret := range secrets {
					if strings.Contains(s, secret) {
						t.Errorf("call %d: what Read's entries withhold reached the agent (%s): %s", i, secret, s)
					}
				}
			}
			if s := fmt.Sprint(replies[0]["content"]); replies[0]["is_error"] != false || !strings.Contains(s, "open-words") || !strings.Contains(s, "code.go") {
				t.Errorf("Grep did not find what no entry withholds: %v", replies[0])
			}
			if s := fmt.Sprint(replies[1]["content"]); replies[1]["is_error"] != false || !strings.Contains(s, "open.txt") ||
				strings.Contains(s, ".env") || strings.Contains(s, "key.txt") || strings.Contains(s, "notes.txt") {
				t.Errorf("Glob listed what Read's entries withhold, or missed the rest: %v", replies[1])
			}
			if s := fmt.Sprint(replies[2]["content"]); replies[2]["is_error"] != true || !strings.Contains(s, "Read(**/.env)") {
				t.Errorf("a Grep of a denied file is not refused by Read's entry: %v", replies[2])
			}
			if s := fmt.Sprint(replies[3]["content"]); replies[3]["is_error"] != true || !strings.Contains(s, "/secret/**)") {
				t.Errorf("a Grep of a denied directory is not refused by Read's entry: %v", replies[3])
			}
			if s := fmt.Sprint(replies[4]["content"]); !strings.Contains(s, "open-words") {
				t.Errorf("the command did not run: %v", replies[4])
			}
		})
	}
}
