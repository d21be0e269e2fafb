package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/gobuild"
)

// The gateway's sandbox program (cmd/aimon-gw-sandbox) beside its binary
// is the launcher of every sandbox (issue 41's speed),
// only when nobody but root and the gateway's user could have put it
// there (rules P16, R8); else the gateway's own binary is, as before.

// sandboxProgram is the sandbox program built beside the gateway.
func sandboxProgram(t *testing.T) string {
	return filepath.Join(filepath.Dir(gatewayBinary(t)), "aimon-gw-sandbox")
}

// gatewayAt is a copy of the gateway's binary at dir/aimon-gw, with
// nothing beside it: dir is made if need be. Not a hard link: a link
// changes the built binary's ctime, which is part of the identity a load
// cache's record keeps, so tests of the record running beside this one
// saw another binary (TestR3ServeStartsFromItsRecord).
func gatewayAt(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "aimon-gw")
	copyFile(t, gatewayBinary(t), p)
	return p
}

// p16Running sends lines to serve as e's user, then a command that
// waits, and returns, while it waits, the executables of every process
// the gateway started, then the replies to all the lines and what the
// gateway wrote on standard error.
func p16Running(t *testing.T, e *p16Env, lines ...string) (exes []string, replies []map[string]any, stderr string) {
	t.Helper()
	started, proceed := e.proj+"/started", e.proj+"/proceed"
	os.Remove(started)
	os.Remove(proceed)
	bin := e.bin(t)
	cmd := exec.Command(bin[0], append(append(bin[1:], "serve"), e.serveArgs()...)...)
	cmd.Env = append(os.Environ(), e.env...)
	var errs bytes.Buffer
	cmd.Stderr = &errs
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			mu.Lock()
			got = append(got, sc.Text())
			mu.Unlock()
		}
	}()
	// A script: under deny entries a command line is one simple command.
	writeFile(t, e.proj+"/wait.sh", "echo > started\nfor i in $(seq 1200); do [ -e proceed ] && break; sleep 0.1; done\n")
	wait := bashLine("wait", "bash wait.sh")
	fmt.Fprintln(in, strings.Join(append(slices.Clone(lines), wait), "\n"))
	// Bounded: two minutes for the sandbox to start on a loaded machine,
	// less when every line is answered (the wait did not start).
	for i := 0; i < 1200; i++ {
		mu.Lock()
		answered := len(got) > len(lines)
		mu.Unlock()
		if _, err := os.Stat(started); err == nil || answered {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	exes = descendantExes(cmd.Process.Pid)
	os.WriteFile(proceed, nil, 0o644)
	in.Close()
	<-read
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, errs.String())
	}
	for _, l := range got {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("reply %q: %v", l, err)
		}
		replies = append(replies, r)
	}
	if len(replies) != len(lines)+1 {
		t.Fatalf("%d replies to %d lines:\n%s\n%s", len(replies), len(lines)+1, strings.Join(got, "\n"), errs.String())
	}
	if _, err := os.Stat(started); err != nil {
		t.Fatalf("the waiting command never started: %v", replies[len(lines)])
	}
	return exes, replies[:len(lines)], errs.String()
}

// descendantExes are the executables of pid's descendants, from /proc.
func descendantExes(pid int) []string {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, en := range entries {
		p, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid: comm may hold spaces and parentheses.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var exes []string
	for p := range parent {
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
				exes = append(exes, exe)
				break
			}
		}
	}
	return exes
}

// TestP16SmallLauncherStartsEachSandbox: with the sandbox program beside
// the gateway, as go install ./cmd/... puts it, it is what each sandbox
// starts (the gateway does not say it is not used; which file bwrap is
// handed is TestP16SmallLauncherRunsTheSandbox's), no Go program of the
// gateway's runs beside the command (its tracer is a thread of the
// gateway's, issue 41), and a denied program still does not run; as root
// and as nobody (who runs a program root installed).
func TestP16SmallLauncherStartsEachSandbox(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	small := sandboxProgram(t)
	if _, err := os.Stat(small); err != nil {
		t.Fatalf("the gateway's test build has no sandbox program beside it: %v", err)
	}
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			e := p16Layout(t, u, p16Lists)
			exes, replies, stderr := p16Running(t, e, bashLine("denied", p16Carriers[0].command), bashLine("allowed", "echo small-ran"))
			if slices.Contains(exes, small) || slices.Contains(exes, gatewayBinary(t)) {
				t.Errorf("the sandbox's processes run %v; want neither the sandbox program %s nor the gateway's binary beside the command", exes, small)
			}
			if strings.Contains(stderr, "is not used") {
				t.Errorf("the gateway does not use its sandbox program %s:\n%s", small, stderr)
			}
			p16StillDenies(t, e, replies)
		})
	}
}

// p16StillDenies checks the replies to the denied carrier and the echo
// p16Running was sent: the carrier's touch did not run, the echo did.
func p16StillDenies(t *testing.T, e *p16Env, replies []map[string]any) {
	t.Helper()
	if r := replies[0]; r["is_error"] != true || !strings.Contains(text(r), "touch perl is denied on this surface by Bash(touch:*)") {
		t.Errorf("the denied touch started by perl was not refused, naming it: %v", r)
	}
	if _, err := os.Stat(filepath.Join(e.proj, p16Carriers[0].marker)); err == nil {
		t.Error("the denied touch ran")
	}
	if r := replies[1]; r["is_error"] != false || !strings.Contains(text(r), "small-ran") {
		t.Errorf("an allowed command did not run: %v", r)
	}
}

// TestP16SmallLauncherUntrustedIsNotUsed: a sandbox program beside the
// gateway that someone other than root and the gateway's user could have
// put there or changed (writable by its group or others, owned by
// another uid, in a directory others may write, a link) or one of
// another build (a script here) is not started: a hostile one would run
// as the launcher, before the sandbox's restrictions. The gateway
// starts its own binary instead, says so on its standard error, and a
// denied program still does not run; as root and as nobody.
func TestP16SmallLauncherUntrustedIsNotUsed(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	cases := []struct {
		note, why string
		make      func(t *testing.T, dir, sib, hostile string)
	}{
		{"writable by its group", "writable by its group or by others (mode 0775)", func(t *testing.T, dir, sib, hostile string) {
			writeExec(t, sib, hostile, 0o775)
		}},
		{"writable by others", "writable by its group or by others (mode 0757)", func(t *testing.T, dir, sib, hostile string) {
			writeExec(t, sib, hostile, 0o757)
		}},
		{"owned by another uid", "is owned by uid 12345, neither root nor the gateway's user", func(t *testing.T, dir, sib, hostile string) {
			writeExec(t, sib, hostile, 0o755)
			if err := os.Lchown(sib, 12345, 12345); err != nil {
				t.Skipf("only root can give a file to another uid: %v", err)
			}
		}},
		{"in a directory others may write", "its directory " + "%DIR%" + " is writable by its group or by others (mode 0777)", func(t *testing.T, dir, sib, hostile string) {
			writeExec(t, sib, hostile, 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symbolic link", "it is a symbolic link", func(t *testing.T, dir, sib, hostile string) {
			if err := os.Symlink(sandboxProgram(t), sib); err != nil {
				t.Fatal(err)
			}
		}},
		{"of another build", "it is not a Go program of the gateway's", func(t *testing.T, dir, sib, hostile string) {
			writeExec(t, sib, hostile, 0o755)
		}},
		{"built from other sources", "it was built from other sources than this gateway", func(t *testing.T, dir, sib, hostile string) {
			b, err := os.ReadFile(gobuild.OtherSandboxProgram(t))
			if err != nil {
				t.Fatal(err)
			}
			writeExec(t, sib, string(b), 0o755)
		}},
	}
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.note, func(t *testing.T) {
					e := p16Layout(t, u, p16Lists)
					dir := e.root + "/gw"
					e.gw = gatewayAt(t, dir)
					ran := e.root + "/hostile-ran"
					hostile := fmt.Sprintf("#!/bin/sh\ntouch %s\nexec \"$@\"\n", ran)
					c.make(t, dir, filepath.Join(dir, "aimon-gw-sandbox"), hostile)
					_, replies, stderr := p16Running(t, e, bashLine("denied", p16Carriers[0].command), bashLine("allowed", "echo small-ran"))
					if _, err := os.Stat(ran); err == nil {
						t.Fatal("the untrusted sandbox program ran")
					}
					why := strings.ReplaceAll(c.why, "%DIR%", dir)
					if !strings.Contains(stderr, "aimon-gw-sandbox is not used, since ") || !strings.Contains(stderr, why) || !strings.Contains(stderr, "go install ./cmd/...") {
						t.Errorf("the gateway does not say why it does not use the sandbox program (%q):\n%s", why, stderr)
					}
					p16StillDenies(t, e, replies)
				})
			}
		})
	}
}

// writeExec writes an executable at path with mode (not narrowed by the
// umask).
func writeExec(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestR8SandboxProgramIsProtected: the sandbox program is an executable
// the gateway starts: beside a gateway in the tree the agent may write,
// no command replaces, removes or moves it, or the directory it is in,
// and Write refuses it; while it is absent, no command or Write creates
// one there (the next gateway would start it, outside the sandbox), and
// the agent still writes the rest of its tree. As root and as nobody.
func TestR8SandboxProgramIsProtected(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			for _, present := range []bool{true, false} {
				t.Run(map[bool]string{true: "present", false: "absent"}[present], func(t *testing.T) {
					e := p16Layout(t, u, p16Lists)
					bin := e.proj + "/bin"
					e.gw = gatewayAt(t, bin)
					sib := bin + "/aimon-gw-sandbox"
					if present {
						copyFile(t, sandboxProgram(t), sib)
					}
					if u.uid >= 0 {
						// The agent's user owns the directory; the gateway's
						// binary stays the build's, a link.
						for _, p := range []string{bin, sib} {
							os.Lchown(p, u.uid, u.gid)
						}
					}
					var before string
					if present {
						before = sum(t, sib)
					}
					// One simple command a line, as a policy with deny
					// entries takes them.
					attacks := []string{"cp /bin/true bin/aimon-gw-sandbox", "unlink bin/aimon-gw-sandbox", "ln -s /bin/true bin/aimon-gw-sandbox",
						"mv -f newprog bin/aimon-gw-sandbox", "mv bin bin2"}
					var lines []string
					for i, a := range attacks {
						lines = append(lines, bashLine(strconv.Itoa(i), a))
					}
					copyFile(t, "/bin/true", e.proj+"/newprog") // not t: the layout's link to touch
					_, replies, stderr := p16Running(t, e, append(lines,
						toolLine("write", "Write", map[string]any{"file_path": sib, "content": "#!/bin/sh\n"}),
						bashLine("inside", "cp /etc/hostname made"))...)
					for i, a := range attacks {
						if replies[i]["is_error"] != true {
							t.Errorf("%s succeeded: %v", a, replies[i])
						}
					}
					if present {
						if strings.Contains(stderr, "is not used") {
							t.Errorf("the gateway does not use its sandbox program %s:\n%s", sib, stderr)
						}
						if _, err := os.Stat(sib); err != nil || sum(t, sib) != before {
							t.Errorf("a command changed or removed the sandbox program: %v", err)
						}
					} else if _, err := os.Lstat(sib); err == nil {
						t.Errorf("a command created the sandbox program %s: %v", sib, replies)
					}
					if _, err := os.Lstat(e.proj + "/bin2"); err == nil {
						t.Error("a command moved the sandbox program's directory away")
					}
					if r := replies[len(attacks)]; r["is_error"] != true || !strings.Contains(text(r), "the gateway's sandbox program") || !strings.Contains(text(r), "rule R8") {
						t.Errorf("Write of the sandbox program: %v", r)
					}
					if _, err := os.Stat(e.proj + "/made"); err != nil {
						t.Errorf("a command could not write where the surface may: %v", replies[len(attacks)+1])
					}
				})
			}
		})
	}
}
