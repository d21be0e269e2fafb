package trace

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestP16OpenInFollowsTheProcessView: openIn opens a path as the process
// does, where the tracer's own string under /proc/PID/root did not (the
// re-probe's P9): from a working directory deeper than PATH_MAX, through
// /proc/self/.. (the process's /proc, not the tracer's), /proc/PID/cwd and
// /proc/thread-self (magic links), /dev/fd/.., a link in its directory and
// .. not above its root; what is not there is a failure the kernel gives
// the process too (lookupFails), and a process that is gone is not.
func TestP16OpenInFollowsTheProcessView(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "script")
	if err := os.WriteFile(target, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// This test's binary as a child that makes 18 directories of 250
	// bytes, each entered by name, links pd there and says so.
	cmd := exec.Command(os.Args[0], "-test.run=^TestP16OpenInDeepChild$")
	cmd.Env = append(os.Environ(), "AIMON_GW_DEEP_CHILD="+target)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	line := make([]byte, 6)
	if n, _ := io.ReadFull(out, line); string(line[:n]) != "ready\n" {
		t.Fatalf("the child did not make its tree: %q", line[:n])
	}
	pid := cmd.Process.Pid
	var want syscall.Stat_t
	if err := syscall.Stat(target, &want); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"pd", "./pd", "/proc/self/cwd/pd", "/proc/self/../self/cwd/pd", fmt.Sprintf("/proc/%d/cwd/pd", pid),
		"/proc/thread-self/cwd/pd", "/proc/self/fd/../cwd/pd", "/dev/fd/../cwd/pd", "/proc/self/root/" + target, "/../../.." + target, target} {
		fd, err := openIn(pid, p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		var st syscall.Stat_t
		syscall.Fstat(fd, &st)
		syscall.Close(fd)
		if st.Dev != want.Dev || st.Ino != want.Ino {
			t.Errorf("%s: opened another file than %s", p, target)
		}
	}
	for _, p := range []string{"missing", "pd/x", "/proc/self/../self/cwd/missing", strings.Repeat("x", 300), strings.Repeat("a/", 2100)} {
		if _, err := openIn(pid, p); !lookupFails(err) {
			t.Errorf("%.40s: want a failure the process meets too, got %v", p, err)
		}
	}
	in.Close()
	cmd.Wait()
	if _, err := openIn(pid, "pd"); err == nil || lookupFails(err) {
		t.Errorf("a process that is gone: want a failure of the tracer's own, got %v", err)
	}
}

// TestP16OpenInDeepChild is the child of TestP16OpenInFollowsTheProcessView.
func TestP16OpenInDeepChild(t *testing.T) {
	target := os.Getenv("AIMON_GW_DEEP_CHILD")
	if target == "" {
		t.Skip("the child of TestP16OpenInFollowsTheProcessView")
	}
	n := strings.Repeat("d", 250)
	for range 18 {
		if err := syscall.Mkdir(n, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chdir(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(target, "pd"); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("ready\n")
	io.Copy(io.Discard, os.Stdin) // until the parent is done
}

// TestP16ELFCarriesAnInterpreter: a build of python is known as an
// interpreter by its dynamic symbols under any name (the re-probe's P3: a
// copy of it named xrun), cat is not, and a file that is no ELF, a
// truncated one and one whose section headers lie past its end are not,
// without a panic; one that cannot be opened could be one (fail closed).
func TestP16ELFCarriesAnInterpreter(t *testing.T) {
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if found, err := exec.LookPath(p); err == nil {
			if real, err := filepath.EvalSymlinks(found); err == nil {
				if b, err := os.ReadFile(real); err == nil && strings.HasPrefix(string(b), "\x7fELF") {
					py = real
					break
				}
			}
		}
	}
	if py == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3 program (an ELF file) is installed")
		}
		t.Skip("no python3 program (an ELF file) is installed")
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	build, err := os.ReadFile(py)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lying := append([]byte(nil), build[:64]...)
	lying[0x28] = 0xff // e_shoff far past the end
	for name, b := range map[string][]byte{"xrun": build, "text": []byte("#!/bin/sh\n"), "truncated": build[:4096], "lying": lying} {
		os.WriteFile(filepath.Join(dir, name), b, 0o755)
	}
	tr := &tracer{carries: map[fileKey]bool{}}
	for file, want := range map[string]bool{filepath.Join(dir, "xrun"): true, cat: false, filepath.Join(dir, "text"): false,
		filepath.Join(dir, "truncated"): false, filepath.Join(dir, "lying"): false, filepath.Join(dir, "missing"): true} {
		if got := tr.carriesInterpreter(file); got != want {
			t.Errorf("%s: carries an interpreter %v, want %v", file, got, want)
		}
	}
}
