package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// llLayout is a project under a read-only parent (root/work/proj, the
// working directory, writable by Write(proj/**)), and its policy beside it
// (root/policy), owned by u; extra is more of the Bash tool's declaration,
// deny its denied-tools.
func llLayout(t *testing.T, u gatewayUser, extra, deny string) (root, proj, policy string) {
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
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash & {%[2]s}}
agent: "allowed-tools": ["Write(%[1]s/**)", "Bash"]
agent: "denied-tools": [%[3]s]
`, proj, extra, deny)})
	mkdir, err := exec.LookPath("mkdir")
	if err != nil {
		t.Fatal(err)
	}
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	// What an agent would have written with allowed calls.
	os.MkdirAll(proj+"/bin", 0o755)
	copyFile(t, mkdir, proj+"/m")
	copyFile(t, mkdir, proj+"/bin/m")
	copyFile(t, touch, proj+"/bin/t")
	writeFile(t, proj+"/s.sh", "#!/bin/sh\nmkdir \"$1\"\n")
	os.Chmod(proj+"/s.sh", 0o755)
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
			root, proj, policy := llLayout(t, u, "", `"Bash(touch:*)"`)
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

// TestP16WrittenProgramsDoNotRun: as root and as nobody, a binary and a
// #!/bin/sh script the agent wrote into the working directory (under a
// read-only parent) or into /tmp do not run when executed, nor a binary
// when the loader is run on it, and the call says why and what to do; the
// same script read by sh runs.
func TestP16WrittenProgramsDoNotRun(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			_, proj, policy := llLayout(t, u, "", "")
			refused := []struct{ note, command, marker string }{
				{"a binary in the working directory", "./m made-bin", "made-bin"},
				{"a script in the working directory", "./s.sh made-script", "made-script"},
				{"a binary in /tmp", "cp m /tmp/m && /tmp/m made-tmp", "made-tmp"},
				{"a script in /tmp", "cp s.sh /tmp/s && /tmp/s made-tmpsh", "made-tmpsh"},
				{"a binary in /dev/shm", "cp m /dev/shm/m && /dev/shm/m made-shm", "made-shm"},
				{"a binary run by the loader", "/lib64/ld-linux-x86-64.so.2 ./m made-loader", "made-loader"},
				{"a binary in /tmp run by the loader", "cp m /tmp/m && /lib64/ld-linux-x86-64.so.2 /tmp/m made-tmploader", "made-tmploader"},
			}
			var lines []string
			for _, r := range refused {
				lines = append(lines, bashLine(r.note, r.command))
			}
			lines = append(lines, bashLine("read by sh", "sh s.sh made-sh"))
			replies := runServeAs(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", proj}, nil, lines...)
			for i, r := range refused {
				if s := fmt.Sprint(replies[i]["content"]); replies[i]["is_error"] != true || !strings.Contains(s, "cannot be executed or loaded in the sandbox (rule P16)") || !strings.Contains(s, "sandbox.exec") {
					t.Errorf("%s: the call does not fail saying why: %v", r.note, replies[i])
				}
				if _, err := os.Stat(filepath.Join(proj, r.marker)); err == nil {
					t.Errorf("%s: the program the agent wrote ran", r.note)
				}
			}
			if _, err := os.Stat(proj + "/made-sh"); err != nil {
				t.Errorf("a script read by sh did not run: %v", replies[len(refused)])
			}
		})
	}
}

// TestP16ExecOptInRunsStillJudged: with sandbox.exec ["./bin/**"], a
// program the agent wrote in ./bin runs, a copy of the denied touch there
// is still refused where it starts, and one outside ./bin still does not
// run; as root and as nobody.
func TestP16ExecOptInRunsStillJudged(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			_, proj, policy := llLayout(t, u, `sandbox: exec: ["./bin/**"]`, `"Bash(touch:*)"`)
			replies := runServeAs(t, append(u.prefix, gatewayBinary(t)), []string{"--policy", policy, "--workdir", proj}, nil,
				bashLine("in bin", "./bin/m made-bin"), bashLine("denied in bin", "./bin/t made-t"), bashLine("outside bin", "./m made-out"))
			if _, err := os.Stat(proj + "/made-bin"); err != nil || replies[0]["is_error"] != false {
				t.Errorf("a program in ./bin did not run: %v", replies[0])
			}
			if s := fmt.Sprint(replies[1]["content"]); replies[1]["is_error"] != true || !strings.Contains(s, "Bash(touch:*)") {
				t.Errorf("a copy of touch in ./bin is not refused naming the entry: %v", replies[1])
			}
			if s := fmt.Sprint(replies[2]["content"]); replies[2]["is_error"] != true || !strings.Contains(s, "rule P16") {
				t.Errorf("a program outside ./bin is not refused saying why: %v", replies[2])
			}
			for _, m := range []string{"made-t", "made-out"} {
				if _, err := os.Stat(filepath.Join(proj, m)); err == nil {
					t.Errorf("%s was made", m)
				}
			}
		})
	}
}

// TestP16ExecBadInput: a sandbox.exec entry Landlock cannot hold (a
// wildcard that is not a whole tree, everything) fails the load at its
// file:line:col, saying what to write.
func TestP16ExecBadInput(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`"./bin/*.sh"`, `"/**"`, `""`} {
		u := gatewayUser{name: "self", uid: -1, gid: -1}
		_, _, policy := llLayout(t, u, "sandbox: exec: [\n\t"+bad+"]", "")
		out, err := exec.Command(gatewayBinary(t), "vet", policy).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "policy.cue:6:2") || !strings.Contains(string(out), "sandbox.exec entry") || !strings.Contains(string(out), "DIR/**") {
			t.Errorf("sandbox.exec %s: vet = %v\n%s", bad, err, out)
		}
	}
}

// TestP16ExecOutsideWritableWarns: vet warns, at the entry, of a
// sandbox.exec path no surface's commands may write (it would change
// nothing), and not of one they may.
func TestP16ExecOutsideWritableWarns(t *testing.T) {
	t.Parallel()
	u := gatewayUser{name: "self", uid: -1, gid: -1}
	_, _, policy := llLayout(t, u, "sandbox: exec: [\n\t\"/opt/elsewhere/**\"]", "")
	out, _ := exec.Command(gatewayBinary(t), "vet", policy).CombinedOutput()
	if !strings.Contains(string(out), "policy.cue:6:2") || !strings.Contains(string(out), "warning") || !strings.Contains(string(out), "lies outside every path its commands may write") {
		t.Errorf("vet of an exec path outside what is written:\n%s", out)
	}
	_, proj, policy := llLayout(t, u, "", "")
	writeFile(t, policy+"/exec.cue", fmt.Sprintf("package policy\n\ntools: Bash: sandbox: exec: [%q]\n", proj+"/bin/**"))
	if out, err := exec.Command(gatewayBinary(t), "vet", policy).CombinedOutput(); err != nil || strings.Contains(string(out), "sandbox.exec") {
		t.Errorf("vet of an exec path inside what is written (%v):\n%s", err, out)
	}
}
