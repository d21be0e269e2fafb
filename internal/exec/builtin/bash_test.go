package builtin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

func TestBash(t *testing.T) {
	env := session(t)
	tests := []struct {
		name  string
		in    string
		isErr bool
		want  string
		frags []string
	}{
		{name: "stdout", in: `{"command":"echo hello","description":"Say hello"}`, want: "hello\nExit code: 0"},
		{name: "stdout and stderr", in: `{"command":"echo out; echo err >&2; exit 3"}`, isErr: true, want: "out\nstderr:\nerr\nExit code: 3"},
		{name: "no output", in: `{"command":"true"}`, want: "(no output)\nExit code: 0"},
		{name: "no final newline", in: `{"command":"printf abc"}`, want: "abc\nExit code: 0"},
		{name: "working directory", in: `{"command":"pwd"}`, want: env.Workdir + "\nExit code: 0"},
		{name: "stdin is empty", in: `{"command":"cat; echo done"}`, want: "done\nExit code: 0"},
		{name: "signal", in: `{"command":"kill -TERM $$"}`, isErr: true, frags: []string{"killed by signal terminated"}},
		{name: "clamped timeout", in: `{"command":"echo hi","timeout":900000}`, frags: []string{"hi\nExit code: 0", "timeout 900000 ms was lowered to the maximum, 600000 ms"}},
		{name: "maximum timeout", in: `{"command":"echo hi","timeout":600000}`, want: "hi\nExit code: 0"},
		{name: "zero timeout", in: `{"command":"echo hi","timeout":0}`, isErr: true, frags: []string{"'timeout'", "got 0."}},
		{name: "negative timeout", in: `{"command":"echo hi","timeout":-5}`, isErr: true, frags: []string{"'timeout'", "got -5."}},
		{name: "fractional timeout", in: `{"command":"echo hi","timeout":1.5}`, isErr: true, frags: []string{"Parameter 'timeout' must be an integer, got number 1.5."}},
		{name: "empty command", in: `{"command":"  "}`, isErr: true, frags: []string{"'command' must not be empty"}},
		{name: "missing command", in: `{"timeout":5}`, isErr: true, frags: []string{"Missing required parameter 'command'."}},
		{name: "nul in command", in: `{"command":"echo \u0000"}`, isErr: true, frags: []string{"NUL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, "Bash", tt.in)
			wantResult(t, r, tt.isErr, tt.frags...)
			if tt.want != "" && r.Text != tt.want {
				t.Errorf("text =\n%q\nwant\n%q", r.Text, tt.want)
			}
		})
	}
}

func TestBashOutputCut(t *testing.T) {
	env := session(t)
	r := call(t, env, "Bash", `{"command":"head -c 40000 /dev/zero | tr '\\0' a; echo oops >&2"}`)
	wantResult(t, r, false, "[stdout cut: showing the first 30000 of 40000 bytes]", "stderr:\noops\n", "Exit code: 0")
	if got := strings.Count(r.Text, "a"); got != MaxOutput {
		t.Errorf("%d bytes of stdout kept, want %d", got, MaxOutput)
	}
	// The cut falls inside a two-byte character: the half is dropped.
	r = call(t, env, "Bash", `{"command":"printf a; for i in $(seq 20000); do printf 'é'; done"}`)
	wantResult(t, r, false, "[stdout cut: showing the first 29999 of 40001 bytes]")
	if !utf8.ValidString(r.Text) {
		t.Error("cut output is not valid UTF-8")
	}
}

func TestBashWithoutWorkdir(t *testing.T) {
	r := Bash{}.Run(context.Background(), &tools.Env{}, input(t, `{"command":"echo ok"}`))
	wantResult(t, r, false, "ok\nExit code: 0")
	r = Bash{}.Run(context.Background(), &tools.Env{Workdir: "/no/such/dir"}, input(t, `{"command":"echo ok"}`))
	wantResult(t, r, true, "working directory /no/such/dir does not exist")
}

// alive reports whether pid is a running process (a zombie is dead: it only
// waits for a parent that may never reap it).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitDead polls until pid is dead; a kill is asynchronous. It fails the test
// when the process is still alive after a generous while.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for range 500 {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d survived its command", pid)
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("bad pid file %q", b)
	}
	return pid
}

func TestBashTimeoutKillsTheGroup(t *testing.T) {
	env := session(t)
	r := call(t, env, "Bash", `{"command":"sleep 300 & echo $! > child.pid; echo started; wait","timeout":300}`)
	wantResult(t, r, true, "started\n", "timed out after 300 ms", "killed")
	waitDead(t, readPid(t, filepath.Join(env.Workdir, "child.pid")))
}

// A background child that bash leaves behind does not outlive the call, and
// does not hold the call open with its copy of the output pipe.
func TestBashExitKillsLeftovers(t *testing.T) {
	env := session(t)
	r := call(t, env, "Bash", `{"command":"sleep 300 & echo $! > child.pid; echo bye"}`)
	wantResult(t, r, false, "bye\nExit code: 0")
	waitDead(t, readPid(t, filepath.Join(env.Workdir, "child.pid")))
}

func TestBashCancelKillsTheGroup(t *testing.T) {
	env := session(t)
	pidFile := filepath.Join(env.Workdir, "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan tools.Result)
	go func() {
		done <- Bash{}.Run(ctx, env, input(t, `{"command":"sleep 300 & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; wait"}`))
	}()
	for range 1000 {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	r := <-done
	wantResult(t, r, true, "cancelled", "killed")
	waitDead(t, readPid(t, pidFile))
}

func TestBashCancelledBeforeStart(t *testing.T) {
	env := session(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Bash{}.Run(ctx, env, input(t, `{"command":"touch ran"}`))
	wantResult(t, r, true, "cancelled")
	if _, err := os.Stat(filepath.Join(env.Workdir, "ran")); err == nil {
		t.Error("the command ran although the call was cancelled")
	}
}

// A child that leaves the process group (setsid) cannot be killed with it; it
// still must not hold the call open through the output pipe it inherited.
func TestBashEscapedChildDoesNotHoldTheCall(t *testing.T) {
	env := session(t)
	r := call(t, env, "Bash", `{"command":"setsid bash -c 'echo $$ > child.tmp; mv child.tmp child.pid; exec sleep 300' & while [ ! -s child.pid ]; do sleep 0.01; done; echo done"}`)
	pid := readPid(t, filepath.Join(env.Workdir, "child.pid"))
	syscall.Kill(pid, syscall.SIGKILL)
	wantResult(t, r, false, "done\nExit code: 0")
}

// BenchmarkBashSandbox: one Bash call of true under the sandbox (rules
// R6, R8), the same call with mode "off", and bwrap alone run with the
// same arguments (its filter, limits and binds), in one loop, with one
// writable directory and with fifty. sandbox/off and sandbox/bwrap are the
// ratios (the gateway's share beyond bwrap: target at most 1.2), added-ms
// what the sandbox adds to one call.
func BenchmarkBashSandbox(b *testing.B) {
	if err := sandbox.Available(); err != nil {
		b.Skipf("no usable bwrap: %v", err)
	}
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("writable=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			sb := &tools.Sandbox{Writable: []string{dir}}
			for i := 1; i < n; i++ {
				d := filepath.Join(dir, fmt.Sprintf("w%d", i))
				os.Mkdir(d, 0o755)
				sb.Writable = append(sb.Writable, d)
			}
			on := &tools.Env{Workdir: dir, Files: tools.NewFileSet(), Sandbox: sb}
			off := &tools.Env{Workdir: dir, Files: tools.NewFileSet(), Sandbox: &tools.Sandbox{Off: true}}
			argv, err := limited([]string{"bash", "-c", "true"}, DefaultBashTimeout, true)
			if err != nil {
				b.Fatal(err)
			}
			alone := func() {
				cmd, err := sandbox.Command(sb, dir, argv, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer sandbox.Release(cmd)
				defer sandbox.Finish(cmd)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("bwrap: %v %s", err, out)
				}
			}
			var sandboxed, plain, bwrap time.Duration
			for b.Loop() {
				t0 := time.Now()
				if r := call(b, on, "Bash", `{"command":"true"}`); r.IsError {
					b.Fatal(r.Text)
				}
				t1 := time.Now()
				if r := call(b, off, "Bash", `{"command":"true"}`); r.IsError {
					b.Fatal(r.Text)
				}
				t2 := time.Now()
				alone()
				sandboxed += t1.Sub(t0)
				plain += t2.Sub(t1)
				bwrap += time.Since(t2)
			}
			b.ReportMetric(float64(sandboxed)/float64(plain), "sandbox/off")
			b.ReportMetric(float64(sandboxed)/float64(bwrap), "sandbox/bwrap")
			b.ReportMetric(float64(sandboxed-plain)/float64(b.N)/1e6, "added-ms")
		})
	}
}
