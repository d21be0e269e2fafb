package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestP18ProgramsLabelAsTheyStart: a label's entry on a command is judged
// at every program the command starts, as its deny and ask entries are
// (rules P18, P16; probe V2: `sh s.sh`, whose script runs curl, and
// a Python script running curl through os.system by a name it made, were judged by their command
// lines only, which name no curl, and left the session unlabelled, so the
// write after them ran). Through serve, as root and as nobody: after each,
// the flow refuses the Write, naming the program that labelled the session (curl, or the shell os.system starts for it), and nothing is written;
// a script that starts no curl labels nothing, and the Write after it
// lands.
func TestP18ProgramsLabelAsTheyStart(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	root := varTmpRoot(t, "aimon-gw-p18prog")
	proj := root + "/proj"
	writeFile(t, proj+"/s.sh", "curl --version >/dev/null && echo fetched\n")
	writeFile(t, proj+"/plain.sh", "echo plain\n")
	// The program's name is made as it runs: nothing a reader of the
	// script could find names it.
	writeFile(t, proj+"/p.py", "import os\nos.system(\"cu\" + \"rl --version >/dev/null && echo fetched\")\n")
	policy := root + "/policy"
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Bash: schema.#Bash, Write: schema.#Write}
labels: untrusted: entries: ["Bash(curl:*)"]
agent: {
	"allowed-tools": ["Bash", "Write(%[1]s/**)"]
	when: untrusted: "denied-tools": ["Write(%[1]s/**)"]
}
`, proj)})
	openToNobody(root, proj)
	for _, u := range gatewayUsers(t) {
		bin := append(append([]string{}, u.prefix...), gatewayBinary(t))
		for i, c := range []struct {
			command, ran string
			labels       bool
		}{
			{"sh s.sh", "fetched", true},
			{"/usr/bin/python3 p.py", "fetched", true},
			{"sh plain.sh", "plain", false},
		} {
			target := fmt.Sprintf("%s/w-%s-%d", proj, u.name, i)
			replies := runServeAs(t, bin, []string{"--policy", policy, "--workdir", proj, "--cache", "off"}, nil,
				bashLine("c", c.command),
				toolLine("w", "Write", map[string]any{"file_path": target, "content": "x"}))
			if !strings.Contains(text(replies[0]), c.ran) {
				t.Fatalf("as %s, %s did not run: %v", u.name, c.command, replies[0])
			}
			switch {
			case c.labels && (exists(target) || !regexp.MustCompile(`The result of Bash of `+regexp.QuoteMeta(c.command)+`, whose program .*curl --version.* it started, \(call c\) labelled the session untrusted`).MatchString(text(replies[1]))):
				t.Errorf("as %s, %s left the session unlabelled: the Write after it %v (written: %v)", u.name, c.command, replies[1], exists(target))
			case !c.labels && !exists(target):
				t.Errorf("as %s, %s labelled the session: the Write after it %v", u.name, c.command, replies[1])
			}
		}
	}
}

// varTmpRoot is a directory of its own under /var/tmp, removed after t,
// which nobody can reach (t.TempDir's parent is the user's).
func varTmpRoot(t *testing.T, prefix string) string {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}
