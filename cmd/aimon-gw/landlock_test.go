package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// llLayout is a project under a read-only parent (root/work/proj, the
// working directory, writable by Write(proj/**)), and its policy beside it
// (root/policy), owned by u; extra is more of the Bash tool's declaration.
func llLayout(t *testing.T, u gatewayUser, extra string) (root, proj, policy string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-ll")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, policy = root+"/work/proj", root+"/policy"
	os.MkdirAll(proj, 0o755)
	os.MkdirAll(policy+"/cue.mod", 0o755)
	writeFile(t, policy+"/cue.mod/module.cue", "module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n")
	writeFile(t, policy+"/policy.cue", fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash & {%[2]s}}
agent: "allowed-tools": ["Write(%[1]s/**)", "Bash"]
agent: "denied-tools": ["Bash(touch:*)"]
`, proj, extra))
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return root, proj, policy
}

// TestR6BwrapArgsNotVisible: bwrap reads its options from a descriptor,
// so what a command reads of PID 1's argument vector (and ps shows) is
// bwrap and the command, not the mount layout nor the gateway's paths.
func TestR6BwrapArgsNotVisible(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			root, proj, policy := llLayout(t, u, "")
			replies := runServeAs(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", proj}, nil,
				bashLine("pid1", `cat /proc/1/cmdline`), bashLine("ps", `ps -eo args`))
			out := strings.ReplaceAll(fmt.Sprint(replies[0]["content"], replies[1]["content"]), "\x00", " ")
			if replies[0]["is_error"] != false || replies[1]["is_error"] != false || strings.Count(out, "bwrap --args") != 2 {
				t.Fatalf("PID 1's arguments were not read: %v", replies)
			}
			for _, leak := range []string{root, "--bind", "--ro-bind", "--tmpfs", "--setenv", "--seccomp"} {
				if strings.Contains(out, leak) {
					t.Errorf("PID 1's arguments show %q:\n%s", leak, out)
				}
			}
		})
	}
}
