package main

import (
	"aimon.dev/gw/internal/testkit/need"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// user, after setup sets the project up (as the agent's Write would), and
// then a control that shows the program itself runs when allowed.
func p16Escapes(t *testing.T, setup func(t *testing.T, e *p16Env) []p16Escape, control p16Escape) {
	t.Helper()
	p16EscapesOf(t, p16Lists, setup, control)
}

// p16EscapesOf is p16Escapes under the deny and ask entries lists.
func p16EscapesOf(t *testing.T, lists string, setup func(t *testing.T, e *p16Env) []p16Escape, control p16Escape) {
	t.Helper()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, lists)
			escapes := setup(t, e)
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
			if _, err := os.Stat(e.proj + "/" + control.marker); control.marker != "" && err != nil || r["is_error"] == true || !strings.Contains(text(r), control.why) {
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
	touch, rm, mkdir := lookPaths(t, "touch", "rm", "mkdir")
	p16Escapes(t, func(t *testing.T, e *p16Env) []p16Escape {
		writeFile(t, e.proj+"/u.py", p16Untraced)
		writeFile(t, e.proj+"/f.py", strings.ReplaceAll(p16Untraced, "0x00800000 | 17", "17"))
		return []p16Escape{
			{"touch", "python3 u.py " + touch + " untraced", "untraced", "CLONE_UNTRACED"},
			{"rm", "python3 u.py " + rm + " victim", "untraced", "CLONE_UNTRACED"},
		}
	}, p16Escape{"fork", "python3 f.py " + mkdir + " forked", "forked", ""})
}

// p16Threaded runs its arguments from a thread of its own: with run, as
// a child the thread starts (subprocess, a vfork from that thread); with
// exec, by executing them on that thread, which takes the process over;
// with clone, in a process cloned with no exit signal (reported as a
// clone, not a fork).
const p16Threaded = `import ctypes, os, subprocess, sys, threading
how, argv = sys.argv[1], sys.argv[2:]
def clone():
    libc = ctypes.CDLL(None, use_errno=True)
    pid = libc.syscall(56, 0, 0, 0, 0, 0)
    if pid == 0:
        os.execv(argv[0], argv)
    if pid > 0:
        os.waitpid(pid, 0x40000000)
if how == "clone":
    clone()  # on the only thread: a child cloned beside another thread may wait forever on a lock that thread held
else:
    t = threading.Thread(target={"run": lambda: subprocess.run(argv), "exec": lambda: os.execv(argv[0], argv)}[how])
    t.start()
    t.join()
`

// TestP16ThreadsOfTheCommandAreFollowed: the tracer follows the threads
// of the command as they are made (the launcher's own are not followed,
// which the command's exec ends), so a program a thread starts, one a
// thread executes, and one a process cloned with no exit signal executes
// are judged as the main thread's: the denied touch and the asked rm do
// not run; the same from a thread with mkdir runs. The clone is made on
// the only thread: Python's child of a clone made beside another thread
// can wait for ever on the interpreter's lock that thread held, which
// hung a CI run at its timeout.
func TestP16ThreadsOfTheCommandAreFollowed(t *testing.T) {
	t.Parallel()
	touch, rm, mkdir := lookPaths(t, "touch", "rm", "mkdir")
	p16Escapes(t, func(t *testing.T, e *p16Env) []p16Escape {
		writeFile(t, e.proj+"/t.py", p16Threaded)
		var out []p16Escape
		for _, how := range []string{"run", "exec", "clone"} {
			out = append(out, p16Escape{how + " touch", "python3 t.py " + how + " " + touch + " " + how, how, "Bash(touch:*)"},
				p16Escape{how + " rm", "python3 t.py " + how + " " + rm + " victim", how, "Bash(rm:*)"})
		}
		return out
	}, p16Escape{"a thread's mkdir", "python3 t.py run " + mkdir + " threaded", "threaded", ""})
}

// lookPaths are where three programs are on PATH.
func lookPaths(t *testing.T, a, b, c string) (string, string, string) {
	t.Helper()
	var out [3]string
	for i, n := range []string{a, b, c} {
		p, err := exec.LookPath(n)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out[0], out[1], out[2]
}

// p16Loader is the dynamic loader of the system's programs (PT_INTERP).
func p16Loader(t *testing.T) string {
	t.Helper()
	f, err := elf.Open("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			p.ReadAt(b, 0)
			return strings.TrimRight(string(b), "\x00")
		}
	}
	t.Fatal("/bin/true names no loader")
	return ""
}

// TestP16LoaderRunsNoProgramWhereEntriesAre: the dynamic loader run as a
// program, which opens the file it runs after the exec is judged and in
// the sandbox's own view, is refused while the call has entries on
// programs, whatever it is given (probe F2: the process's /proc/self/fd/N,
// a link in its private /tmp, a modified copy of touch in a memfd) and
// whatever the loader's file is called (F3: a copy named elf, as a
// build-id cache holds one; a copy named ld-2.31.so behind a link named
// as the loader, as glibc before 2.34 lays it out): known by what it is.
// ldd, which runs the loader in its listing modes, still lists.
func TestP16LoaderRunsNoProgramWhereEntriesAre(t *testing.T) {
	t.Parallel()
	ld := p16Loader(t)
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	p16Escapes(t, func(t *testing.T, e *p16Env) []p16Escape {
		os.MkdirAll(e.root+"/debug", 0o755)
		os.MkdirAll(e.root+"/old", 0o755)
		copied, old := e.root+"/debug/elf", e.root+"/old/ld-linux-x86-64.so.2"
		copyFile(t, ld, copied)
		copyFile(t, ld, e.root+"/old/ld-2.31.so")
		os.Symlink("ld-2.31.so", old)
		writeFile(t, e.proj+"/fdld.py", fmt.Sprintf(`import os
fd = os.open(%[1]q, os.O_RDONLY); os.set_inheritable(fd, True)
os.execv(%[2]q, ["ld", "/proc/self/fd/%%d" %% fd, "ldfd"])
`, touch, ld))
		writeFile(t, e.proj+"/ldsym.sh", fmt.Sprintf("ln -s %s /tmp/zz\n%s /tmp/zz ldsym\n", touch, ld))
		writeFile(t, e.proj+"/memld.py", fmt.Sprintf(`import os
fd = os.memfd_create("x", 0)
os.write(fd, open(%[1]q, "rb").read() + b"\0written-by-agent"); os.set_inheritable(fd, True)
os.execv(%[2]q, ["ld", "/proc/self/fd/%%d" %% fd, "memld"])
`, touch, ld))
		return []p16Escape{
			{"/proc/self/fd/N", "python3 fdld.py", "ldfd", "Bash(touch:*)"},
			{"a link in the sandbox's /tmp", "sh ldsym.sh", "ldsym", "Bash(touch:*)"},
			{"a memfd", "python3 memld.py", "memld", "run the program itself, not through the loader"},
			{"a copy of the loader named elf", copied + " " + touch + " dbgld", "dbgld", "Bash(touch:*)"},
			{"ld-2.31.so behind ld-linux's name", old + " ./c oldglibc", "oldglibc", "Bash(touch:*)"},
			{"an unknown file", copied + " ./nothere", "nothere", "run the program itself, not through the loader"},
		}
	}, p16Escape{"ldd", "ldd /bin/true", "", "libc"})
}

// TestP16InProcessRunnersAreRefused: valgrind runs the program it is
// given inside its own process, with no execve the tracer stops at, so
// with deny or ask entries on programs it is refused where it starts, and
// the denied touch it was given does not run; its own --version neither
// (re-probe N1); an allowed program beside them runs.
func TestP16InProcessRunnersAreRefused(t *testing.T) {
	t.Parallel()
	vg := need.Command(t, "valgrind", "apt-get install valgrind")
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	p16Escapes(t, func(t *testing.T, e *p16Env) []p16Escape {
		return []p16Escape{
			{"valgrind", vg + " -q " + touch + " vgmark", "vgmark", "inside its own process"},
			{"valgrind from a script", "sh -c '" + vg + " -q " + touch + " vgsh'", "vgsh", "inside its own process"},
		}
	}, p16Escape{"mkdir", "mkdir made", "made", ""})
}

// TestP16DeniedScriptsAreKnownInTheirInterpreters: a denied program that
// is a #! script (installed outside what commands may write, as npm is)
// is that program when its interpreter runs it, whose file is then the
// exe at the exec stop: the interpreter's argument that names the
// script's file, in the command's own view (its working directory, a link
// in the project), is judged as the program (probe F4: sh n.sh running
// npm, node /usr/bin/npm). A sh script and an env python3 one, run by a
// script, directly by their interpreter and through a link, and a file
// read once as harmless and then rewritten in place as the script; a
// script that is no program an entry names still runs, and cat reads the
// denied script (reading is not running it).
//
// The re-probe's P9: the argument is followed in the command's view
// however it is spelt, or the exec is refused: from a working directory
// deeper than PATH_MAX, through /proc/self/.. (the command's /proc, where
// the tracer's string climbed to its own), /proc/PID/cwd and
// /proc/thread-self/cwd (magic links). P3: another build of the
// interpreter than the #! line's file (python3.99, a copy of python3 with
// a byte more, outside what commands write, as pyenv's python3.11 is),
// named so, found first on PATH as python3, or named xrun (known by its
// ELF symbols) or yrun of mode 0111 (not readable: taken for one), runs
// no denied script; nor does a copy of touch of mode 0111 (not readable:
// judged as the program of its size).
func TestP16DeniedScriptsAreKnownInTheirInterpreters(t *testing.T) {
	t.Parallel()
	lists := `agent: "denied-tools": ["Bash(touch:*)", "Bash(mkmark:*)", "Bash(pymark:*)"]
agent: "ask-tools": ["Bash(rm:*)"]`
	p16EscapesOf(t, lists, func(t *testing.T, e *p16Env) []p16Escape {
		bin := e.root + "/bin"
		os.MkdirAll(bin, 0o755)
		if err := os.WriteFile(bin+"/mkmark", []byte("#!/bin/sh\n: > \"$1\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin+"/pymark", []byte("#!/usr/bin/env python3\nimport sys\nopen(sys.argv[1], 'w').close()\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		e.env = append(e.env, "PATH="+bin+":"+os.Getenv("PATH"))
		writeFile(t, e.proj+"/n.sh", "mkmark shmark\n")
		writeFile(t, e.proj+"/p.sh", "pymark envpy\n")
		writeFile(t, e.proj+"/ok.sh", "cat lnk >/dev/null && : > okmark\n")
		os.Symlink(bin+"/mkmark", e.proj+"/lnk")
		// A file of the script's size read once as harmless, then
		// rewritten in place as the script (the same inode).
		writeFile(t, e.proj+"/inplace.py", fmt.Sprintf(`import subprocess
mk = open(%q, "rb").read()
open("x", "wb").write(b"#" + b"x" * (len(mk) - 2) + b"\n")
subprocess.run(["sh", "x", "first"])
with open("x", "r+b") as f:
    f.write(mk)
r = subprocess.run(["sh", "x", "rewritten"])
raise SystemExit(r.returncode)
`, bin+"/mkmark"))
		py := p16Python(t)
		// P9: the script's link at the bottom of a tree deeper than
		// PATH_MAX, run from there by its relative name; the same link in
		// sub/, run through /proc spellings from there.
		writeFile(t, e.proj+"/deep.py", fmt.Sprintf(`import os
n = "d" * 250
for i in range(18):
    os.makedirs(n, exist_ok=True); os.chdir(n)
os.symlink(%[1]q, "pd")
os.execvp("python3", ["python3", "pd", %[2]q])
`, bin+"/pymark", e.proj+"/deepmark"))
		os.MkdirAll(e.proj+"/sub", 0o755)
		os.Symlink(bin+"/pymark", e.proj+"/sub/pd")
		writeFile(t, e.proj+"/insub.py", fmt.Sprintf(`import os, sys
os.chdir("sub")
arg = sys.argv[1].replace("PID", str(os.getpid()))
os.execvp("python3", ["python3", arg, %q + sys.argv[2]])
`, e.proj+"/"))
		// P3: another build of python3, where commands do not write.
		other := e.root + "/other"
		os.MkdirAll(other, 0o755)
		build, err := os.ReadFile(py)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(other+"/python3.99", append(build, 0), 0o755); err != nil {
			t.Fatal(err)
		}
		os.Symlink("python3.99", other+"/python3")
		if err := os.WriteFile(other+"/xrun", append(build, 0, 0), 0o755); err != nil {
			t.Fatal(err)
		}
		// And one its user may run, not read (the tracer cannot read its
		// symbols either; as nobody, the kernel keeps even its /proc from
		// the tracer, which refuses it for that, the sentence saying so).
		if err := os.WriteFile(other+"/yrun", append(build, 0, 0, 0), 0o111); err != nil {
			t.Fatal(err)
		}
		// Named in the script, not the command: an interpreter's argument
		// naming the script is refused where the command starts it.
		writeFile(t, e.proj+"/onpath.py", fmt.Sprintf(`import os
os.environ["PATH"] = %q + ":" + os.environ["PATH"]
os.execvp("python3", ["python3", %q, %q])
`, other, bin+"/pymark", e.proj+"/firstonpath"))
		// A copy of touch that its user may run and not read: the tracer,
		// as that user, cannot read it either to know it by its digest.
		touch, err := exec.LookPath("touch")
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, touch, e.proj+"/cx")
		os.Chmod(e.proj+"/cx", 0o111)
		return []p16Escape{
			{"P9: a copy of touch no one but root may read", "./cx unreadable", "unreadable", "Bash(touch:*)"},
			{"P9: a working directory deeper than PATH_MAX", "python3 deep.py", "deepmark", "Bash(pymark:*)"},
			{"P9: /proc/self/../self/cwd", "python3 insub.py /proc/self/../self/cwd/pd selfdots", "selfdots", "Bash(pymark:*)"},
			{"P9: /proc/PID/cwd", "python3 insub.py /proc/PID/cwd/pd pidcwd", "pidcwd", "Bash(pymark:*)"},
			{"P9: /proc/thread-self/cwd", "python3 insub.py /proc/thread-self/cwd/pd threadself", "threadself", "Bash(pymark:*)"},
			{"P3: another build of python3", other + "/python3.99 " + bin + "/pymark otherbuild", "otherbuild", "Bash(pymark:*)"},
			{"P3: another build first on PATH", "python3 onpath.py", "firstonpath", "Bash(pymark:*)"},
			{"P3: another build named as no interpreter", other + "/xrun " + bin + "/pymark renamed", "renamed", "Bash(pymark:*)"},
			{"P3: another build named as no interpreter, unreadable", other + "/yrun " + bin + "/pymark unreadablebuild", "unreadablebuild", "killed before it ran"},
			{"sh n.sh", "sh n.sh", "shmark", "Bash(mkmark:*)"},
			{"sh SCRIPT", "sh " + bin + "/mkmark direct", "direct", "Bash(mkmark:*)"},
			{"sh LINK", "sh ./lnk vialink", "vialink", "Bash(mkmark:*)"},
			{"python3 SCRIPT", "python3 " + bin + "/pymark py", "py", "Bash(pymark:*)"},
			{"sh p.sh (env python3)", "sh p.sh", "envpy", "Bash(pymark:*)"},
			{"a file rewritten in place", "python3 inplace.py", "rewritten", "Bash(mkmark:*)"},
		}
	}, p16Escape{"sh ok.sh, whose cat reads the script", "sh ok.sh", "okmark", ""})
}

// p16Python is a python3 program itself (an ELF file, not pyenv's shim).
func p16Python(t *testing.T) string {
	t.Helper()
	var found []string
	if p, err := exec.LookPath("python3"); err == nil {
		found = append(found, p)
	}
	for _, p := range append(found, "/usr/bin/python3") {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			if f, err := elf.Open(real); err == nil {
				f.Close()
				return real
			}
		}
	}
	t.Fatal("no python3 program (an ELF file) is installed")
	return ""
}
