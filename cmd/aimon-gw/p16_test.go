package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// p16Carriers start a denied touch through a program the reading of the
// command line cannot follow; each would create a file named for it.
var p16Carriers = []struct{ note, command string }{
	{"perl", `perl -e 'system q{touch},q{perl}'`},
	{"python", `python3 -c 'import os; os.system("touch python")'`},
	{"git alias", `git -c alias.t='!touch gitalias' t`},
	{"link", `./t link`},
	{"copy", `./c copy`},
	{"PATH plant", `PATH=./pb ls plant`},
	{"bash s.sh", `bash s.sh`},
	{". s.sh", `. ./d.sh`},
	{"tar", `tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='touch tar' /etc/hostname`},
	{"sed", `echo x | sed '1e touch sed'`},
	{"flock", `flock F touch flock`},
	{"loader", `/lib64/ld-linux-x86-64.so.2 ./c loader`},
}

// p16Policy denies touch and asks for rm, in a sandboxed Bash.
func p16Layout(t *testing.T, u gatewayUser) (proj, policy string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-p16")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, policy = root+"/proj", root+"/policy"
	os.MkdirAll(proj, 0o755)
	os.MkdirAll(policy+"/cue.mod", 0o755)
	writeFile(t, policy+"/cue.mod/module.cue", "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")
	writeFile(t, policy+"/policy.cue", fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash}
agent: "allowed-tools": ["Write(%[1]s/**)", "Bash"]
agent: "denied-tools": ["Bash(touch:*)"]
agent: "ask-tools": ["Bash(rm:*)"]
`, proj))
	writeFile(t, proj+"/victim", "keep\n")
	// What an agent would have written with allowed calls.
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink(touch, proj+"/t")
	copyFile(t, touch, proj+"/c")
	os.MkdirAll(proj+"/pb", 0o755)
	copyFile(t, touch, proj+"/pb/ls")
	writeFile(t, proj+"/s.sh", "touch script\n")
	writeFile(t, proj+"/d.sh", "touch dot\n")
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return proj, policy
}

// TestP16ProgramsAreJudgedWhereTheyStart: with Bash(touch:*) denied and
// Bash(rm:*) under ask, no carrier a command line hides them in runs
// them inside the sandbox, as root and as nobody; allowed programs the
// same carriers start still run.
func TestP16ProgramsAreJudgedWhereTheyStart(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			proj, policy := p16Layout(t, u)
			lines := []string{
				bashLine("control", `perl -e 'system q{echo},q{ran}'`),
				bashLine("control git", `git -c alias.e='!echo py' e`),
				bashLine("ask", `perl -e 'system q{rm},q{victim}'`),
			}
			for _, c := range p16Carriers {
				lines = append(lines, bashLine(c.note, c.command))
			}
			replies := runServeAs(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", proj}, nil, lines...)
			if r := fmt.Sprint(replies[0]["content"], replies[1]["content"]); replies[0]["is_error"] != false || replies[1]["is_error"] != false || !strings.Contains(r, "ran") || !strings.Contains(r, "py") {
				t.Errorf("allowed programs started by perl and git did not run: %v", replies[:2])
			}
			replies = replies[1:]
			if r := fmt.Sprint(replies[1]["content"]); !strings.Contains(r, "ask for it as a call of its own") {
				t.Errorf("rm under ask, started by perl, was not refused as unapproved: %v", replies[1])
			}
			if _, err := os.Stat(proj + "/victim"); err != nil {
				t.Errorf("rm under ask ran unapproved: %v", err)
			}
			for i, c := range p16Carriers {
				r := replies[i+2]
				if s := fmt.Sprint(r["content"]); r["is_error"] != true || !strings.Contains(s, "Bash(touch:*)") {
					t.Errorf("%s: the call does not fail naming the entry: %v", c.note, r)
				}
			}
			for _, c := range []string{"perl", "python", "gitalias", "link", "copy", "plant", "script", "dot", "tar", "sed", "flock", "loader"} {
				if _, err := os.Stat(filepath.Join(proj, c)); err == nil {
					t.Errorf("a denied touch ran through %s", c)
				}
			}
		})
	}
}
