package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
	"aimon.dev/gw/internal/testkit/gobuild"
	"aimon.dev/gw/tools"
)

// benchJudge judges as a call whose deny list names touch: every program
// is looked up (touch is known by its file) and allowed.
func benchJudge() *tools.ExecJudge {
	return &tools.ExecJudge{Names: []string{"touch"}, Decide: func([]string) (string, bool) { return "", false }}
}

// benchRun runs argv in a fresh sandbox of dir, judged by j when not nil,
// its pids group made in home (none when home.err is set).
func benchRun(b *testing.B, dir string, argv []string, j *tools.ExecJudge, home pidsHome) {
	b.Helper()
	old := pidsParent
	pidsParent = func() pidsHome { return home }
	defer func() { pidsParent = old }()
	cmd, err := Command(&tools.Sandbox{Writable: []string{dir}, Exec: j}, dir, argv, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer Release(cmd)
	defer Finish(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
}

// BenchmarkP16ThousandProcesses: a command that starts 1,000 short
// processes (a shell loop of /bin/true; the builtin true starts none)
// with the exec judgement against the same command without it, in one
// loop: with/without is the ratio (issue 41's goal: at most 1.3).
func BenchmarkP16ThousandProcesses(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	dir, pids := b.TempDir(), pidsParent()
	argv := []string{"bash", "-c", "for i in $(seq 1000); do /bin/true; done"}
	var with, without time.Duration
	for b.Loop() {
		t0 := time.Now()
		benchRun(b, dir, argv, benchJudge(), pids)
		t1 := time.Now()
		benchRun(b, dir, argv, nil, pids)
		with += t1.Sub(t0)
		without += time.Since(t1)
	}
	b.ReportMetric(float64(with)/float64(without), "with/without")
	b.ReportMetric(float64(with-without)/float64(b.N)/1e3/1e3, "added-µs/process")
}

// BenchmarkP16SandboxedTrue: a sandboxed true as a call runs it (judged,
// in its pids group) against bwrap alone with the same mounts and filter
// (issue 41's goal: at most 1.2), with what each part adds beside it, in
// one loop: launched by the sandbox program beside the gateway, by the
// gateway's own binary where there is none (the fallback, as before: the
// 62 MB aimon-gw), by the sandbox program with no judgement and no pids
// group (the launcher alone), and judged without the pids group (the
// gateway's tracing thread and its stops).
func BenchmarkP16SandboxedTrue(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	tr, err := exec.LookPath("true")
	if err != nil {
		b.Skip(err)
	}
	dir, pids, none := b.TempDir(), pidsParent(), pidsHome{err: os.ErrNotExist}
	bw, _ := bwrap()
	a, err := args(&tools.Sandbox{Writable: []string{dir}}, dir, []string{tr}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	small := besideSmall(b, func(dir string) { linkSmall(b, dir, 0o755) })
	own := gatewayAlone(b)
	saved := Launcher
	defer func() { Launcher = saved }()
	use := func(exe string) { Launcher = func() (string, error) { return exe, nil } }
	argv := []string{"true"}
	var full, fallback, traced, launched, bare time.Duration
	for b.Loop() {
		t0 := time.Now()
		use(small)
		benchRun(b, dir, argv, benchJudge(), pids)
		t1 := time.Now()
		use(own)
		benchRun(b, dir, argv, benchJudge(), pids)
		t2 := time.Now()
		use(small)
		benchRun(b, dir, argv, benchJudge(), none)
		t3 := time.Now()
		benchRun(b, dir, argv, nil, none)
		t4 := time.Now()
		bareBwrap(b, bw, a)
		full += t1.Sub(t0)
		fallback += t2.Sub(t1)
		traced += t3.Sub(t2)
		launched += t4.Sub(t3)
		bare += time.Since(t4)
	}
	b.ReportMetric(float64(full)/float64(bare), "sandboxed/bwrap")
	b.ReportMetric(float64(fallback)/float64(bare), "own-binary/bwrap")
	b.ReportMetric(float64(traced)/float64(bare), "traced/bwrap")
	b.ReportMetric(float64(launched)/float64(bare), "launched/bwrap")
	b.ReportMetric(float64(bare)/float64(b.N)/1e6, "bwrap-ms")
}

// gatewayAlone is the gateway's binary, linked into a directory of its
// own with no sandbox program beside it: what starts a sandbox where
// only aimon-gw is installed (go run, go install ./cmd/aimon-gw).
func gatewayAlone(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	exe := filepath.Join(dir, "aimon-gw")
	if err := os.Link(gobuild.Binary(b, gobuild.Gateway), exe); err != nil {
		b.Fatal(err)
	}
	return exe
}

// BenchmarkP16ProgramsOfACall: the programs a sandboxed call's deny
// entries name, found on PATH and known by their files, as each call
// makes its tracer's spec, for 1,000 names (git among them, the rest not
// installed) against 10, rounds interleaved (issue 41: a decision under
// 1,000 deny entries at most 1.2× one under 10).
func BenchmarkP16ProgramsOfACall(b *testing.B) {
	names := func(n int) []string {
		out := []string{"git", "touch", "sh"}
		for i := len(out); i < n; i++ {
			out = append(out, fmt.Sprintf("tool%dx", i))
		}
		return out
	}
	small, large := names(10), names(1000)
	if len(programs(small)) != 3 {
		b.Skip("git, touch and sh are not all on PATH")
	}
	old := settle
	settle = 0 // the test's PATH may have changed a moment ago
	defer func() { settle = old }()
	var d [2]time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2
			c0 := cputime.Process()
			if len(programs([][]string{small, large}[k])) != 3 {
				b.Fatal("not the three programs")
			}
			d[k] += cputime.Process() - c0
		}
	}
	b.ReportMetric(float64(d[1])/float64(d[0]), "1000/10:cpu")
	b.ReportMetric(float64(d[1])/float64(b.N)/1e3, "1000-cpu-µs/call")
}

// BenchmarkP16ScriptArguments: commands whose programs' arguments are
// followed in the command's view because a deny entry names a #! script
// (every program's, in case it is an interpreter: rule P16's script
// judgement), against the same judged under an entry on touch alone (no
// script: none are), in one loop each: with/without is what it adds.
// Shells given five missing paths of one to three components, 1,000 of
// them; and true given 100 files of the working directory, 200 times.
func BenchmarkP16ScriptArguments(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	bin := b.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "pyscript"), []byte("#!/usr/bin/env python3\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	b.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	scripts := &tools.ExecJudge{Names: []string{"touch", "pyscript"}, Decide: func([]string) (string, bool) { return "", false }}
	for _, c := range []struct{ name, loop string }{
		{"shells-five-missing", "for i in $(seq 1000); do /bin/sh -c : a/b/c ./d/e /f/g h i; done"},
		{"true-hundred-files", "for i in $(seq 200); do /bin/true sub/f*; done"},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir, pids := b.TempDir(), pidsParent()
			os.Mkdir(filepath.Join(dir, "sub"), 0o755)
			for i := range 100 {
				os.WriteFile(filepath.Join(dir, "sub", fmt.Sprint("f", i)), []byte("x"), 0o644)
			}
			argv := []string{"bash", "-c", c.loop}
			var with, without time.Duration
			for b.Loop() {
				t0 := time.Now()
				benchRun(b, dir, argv, scripts, pids)
				t1 := time.Now()
				benchRun(b, dir, argv, benchJudge(), pids)
				with += t1.Sub(t0)
				without += time.Since(t1)
			}
			b.ReportMetric(float64(with)/float64(without), "with/without")
		})
	}
}

// BenchmarkR9NestedGateWalk: the walk each sandbox makes for the runtimes'
// settings directories below what its command may write, over a tree
// larger than its budget (64 packages of 64 directories, one .claude in
// each package): what the walk adds to every command at most (rule R9),
// to be read beside BenchmarkP16SandboxedTrue of the same run.
func BenchmarkR9NestedGateWalk(b *testing.B) {
	big := b.TempDir()
	for i := range 64 {
		for j := range 64 {
			os.MkdirAll(filepath.Join(big, fmt.Sprint("p", i), fmt.Sprint("d", j)), 0o755)
		}
		os.MkdirAll(filepath.Join(big, fmt.Sprint("p", i), ".claude"), 0o755)
	}
	for b.Loop() {
		if n := len(NestedGateDirs([]string{big}, nestedGateBudget)); n != 64 {
			b.Fatalf("%d directories found, not 64", n)
		}
	}
}
