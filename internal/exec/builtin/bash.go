package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// BashInput is the input of Bash; it mirrors #BashInput.
type BashInput struct {
	Command     string  `json:"command"`
	Timeout     *int    `json:"timeout"`
	Description *string `json:"description"`
}

// Bash timeouts, in milliseconds. A larger timeout is clamped, not refused (rule S7).
const (
	DefaultBashTimeout = 120000
	MaxBashTimeout     = 600000
)

// drainGrace bounds how long Bash waits for the output pipes after it killed
// the command's process group: a process that left the group (setsid) may
// hold them open for ever.
const drainGrace = 2 * time.Second

// MaxOutputTotal bounds the output bytes a command may write, both streams
// together: past it the command is killed (rule R8).
const MaxOutputTotal = 64 << 20

// The bounds on a command's processes (rule R8), set with prlimit inside
// the sandbox: each one's data and file size, no core dump, CPU time no
// longer than the call may take, and the number of processes
// (sandbox.MaxProcesses), which a pids cgroup bounds too where the
// gateway can make one: as root, only it does.
const (
	maxDataBytes = 4 << 30
	maxFileSize  = 4 << 30
)

var prlimitPath = sync.OnceValues(func() (string, error) { return exec.LookPath("prlimit") })

// limited is argv run under prlimit with the bounds of a call of ms
// milliseconds. The process count is per user: bounded only in the
// sandbox's own user namespace, where it counts the command's processes.
func limited(argv []string, ms int, sandboxed bool) ([]string, error) {
	p, err := prlimitPath()
	if err != nil {
		return nil, err
	}
	cpu := strconv.Itoa((ms + 999) / 1000)
	a := []string{p, "--cpu=" + cpu, "--data=" + strconv.Itoa(maxDataBytes), "--fsize=" + strconv.Itoa(maxFileSize), "--core=0"}
	if sandboxed {
		a = append(a, "--nproc="+strconv.Itoa(sandbox.MaxProcesses()))
	}
	return append(append(a, "--"), argv...), nil
}

// Bash runs a command with bash -c in the working directory, in its own
// process group. At the timeout, on cancellation, and when bash exits, the
// whole group is killed, so no child outlives the call. Sequential,
// externally terminated.
type Bash struct{}

// Run runs the command.
func (Bash) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p BashInput
	if r, ok := bind(env, "Bash", in, &p); !ok {
		return r
	}
	if strings.TrimSpace(p.Command) == "" {
		return refuse(env, "Bash", "Parameter 'command' must not be empty; give a command line to run.")
	}
	if strings.IndexByte(p.Command, 0) >= 0 {
		return refuse(env, "Bash", "Parameter 'command' contains a NUL byte, which a command line cannot hold: %s.", quote(p.Command))
	}
	ms := DefaultBashTimeout
	if p.Timeout != nil {
		ms = *p.Timeout
	}
	if ms < 1 {
		return refuse(env, "Bash", "Parameter 'timeout' must be a positive number of milliseconds (at most %d), got %d.", MaxBashTimeout, ms)
	}
	var notes []string
	if ms > MaxBashTimeout {
		notes = append(notes, fmt.Sprintf("The timeout %d ms was lowered to the maximum, %d ms.", ms, MaxBashTimeout))
		env.Logger().Warn("Bash timeout clamped", "timeout", ms, "max", MaxBashTimeout)
		ms = MaxBashTimeout
	}
	if ctx.Err() != nil {
		return cancelled(env, "Bash", ctx)
	}
	desc := ""
	if p.Description != nil {
		desc = *p.Description
	}
	env.Logger().Debug("Bash", "command", p.Command, "description", desc, "timeout_ms", ms, "dir", workdir(env))

	if wd := workdir(env); wd != "" {
		fi, err := os.Stat(wd)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", wd)
		}
		if err != nil {
			return fail(env, "Bash", err, "The working directory %s does not exist or is not a directory, so the command was not run.", wd)
		}
	}
	sb := env.Sandbox
	sandboxed := sb != nil && !sb.Off
	if sandboxed {
		if err := sandbox.Available(); err != nil {
			return noSandbox(env, err)
		}
		if err := sandbox.Bounded(); err != nil {
			env.Logger().Warn("Bash refused: its processes cannot be bounded", "cause", err)
			return tools.Failure(err, "Bash bounds the processes of each command, and cannot here: %v. The command was not run.", err)
		}
	}
	argv, err := limited([]string{"bash", "-c", p.Command}, ms, sandboxed)
	if err != nil {
		return fail(env, "Bash", err, "Bash bounds each command with prlimit, and it cannot be found here (%v); the operator must install util-linux. The command was not run.", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if sandboxed {
		if cmd, err = sandbox.Command(sb, workdir(env), argv, nil, nil); err != nil {
			return noSandbox(env, err)
		}
		defer sandbox.Release(cmd)
		defer sandbox.Finish(cmd)
	}
	cmd.Dir = workdir(env)
	run, err := start(cmd)
	if run != nil {
		run.log = env.Logger()
	}
	if err != nil {
		return fail(env, "Bash", err, "Could not start bash in %s: %v.", dirName(workdir(env)), err)
	}
	why := run.wait(ctx, time.Duration(ms)*time.Millisecond)

	var b strings.Builder
	writeStream(&b, "", &run.stdout)
	writeStream(&b, "stderr", &run.stderr)
	if b.Len() == 0 {
		b.WriteString("(no output)\n")
	}
	isErr := true
	st := run.cmd.ProcessState
	switch {
	case why == stopTimeout:
		fmt.Fprintf(&b, "The command timed out after %d ms and was killed, with its child processes.", ms)
	case why == stopCancel:
		b.WriteString("The call was cancelled; the command was killed, with its child processes.")
	case why == stopOutput:
		fmt.Fprintf(&b, "The command wrote more than %d bytes of output and was killed, with its child processes; send less to standard output (into a file, or through head).", MaxOutputTotal)
	case st == nil:
		b.WriteString("The command's exit status is unknown.")
	case st.ExitCode() >= 0:
		fmt.Fprintf(&b, "Exit code: %d", st.ExitCode())
		isErr = st.ExitCode() != 0
	default:
		sig := "unknown"
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal().String()
		}
		fmt.Fprintf(&b, "The command was killed by signal %s.", sig)
	}
	if sandboxed && sb.Exec != nil {
		// A program the command started was refused where it started
		// (rule P16): the call fails, whatever bash's status.
		for _, why := range sb.Exec.Refusals() {
			b.WriteString("\nA program the command started was killed before it ran: " + why)
			isErr = true
		}
	}
	if stderr := string(run.stderr.buf); sandboxed && st != nil && (st.ExitCode() == 126 && strings.Contains(stderr, "Permission denied") || strings.Contains(stderr, "failed to map segment from shared object")) {
		b.WriteString("\n" + sandbox.NotExecutable)
	}
	for _, n := range notes {
		b.WriteString("\n" + n)
	}
	code := -1
	if st != nil && why == stopExit {
		code = st.ExitCode()
	}
	return tools.Result{Text: b.String(), IsError: isErr, Structured: BashOutput{
		ExitCode: code, Stdout: string(run.stdout.buf), Stderr: string(run.stderr.buf), TimedOut: why == stopTimeout}}
}

// noSandbox is the refusal of a command whose sandbox cannot be made.
func noSandbox(env *tools.Env, err error) tools.Result {
	if withheld := (sandbox.Withheld{}); errors.As(err, &withheld) {
		env.Logger().Warn("Bash refused: its sandbox would let the command switch the gate off", "cause", err)
		return tools.Failure(err, "The command was not run: %v.", err)
	}
	env.Logger().Warn("Bash refused: no usable sandbox", "cause", err)
	return tools.Failure(err, "Bash runs commands in a bubblewrap sandbox, and none can be made here (%v). The operator must install it (apt-get install bubblewrap) and allow user namespaces, or set sandbox: mode: \"off\" on the Bash tool in the policy. The command was not run.", err)
}

// BashOutput is Bash's structured result; it mirrors #BashOutput.
type BashOutput struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
}

type stop int

const (
	stopExit stop = iota
	stopTimeout
	stopCancel
	stopOutput
)

// running is a started command and the capture of its output.
type running struct {
	log            *slog.Logger
	cmd            *exec.Cmd
	outR, errR     *os.File
	stdout, stderr capped
	readers        sync.WaitGroup
	total          atomic.Int64  // output bytes of both streams
	flooded        chan struct{} // closed once total passes MaxOutputTotal
	flood          sync.Once
}

// wrote counts n more bytes of output; past MaxOutputTotal the command is
// stopped, as a timeout would.
func (r *running) wrote(n int) {
	if r.total.Add(int64(n)) > MaxOutputTotal {
		r.flood.Do(func() { close(r.flooded) })
	}
}

// start starts cmd, leader of a new process group. The output goes
// through pipes of our own (not exec's copying goroutines), so that Wait
// returns when bash exits even if a leftover child holds them.
func start(cmd *exec.Cmd) (*running, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	r := &running{cmd: cmd, outR: outR, errR: errR, flooded: make(chan struct{})}
	r.stdout.r, r.stderr.r = r, r
	r.readers.Go(func() { io.Copy(&r.stdout, outR) })
	r.readers.Go(func() { io.Copy(&r.stderr, errR) })
	return r, nil
}

// wait waits for bash to exit, the timeout, or ctx; then kills what is left of
// the process group and collects the output.
func (r *running) wait(ctx context.Context, timeout time.Duration) stop {
	exited := make(chan struct{})
	go func() {
		r.cmd.Wait()
		close(exited)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	why := stopExit
	select {
	case <-exited:
	case <-timer.C:
		why = stopTimeout
	case <-ctx.Done():
		why = stopCancel
	case <-r.flooded:
		why = stopOutput
	}
	// On exit too: what bash left behind in its group must not outlive the call.
	r.killGroup()
	<-exited

	drained := make(chan struct{})
	go func() {
		r.readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		r.log.Warn("Bash output still open after the command was killed; a process left its group", "pid", r.cmd.Process.Pid)
		r.outR.SetReadDeadline(time.Now())
		r.errR.SetReadDeadline(time.Now())
		<-drained
	}
	r.outR.Close()
	r.errR.Close()
	return why
}

func (r *running) killGroup() {
	err := syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		r.log.Error("Bash could not kill the process group", "pgid", r.cmd.Process.Pid, "cause", err)
	}
}

// capped keeps the first MaxOutput bytes written to it and counts the rest.
type capped struct {
	buf   []byte
	total int
	r     *running
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += len(p)
	if c.r != nil {
		c.r.wrote(len(p))
	}
	if room := MaxOutput - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// writeStream adds a stream's output to b under its label, saying when it was cut.
func writeStream(b *strings.Builder, label string, c *capped) {
	if c.total == 0 {
		return
	}
	if label != "" {
		b.WriteString(label + ":\n")
	}
	out := c.buf
	if c.total > len(c.buf) {
		// Do not end on half a character.
		if i := lastRuneStart(out); len(out) > 0 && !utf8.FullRune(out[i:]) {
			out = out[:i]
		}
	}
	b.Write(out)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		b.WriteByte('\n')
	}
	if c.total > len(c.buf) {
		name := label
		if name == "" {
			name = "stdout"
		}
		fmt.Fprintf(b, "[%s cut: showing the first %d of %d bytes]\n", name, len(out), c.total)
	}
}

// lastRuneStart is the index where the last character of p may begin.
func lastRuneStart(p []byte) int {
	i := max(len(p)-1, 0)
	for i > 0 && i > len(p)-utf8.UTFMax && !utf8.RuneStart(p[i]) {
		i--
	}
	return i
}

func dirName(dir string) string {
	if dir == "" {
		return "the gateway's directory"
	}
	return dir
}
