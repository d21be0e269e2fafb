package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/exec/sandbox/launch"
	"aimon.dev/gw/tools"
)

// llTree is root/work/proj, writable, under root/work, read-only, which
// holds a program (root/work/ro.sh) and a read-only sibling of proj
// (root/work/other/ro.sh); outside /tmp, whose private copy would cover it.
func llTree(t *testing.T) (root, proj string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-ll")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	t.Cleanup(func() { os.RemoveAll(root) })
	proj = root + "/work/proj"
	for _, d := range []string{proj + "/bin", root + "/work/other"} {
		os.MkdirAll(d, 0o755)
	}
	for _, f := range []string{root + "/work/ro.sh", root + "/work/other/ro.sh", proj + "/w.sh", proj + "/bin/b.sh"} {
		os.WriteFile(f, []byte("#!/bin/sh\necho ran-$0\n"), 0o755)
	}
	return root, proj
}

// TestP16WrittenProgramsDoNotRun: what a command may write (the working
// directory, the private /tmp, /dev/shm) it cannot execute, a binary or a
// script, nor map executable (the loader run as a program, LD_PRELOAD:
// the mounts are noexec), and the launcher that made them so leaves the
// command no capability and the filter loaded; while programs in the read-only tree
// around it (a sibling, a file beside the writable directory) still run,
// a script read by an interpreter still runs, and sandbox.exec opts a
// tree back in.
func TestP16WrittenProgramsDoNotRun(t *testing.T) {
	need(t)
	root, proj := llTree(t)
	sb := &tools.Sandbox{Writable: []string{proj}}
	tests := []struct {
		note, script, says string
		runs               bool
	}{
		{note: "a script in the working directory", script: "./w.sh"},
		{note: "a copied binary in the working directory", script: "cp /usr/bin/true t && ./t"},
		{note: "a copied binary in /tmp", script: "cp /usr/bin/true /tmp/t && /tmp/t"},
		{note: "a script in /tmp", script: "printf '#!/bin/sh\\necho ran\\n' > /tmp/s && chmod +x /tmp/s && /tmp/s"},
		{note: "a copied binary in /dev/shm", script: "cp /usr/bin/true /dev/shm/t && /dev/shm/t"},
		{note: "./bin without sandbox.exec", script: "./bin/b.sh"},
		{note: "a binary in the working directory run by the loader", script: "cp /usr/bin/true t && /lib64/ld-linux-x86-64.so.2 ./t", says: "failed to map segment"},
		{note: "a binary in /tmp run by the loader", script: "cp /usr/bin/true /tmp/t && /lib64/ld-linux-x86-64.so.2 /tmp/t", says: "failed to map segment"},
		{note: "a library in the working directory preloaded", script: "cp /lib/x86_64-linux-gnu/libc.so.6 l.so && LD_PRELOAD=./l.so /usr/bin/true", says: "cannot be preloaded", runs: true},
		{note: "no capability, the filter loaded, no new privileges", script: "grep -E '^(CapPrm|CapEff|CapBnd|CapAmb):.0000000000000000$' /proc/self/status | wc -l | grep -qx 4 && grep -qE '^Seccomp:.2' /proc/self/status && grep -qE '^NoNewPrivs:.1' /proc/self/status", runs: true},
		{note: "a script read by sh", script: "sh w.sh", runs: true},
		{note: "a program beside the writable directory", script: root + "/work/ro.sh", runs: true},
		{note: "a program in a read-only sibling", script: root + "/work/other/ro.sh", runs: true},
		{note: "a system program", script: "/usr/bin/true", runs: true},
	}
	for _, tt := range tests {
		out, err := run(t, sb, proj, tt.script)
		if (err == nil) != tt.runs {
			t.Errorf("%s: err = %v, want it run %v; output:\n%s", tt.note, err, tt.runs, out)
		}
		if tt.says == "" && !tt.runs {
			tt.says = "ermission denied"
		}
		if !strings.Contains(out, tt.says) {
			t.Errorf("%s: the refusal does not say so:\n%s", tt.note, out)
		}
	}
	sb.Executable = []string{"./bin/**"}
	if out, err := run(t, sb, proj, "./bin/b.sh"); err != nil || !strings.Contains(out, "ran-./bin/b.sh") {
		t.Errorf("with sandbox.exec ./bin/**, ./bin/b.sh did not run (%v):\n%s", err, out)
	}
	if out, err := run(t, sb, proj, "./w.sh"); err == nil {
		t.Errorf("with sandbox.exec ./bin/**, ./w.sh outside it ran:\n%s", out)
	}
}

// TestP16GrantsSkipTheWayToWhatIsWritten: execute is granted on the
// siblings along each writable path's ancestors, never on an ancestor
// (which would cover it) nor inside it, and again on an Exec path inside.
func TestP16GrantsSkipTheWayToWhatIsWritten(t *testing.T) {
	root, proj := llTree(t)
	got := launch.Grants(launch.Spec{NoExec: []string{"/tmp", proj}, Exec: []string{proj + "/bin"}})
	for _, p := range []string{"/usr", root + "/work/ro.sh", root + "/work/other", proj + "/bin"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s is not granted: %v", p, got)
		}
	}
	for _, g := range got {
		if g == "/" || g == "/tmp" || within(proj, g) || within(g, proj) && g != proj+"/bin" {
			t.Errorf("%s is granted, which covers or lies in what is written", g)
		}
	}
}

// TestP16NoLandlockNoCommand: on a kernel whose Landlock cannot refuse
// execution, no sandbox is made, and the sentence says why and what to do.
func TestP16NoLandlockNoCommand(t *testing.T) {
	need(t)
	saved := landlockABI
	t.Cleanup(func() { landlockABI = saved })
	for _, abi := range []struct {
		v   int
		err error
	}{{1, nil}, {-1, errors.New("operation not supported")}} {
		landlockABI = func() (int, error) { return abi.v, abi.err }
		dir := t.TempDir()
		_, err := Command(&tools.Sandbox{Writable: []string{dir}}, dir, []string{"touch", filepath.Join(dir, "ran")}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "Landlock") || !strings.Contains(err.Error(), "Linux 5.19") {
			t.Errorf("ABI %d: err = %v, want the sentence about Landlock", abi.v, err)
		}
	}
}

// BenchmarkP16Launcher: one sandboxed true through Command (the launcher
// that applies Landlock, then true) against bwrap alone with the same
// mounts running true, in one loop, both without a pids group; the
// launcher here is the test binary.
func BenchmarkP16Launcher(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	old := pidsParent
	pidsParent = func() pidsHome { return pidsHome{err: os.ErrNotExist} }
	defer func() { pidsParent = old }()
	dir := b.TempDir()
	sb := &tools.Sandbox{Writable: []string{dir}}
	bw, _ := bwrap()
	a, err := args(sb, dir, []string{"/usr/bin/true"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	var launched, bare time.Duration
	for b.Loop() {
		t0 := time.Now()
		cmd, err := Command(sb, dir, []string{"/usr/bin/true"}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		Release(cmd)
		t1 := time.Now()
		bareBwrap(b, bw, a)
		launched += t1.Sub(t0)
		bare += time.Since(t1)
	}
	b.ReportMetric(float64(launched)/float64(bare), "launched/bwrap")
	b.ReportMetric(float64(launched-bare)/float64(b.N)/1e6, "added-ms")
}

// bareBwrap runs bubblewrap alone with the sandbox's seccomp filter and
// the same arguments: what a benchmark compares the sandbox with.
func bareBwrap(b *testing.B, bw string, args []string) {
	b.Helper()
	f, err := filterFile()
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	c := exec.Command(bw, args...)
	c.ExtraFiles = []*os.File{f}
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
}
