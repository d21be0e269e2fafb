package builtin

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/cputime"
	needs "aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/tools"
)

// searchTree copies Go's own net package sources, a realistic tree of
// about 400 files in 5 MB, into a temporary working directory.
func searchTree(b *testing.B) *tools.Env {
	b.Helper()
	src := filepath.Join(runtime.GOROOT(), "src", "net")
	env := &tools.Env{Workdir: b.TempDir(), Files: tools.NewFileSet()}
	env.Scope = &tools.Scope{Anchor: env.Workdir}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		write(b, env.Workdir, rel, string(data))
		return nil
	})
	if err != nil {
		b.Fatalf("the search benchmarks read Go's sources at %s: %v", src, err)
	}
	return env
}

// program finds a program the search benchmarks compare against; under CI
// a missing one fails, since .ci/run installs it.
func program(b *testing.B, names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	needs.Missing(b, "%s is not installed; .ci/run installs ripgrep and fd-find (Debian packages)", names[0])
	return ""
}

// versus times run and the command in alternate rounds, checks that each
// found as many files as the other, and reports the medians of the
// per-round ratios run/command (issue 32: ≤ 1.0 for Grep against rg and
// Glob against fd, each as the agent would otherwise run it: a process),
// of processor time (the machine is shared) and of wall time.
func versus(b *testing.B, unit string, run func() tools.Result, argv ...string) {
	b.Helper()
	var cpu, wall []float64
	var ours, theirs time.Duration
	for b.Loop() {
		c0, t0 := cputime.Process(), time.Now()
		r := run()
		c1, t1 := cputime.Process(), time.Now()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = io.Discard
		out, err := cmd.Output()
		t2 := time.Now()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && len(out) == 0 {
			err = nil // rg: nothing found
		}
		if r.IsError || err != nil {
			b.Fatalf("%s: %v\n%.500s", strings.Join(argv, " "), err, r.Text)
		}
		if got, want := fileLines(r.Text), fileLines(string(out)); got != want {
			b.Fatalf("%d files found, %s found %d:\n%.500s", got, argv[0], want, r.Text)
		}
		child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		ours, theirs = ours+c1-c0, theirs+child
		cpu = append(cpu, float64(c1-c0)/float64(child))
		wall = append(wall, float64(t1.Sub(t0))/float64(t2.Sub(t1)))
	}
	slices.Sort(cpu)
	slices.Sort(wall)
	b.ReportMetric(cpu[len(cpu)/2], unit+"-cpu")
	b.ReportMetric(wall[len(wall)/2], unit+"-wall")
	b.ReportMetric(float64(ours.Microseconds())/float64(b.N), "cpu-µs/call")
	b.ReportMetric(float64(theirs.Microseconds())/float64(b.N), "cpu-µs/"+filepath.Base(argv[0]))
}

// fileLines counts the files a listing names: its lines that are paths,
// or the total Glob states when it shows only the newest.
func fileLines(text string) int {
	var shown, of int
	if i := strings.Index(text, "[Showing the "); i >= 0 {
		if _, err := fmt.Sscanf(text[i:], "[Showing the %d newest of %d files", &shown, &of); err == nil {
			return of
		}
	}
	n := 0
	for l := range strings.Lines(text) {
		if strings.HasPrefix(l, "/") {
			n++
		}
	}
	return n
}

// BenchmarkGrepVsRipgrep lists the files that match, as Grep's default
// mode does and rg -l, for a literal found in many files, a regular
// expression found in a few, a word found in none, a literal without
// regard to case, and a regular expression whose literal is inside it.
func BenchmarkGrepVsRipgrep(b *testing.B) {
	rg := program(b, "rg")
	env := searchTree(b)
	for _, p := range []struct{ name, pattern string }{
		{"literal", "ErrClosed"},
		{"regexp", `func \(\w+ \*UDPConn\) Read\w*`},
		{"absent", "zqxjkvbw"},
		{"ignore-case", "(?i)errclosed"},
		{"inner-literal", `\w+Conn\) Read\w*`},
	} {
		b.Run(p.name, func(b *testing.B) {
			in := input(b, `{"pattern":`+js(p.pattern)+`}`)
			versus(b, "grep/rg", func() tools.Result { return (Grep{}).Run(context.Background(), env, in) },
				rg, "-l", "--no-config", "--hidden", "--no-ignore", "--", p.pattern, env.Workdir)
		})
	}
}

// BenchmarkGlobVsFd lists files by a pattern, as Glob does and fd -g.
func BenchmarkGlobVsFd(b *testing.B) {
	fd := program(b, "fdfind", "fd")
	env := searchTree(b)
	for _, p := range []struct{ name, pattern, fd string }{
		{"anywhere", "**/*_test.go", "*_test.go"},
		{"one-dir", "http/*.go", "http/*.go"},
	} {
		b.Run(p.name, func(b *testing.B) {
			in := input(b, `{"pattern":`+js(p.pattern)+`}`)
			args := []string{fd, "--type", "f", "--hidden", "--no-ignore", "--glob", p.fd, env.Workdir}
			if strings.Contains(p.fd, "/") {
				args = []string{fd, "--type", "f", "--hidden", "--no-ignore", "--full-path", "--glob", "**/" + p.fd, env.Workdir}
			}
			versus(b, "glob/fd", func() tools.Result { return (Glob{}).Run(context.Background(), env, in) }, args...)
		})
	}
}

// BenchmarkSearchWorkers times Grep and Glob with N workers against the
// walk alone in alternate rounds, and reports the medians of the per-round
// ratios N/1 of processor time and of wall time: where they fall below 1
// is where workers pay (issue 32; workers() chooses from it). Run it under
// GOMAXPROCS and taskset to see the crossover on a machine.
func BenchmarkSearchWorkers(b *testing.B) {
	env := searchTree(b)
	defer func() { searchWorkers = 0 }()
	for _, c := range []struct{ name, tool, in string }{
		{"grep-absent", "Grep", `{"pattern":"zqxjkvbw"}`},
		{"grep-regexp", "Grep", `{"pattern":"func \\(\\w+ \\*UDPConn\\) Read\\w*"}`},
		{"glob-anywhere", "Glob", `{"pattern":"**/*_test.go"}`},
	} {
		for _, n := range []int{2, 4} {
			b.Run(fmt.Sprintf("%s/workers=%d", c.name, n), func(b *testing.B) {
				tool, _ := Lookup(c.tool)
				in := input(b, c.in)
				var cpu, wall []float64
				for b.Loop() {
					var took [2]time.Duration
					var spent [2]time.Duration
					for i, w := range []int{1, n} {
						searchWorkers = w
						c0, t0 := cputime.Process(), time.Now()
						if r := tool.Run(context.Background(), env, in); r.IsError {
							b.Fatal(r.Text)
						}
						spent[i], took[i] = cputime.Process()-c0, time.Since(t0)
					}
					cpu = append(cpu, float64(spent[1])/float64(spent[0]))
					wall = append(wall, float64(took[1])/float64(took[0]))
				}
				slices.Sort(cpu)
				slices.Sort(wall)
				b.ReportMetric(cpu[len(cpu)/2], "N/1-cpu")
				b.ReportMetric(wall[len(wall)/2], "N/1-wall")
			})
		}
	}
}
