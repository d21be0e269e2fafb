package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The tracer's escapes a hostile probe found (issue 41, rule P16), end to
// end through the binary's serve, as root and as nobody: with touch denied
// and rm under ask (p16Lists), each command below would create its marker
// if the program it starts ran unjudged.

// p16Escape is a command, the marker it would create, and a word the
// call's error must hold (why it failed).
type p16Escape struct{ note, command, marker, why string }

// p16Escapes runs each escape in one serve session of a fresh layout per
// user, after files sets the project up (as the agent's Write would), and
// then a control that shows the program itself runs when allowed.
func p16Escapes(t *testing.T, files func(t *testing.T, e *p16Env), escapes []p16Escape, control p16Escape) {
	t.Helper()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, p16Lists)
			files(t, e)
			if u.uid >= 0 {
				chownAll(t, e.proj, u.uid, u.gid)
			}
			var lines []string
			for i, c := range append(escapes, control) {
				lines = append(lines, bashLine(fmt.Sprint("c", i), c.command))
			}
			replies := runServeAs(t, e.bin(t), e.serveArgs(), e.env, lines...)
			for i, c := range escapes {
				if _, err := os.Stat(e.proj + "/" + c.marker); err == nil {
					t.Errorf("%s: %s ran the denied program: %s exists (%v)", c.note, c.command, c.marker, replies[i])
				}
				if _, err := os.Stat(e.proj + "/victim"); err != nil {
					t.Errorf("%s: %s ran the asked rm: %v (%v)", c.note, c.command, err, replies[i])
				}
				if s := text(replies[i]); replies[i]["is_error"] != true || !strings.Contains(s, c.why) {
					t.Errorf("%s: the call must fail saying %q: %v", c.note, c.why, replies[i])
				}
			}
			r := replies[len(escapes)]
			if _, err := os.Stat(e.proj + "/" + control.marker); err != nil || r["is_error"] == true {
				t.Errorf("%s: %s did not run: %v %v", control.note, control.command, err, r)
			}
		})
	}
}

// p16Untraced clones with CLONE_UNTRACED (0x00800000) and SIGCHLD, which
// PTRACE_O_TRACECLONE/FORK do not attach, and executes its arguments in
// the child.
const p16Untraced = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 0x00800000 | 17, 0, 0, 0, 0)
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
if pid > 0:
    os.waitpid(pid, 0)
`

// TestP16UntracedClonesAreRefused: a process the tracer would not be told
// of (clone's CLONE_UNTRACED) is not made: the seccomp filter traps the
// clone and the tracer kills its maker with a sentence naming the flag, so
// neither the denied touch nor the asked rm runs in it; a clone without
// the flag (the control's fork) runs as before.
func TestP16UntracedClonesAreRefused(t *testing.T) {
	t.Parallel()
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	rm, err := exec.LookPath("rm")
	if err != nil {
		t.Fatal(err)
	}
	mkdir, err := exec.LookPath("mkdir")
	if err != nil {
		t.Fatal(err)
	}
	p16Escapes(t, func(t *testing.T, e *p16Env) {
		writeFile(t, e.proj+"/u.py", p16Untraced)
		writeFile(t, e.proj+"/f.py", strings.ReplaceAll(p16Untraced, "0x00800000 | 17", "17"))
	}, []p16Escape{
		{"touch", "python3 u.py " + touch + " untraced", "untraced", "CLONE_UNTRACED"},
		{"rm", "python3 u.py " + rm + " victim", "untraced", "CLONE_UNTRACED"},
	}, p16Escape{"fork", "python3 f.py " + mkdir + " forked", "forked", ""})
}
