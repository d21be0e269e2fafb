package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// p16Pushes are the ways a command pushes to bare.git, each to a branch
// of its own: git push, and git's other ways, which the command line
// shows or only the program git starts does.
var p16Pushes = []struct{ note, command, branch string }{
	{"git push", `git push -q bare.git HEAD:refs/heads/push`, "push"},
	{"git send-pack", `git send-pack bare.git HEAD:refs/heads/sendpack`, "sendpack"},
	{"git -C . send-pack", `git -C . send-pack bare.git HEAD:refs/heads/sendpackc`, "sendpackc"},
	{"an alias of push", `git -c alias.p=push p -q bare.git HEAD:refs/heads/alias`, "alias"},
	{"an alias of send-pack", `git -c alias.s=send-pack s bare.git HEAD:refs/heads/aliassp`, "aliassp"},
	// git run under the names git-send-pack and git-receive-pack (perl's
	// exec), where neither name is in any command's words.
	{"git started as git-send-pack", `perl -e 'exec {"/usr/bin/git"} "git-send-pack", "--receive-pack=./rp", "bare.git", "HEAD:refs/heads/argv0"'`, "argv0"},
	{"a script", `sh push.sh`, "script"},
}

// p16PushLayout is p16Layout with a bare repository, bare.git, inside the
// project (writable to commands, so that only the judgement keeps a push
// out) and a script that pushes to it with git send-pack.
func p16PushLayout(t *testing.T, u gatewayUser, lists string) *p16Env {
	t.Helper()
	e := p16Layout(t, u, lists)
	if out, err := exec.Command("git", "init", "-q", "--bare", e.proj+"/bare.git").CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v %s", err, out)
	}
	writeFile(t, e.proj+"/push.sh", "git send-pack bare.git HEAD:refs/heads/script\n")
	if err := os.WriteFile(e.proj+"/rp", []byte("#!/usr/bin/perl\nexec {\"/usr/bin/git\"} \"git-receive-pack\", @ARGV;\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if u.uid >= 0 {
		chownAll(t, e.root, u.uid, u.gid)
	}
	return e
}

// bareRefs are bare.git's branches.
func (e *p16Env) bareRefs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", e.proj+"/bare.git", "for-each-ref", "--format=%(refname:short)").CombinedOutput()
	if err != nil {
		t.Fatalf("git for-each-ref: %v %s", err, out)
	}
	return strings.Join(strings.Fields(string(out)), ",")
}

// TestP16GitsOtherWaysToPushAreDenied: through the binary, as root and
// as nobody, with Bash(git push:*) denied, neither git push nor git
// send-pack (on the command line, after an option, through an alias, a
// script, or git started under the name git-send-pack) changes the refs
// of a bare repository the command may write; each call fails naming the
// entry. Under ask, the approved push and send-pack land, with what git
// starts to carry them (git-receive-pack). The probe's V9.
func TestP16GitsOtherWaysToPushAreDenied(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			e := p16PushLayout(t, u, `agent: "denied-tools": ["Bash(git push:*)"]`)
			var ids, commands []string
			for i, p := range p16Pushes {
				ids, commands = append(ids, fmt.Sprintf("push-%d", i)), append(commands, p.command)
			}
			for i, r := range p16Serve(t, e, ids, commands) {
				if !r.isError || !strings.Contains(r.text, "Bash(git push:*)") {
					t.Errorf("%s: the call does not fail naming the entry: %v", p16Pushes[i].note, r)
				}
			}
			if refs := e.bareRefs(t); refs != "" {
				t.Errorf("the denied pushes changed the bare repository's refs: %s", refs)
			}

			a := p16PushLayout(t, u, `agent: "ask-tools": ["Bash(git push:*)"]`)
			for _, c := range []string{`git push -q bare.git HEAD:refs/heads/approved`, `git send-pack bare.git HEAD:refs/heads/approvedsp`} {
				if r := p16ServeApproved(t, a, "approved", c); r.isError {
					t.Errorf("the approved %q failed: %v", c, r)
				}
			}
			if refs := a.bareRefs(t); refs != "approved,approvedsp" {
				t.Errorf("the approved pushes left the refs %q; want approved,approvedsp", refs)
			}
		})
	}
}

// TestP16PushesPushWhenAllowed: the pushes are real: with nothing denied,
// each makes its branch. Without this the test above could pass on a
// command that pushes nothing.
func TestP16PushesPushWhenAllowed(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	e := p16PushLayout(t, gatewayUser{name: "self", uid: -1, gid: -1}, "")
	var ids, commands, want []string
	for i, p := range p16Pushes {
		ids, commands, want = append(ids, fmt.Sprintf("push-%d", i)), append(commands, p.command), append(want, p.branch)
	}
	replies := p16Serve(t, e, ids, commands)
	refs := "," + e.bareRefs(t) + ","
	for i, b := range want {
		if !strings.Contains(refs, ","+b+",") {
			t.Errorf("%s: %q made no branch %s where nothing is denied; it returned %v", p16Pushes[i].note, p16Pushes[i].command, b, replies[i])
		}
	}
}
