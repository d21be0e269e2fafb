package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// p16Inner are the ways the innermost command names touch, each creating
// the marker M: by name, by path, by a link, a copy, a planted ls, or
// through the shell's own builtins.
var p16Inner = []string{
	"touch M",
	"/usr/bin/touch M",
	"./t M",
	"./c M",
	"PATH=./pb ls M",
	"command touch M",
	"exec touch M",
	"env touch M",
}

// p16Wraps are carriers that run the command cmd they are given: shells,
// interpreters, git's configs, wrappers and a script the agent wrote
// (script writes it and returns its name).
var p16Wraps = []func(cmd string, script func(body string) string) string{
	func(c string, _ func(string) string) string { return "bash -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "perl -e 'exec @ARGV' sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "python3 run.py sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "git -c " + shQuote("alias.x=!"+c) + " x" },
	func(c string, _ func(string) string) string {
		return "git -c " + shQuote("core.sshCommand="+c) + " ls-remote ssh://h/r"
	},
	func(c string, _ func(string) string) string { return "flock F sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "nice -n 1 sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "timeout 60 sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string { return "setpriv --no-new-privs sh -c " + shQuote(c) },
	func(c string, _ func(string) string) string {
		return "find . -maxdepth 0 -exec sh -c " + shQuote(c) + " sh {} +"
	},
	func(c string, _ func(string) string) string {
		return "tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec=" + shQuote(c) + " /etc/hostname"
	},
	func(c string, _ func(string) string) string { return "sed " + shQuote("1e "+c) + " /etc/hostname" },
	func(c string, s func(string) string) string { return "bash " + s(c) },
	func(c string, s func(string) string) string { return ". ./" + s(c) },
	func(c string, _ func(string) string) string { return "eval " + shQuote(c) },
}

// shQuote is s as one word of the shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// p16Compose is the command wrappers and inner make, creating marker: at
// most three carriers deep, so that a command stays short.
func p16Compose(wrappers []byte, inner byte, marker string, script func(string) string) string {
	c := strings.ReplaceAll(p16Inner[int(inner)%len(p16Inner)], "M", marker)
	for i, w := range wrappers {
		if i == 3 {
			break
		}
		c = p16Wraps[int(w)%len(p16Wraps)](c, script)
	}
	return c
}

// p16Seeds are the fuzz target's seed corpus: each carrier once, and a
// few nested.
var p16Seeds = []struct {
	wrappers []byte
	inner    byte
}{
	{[]byte{}, 2}, {[]byte{0}, 3}, {[]byte{2}, 0}, {[]byte{3}, 4}, {[]byte{4}, 1}, {[]byte{5}, 0},
	{[]byte{6, 7}, 5}, {[]byte{8, 9}, 6}, {[]byte{10}, 7}, {[]byte{11}, 0}, {[]byte{12}, 2},
	{[]byte{13}, 0}, {[]byte{14}, 3}, {[]byte{15, 1}, 0}, {[]byte{4, 2, 13}, 3}, {[]byte{3, 12, 0}, 6},
}

// p16Session is the binary's serve as one long session, for many calls.
type p16Session struct {
	in  io.WriteCloser
	out *bufio.Reader
}

func startP16Session(t testing.TB, e *p16Env, bin []string) *p16Session {
	t.Helper()
	cmd := exec.Command(bin[0], append(append(bin[1:], "serve"), e.serveArgs()...)...)
	cmd.Env = append(os.Environ(), e.env...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &p16Session{in: in, out: bufio.NewReader(out)}
}

func (s *p16Session) call(t *testing.T, id, command string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(s.in, bashLine(id, command)+"\n"); err != nil {
		t.Fatalf("the gateway is gone: %v", err)
	}
	line, err := s.out.ReadString('\n')
	if err != nil {
		t.Fatalf("no reply to %q: %v", command, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return m
}

// p16Fuzzing is a layout with lists and one serve session over it: run
// composes a command, runs it and says whether its marker was created.
func p16Fuzzing(t testing.TB, lists string) (run func(t *testing.T, wrappers []byte, inner byte) (command string, reply map[string]any, ran bool)) {
	e := p16Layout(t, gatewayUser{name: "self", uid: -1, gid: -1}, lists)
	writeFile(t, e.proj+"/run.py", "import os, sys\nos.execvp(sys.argv[1], sys.argv[1:])\n")
	s := startP16Session(t, e, []string{binary(t, gatewayPkg)})
	var n atomic.Int64
	return func(t *testing.T, wrappers []byte, inner byte) (string, map[string]any, bool) {
		i := n.Add(1)
		marker := fmt.Sprintf("m%d", i)
		k := 0
		script := func(body string) string {
			k++
			name := fmt.Sprintf("f%d-%d.sh", i, k)
			writeFile(t, filepath.Join(e.proj, name), body+"\n") // as the agent would, with Write
			return name
		}
		c := p16Compose(wrappers, inner, marker, script)
		r := s.call(t, marker, c)
		_, err := os.Stat(filepath.Join(e.proj, marker))
		return c, r, err == nil
	}
}

// FuzzP16DeniedProgramNeverRuns: touch denied, any composition of
// carriers (shells, interpreters, git's configs, wrappers, scripts the
// agent wrote) around any way of naming touch never runs it: its marker
// is never created, and the gateway answers every call.
func FuzzP16DeniedProgramNeverRuns(f *testing.F) {
	needBwrap(f)
	for _, s := range p16Seeds {
		f.Add(s.wrappers, s.inner)
	}
	run := p16Fuzzing(f, p16Lists)
	f.Fuzz(func(t *testing.T, wrappers []byte, inner byte) {
		if c, r, ran := run(t, wrappers, inner); ran {
			t.Fatalf("the denied touch ran through %s: %v", c, r)
		}
	})
}

// TestP16FuzzSeedsStartTheProgram: the fuzz target's seeds are carriers
// that do run touch where nothing denies it, so that the fuzz target's
// "never ran" is about the judgement, not a carrier that runs nothing.
func TestP16FuzzSeedsStartTheProgram(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	run := p16Fuzzing(t, "")
	for _, s := range p16Seeds {
		if c, r, ran := run(t, s.wrappers, s.inner); !ran {
			t.Errorf("%s did not run touch where nothing denies it: %v", c, r)
		}
	}
}
