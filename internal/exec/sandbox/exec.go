package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"aimon.dev/gw/internal/exec/sandbox/trace"
	"aimon.dev/gw/tools"
	"golang.org/x/sys/unix"
)

// A traced sandbox is followed by a thread of the gateway's (package
// trace), which attaches to bwrap's PID 1 before it starts anything:
// bwrap says its PID 1 on its --info-fd once it has made it, and that
// waits on its --block-fd until the tracer has attached and writes there.
// No tracer process is started (issue 41: it was a Go program's start in
// every sandboxed command).
type traced struct {
	ready chan struct{} // closed once tr or err is set
	tr    *trace.Tracee
	err   error
	infoW *os.File // bwrap's end of its --info-fd, which cmd holds too
}

// tracing are the traced sandboxes by their commands, until Finish.
var tracing sync.Map // *exec.Cmd → *traced

// withTrace makes the sandbox of cmd, bwrap with the arguments a, traced
// from its PID 1, each program it starts asked of j (rule P16); decided
// are the execs that start the command, decided already: the launcher's
// and the command's own. It returns bwrap's arguments; the tracer
// attaches once cmd has started.
func withTrace(cmd *exec.Cmd, a []string, j *tools.ExecJudge, decided []string, launcher string) ([]string, error) {
	info, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	blockR, release, err := os.Pipe()
	if err != nil {
		info.Close()
		infoW.Close()
		return nil, err
	}
	n := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, infoW, blockR)
	i := slices.Index(a, "--")
	a = slices.Concat(a[:i], []string{"--info-fd", strconv.Itoa(n), "--block-fd", strconv.Itoa(n + 1)}, a[i:])
	spec := trace.Spec{Decided: decided, Launcher: launcher, Programs: programs(j.Names), Entries: len(j.Names) > 0}
	if spec.Entries {
		spec.Loaders = loaders(spec.Programs)
		spec.Interpreters, spec.Families = interpreters(spec.Programs)
	}
	t := &traced{ready: make(chan struct{}), infoW: infoW}
	tracing.Store(cmd, t)
	j.Await(func() { t.settle(false) })
	go t.follow(info, release, spec, j)
	return a, nil
}

// follow attaches the tracer to the PID 1 bwrap says on info, once cmd
// has started; release is its --block-fd. Where bwrap says none (it was
// not started, or failed), nothing of the sandbox runs, and release is
// not written; the launcher refuses to run where it is not traced
// (package launch), whatever wakes bwrap.
func (t *traced) follow(info, release *os.File, spec trace.Spec, j *tools.ExecJudge) {
	defer close(t.ready)
	defer release.Close()
	pid, err := childPid(info)
	info.Close()
	if err != nil {
		t.err = err
		return
	}
	// The sandbox's standard error, bwrap's, where a refusal is said as
	// the tracer process said it: a descriptor of PID 1's own (its
	// tracer may take one).
	var stderr *os.File
	if pfd, err := unix.PidfdOpen(pid, 0); err == nil {
		if fd, err := unix.PidfdGetfd(pfd, 2, 0); err == nil {
			stderr = os.NewFile(uintptr(fd), "sandbox-stderr")
		}
		unix.Close(pfd)
	}
	t.tr, t.err = trace.Follow(pid, spec, release, answerer(j), stderr)
}

// childPid is the PID of bwrap's PID 1, from the JSON object bwrap
// writes on its --info-fd ({"child-pid": N, ...}): read as one value, not
// to the end, since the caller may hold bwrap's end until it is done.
func childPid(info *os.File) (int, error) {
	var v struct {
		Pid int `json:"child-pid"`
	}
	err := json.NewDecoder(io.LimitReader(info, 64<<10)).Decode(&v)
	switch {
	case errors.Is(err, io.EOF):
		return 0, errors.New("bwrap did not start the sandbox")
	case err != nil:
		return 0, fmt.Errorf("bwrap's information on the sandbox does not read: %w", err)
	case v.Pid <= 0:
		return 0, errors.New("bwrap's information on the sandbox does not say its PID 1")
	}
	return v.Pid, nil
}

// settle waits until every program of the sandbox has been judged: the
// tracer attached, or could not, and nothing the command started is
// left; kill, once bwrap has exited, kills what is. Bounded: a command
// whose processes do not end within a few seconds of bwrap's is told.
func (t *traced) settle(kill bool) {
	// bwrap has exited, or was not started: where it said nothing, the
	// tracer's read of its --info-fd ends with the gateway's own end.
	t.infoW.Close()
	timer := time.NewTimer(settleWait)
	defer timer.Stop()
	select {
	case <-t.ready:
	case <-timer.C:
		slog.Warn("a sandbox's tracer did not attach in time; its bwrap may still be starting", "wait", settleWait)
		return
	}
	if t.tr != nil && !t.tr.Settle(kill, settleWait) {
		slog.Warn("a sandboxed command's processes did not end in time after its sandbox's bwrap", "wait", settleWait)
	}
}

// settleWait bounds each wait of settle.
const settleWait = 5 * time.Second

// finishTrace settles the tracing of cmd, once it has exited or was not
// started: what is left of the command is killed.
func finishTrace(cmd *exec.Cmd) {
	v, ok := tracing.LoadAndDelete(cmd)
	if !ok {
		return
	}
	v.(*traced).settle(true)
}

// answerer answers the tracer's questions by j: "" for a program that may
// run, else why not, told to j first and recorded (rule R10).
func answerer(j *tools.ExecJudge) func(trace.Request) string {
	return func(r trace.Request) string {
		why := r.Refused
		if why == "" {
			why = judge(j, r.Words)
		}
		if why == "" {
			return ""
		}
		if len(r.Argv) > 0 && len(r.Words) > 0 && r.Argv[0] != r.Words[0] && r.Argv[0] != r.Exe {
			// A link, a copy or a loader: say what it really was.
			why += fmt.Sprintf(" It was started as %s, the file %s.", r.Argv[0], r.Exe)
		}
		j.Note(why)
		// Recorded before the tracer is answered: the refusal is in the
		// decision log before the program is killed (rule R10).
		if j.Refused != nil {
			j.Refused(r.Words, r.Exe, r.Argv, why)
		}
		return singleLine(why)
	}
}

// programs are the files names resolve to on PATH, by what they are.
// Every sandboxed call of a tool names the same programs, mostly not
// installed: where each is found is kept while PATH and its directories
// are as they were (a directory's change time moves with every entry
// added, removed or renamed in it), and each file's digest while the
// file is as it was (device, inode, size, modification and change time:
// the change time moves with any write, and no caller can set it back).
func programs(names []string) []trace.Program {
	var out []trace.Program
	found := lookups()
	for _, n := range names {
		if p, ok := execProgram(n, found); ok {
			out = append(out, p)
		}
	}
	return out
}

// pathState is PATH and the state of each of its directories.
type pathState struct {
	path string
	dirs []unix.Stat_t
}

// same reports whether no directory of PATH changed its entries.
func (a pathState) same(b pathState) bool {
	if a.path != b.path || len(a.dirs) != len(b.dirs) {
		return false
	}
	for i, d := range a.dirs {
		e := b.dirs[i]
		if d.Dev != e.Dev || d.Ino != e.Ino || d.Mtim != e.Mtim || d.Ctim != e.Ctim {
			return false
		}
	}
	return true
}

// found is where names were found on PATH in one state of it.
type found struct {
	state pathState
	mu    sync.Mutex
	paths map[string]string // "" where not found
}

var lastFound atomic.Pointer[found]

// lookups is where names are found on PATH as it is now.
func lookups() *found {
	st := pathState{path: os.Getenv("PATH")}
	for _, dir := range filepath.SplitList(st.path) {
		var s unix.Stat_t
		unix.Stat(dir, &s) // a missing directory: zero, until it appears
		st.dirs = append(st.dirs, s)
	}
	if f := lastFound.Load(); f != nil && f.state.same(st) {
		return f
	}
	f := &found{state: st, paths: map[string]string{}}
	if settled(st.dirs...) {
		lastFound.Store(f)
	}
	return f
}

// settled reports whether each file last changed long enough ago that a
// change now moves its change time: the kernel's file times are coarse
// (a clock tick), so a change within the tick of the one seen could leave
// the times as they were.
func settled(sts ...unix.Stat_t) bool {
	recent := time.Now().Add(-settle).UnixNano()
	for _, st := range sts {
		if st.Ctim.Nano() > recent || st.Mtim.Nano() > recent {
			return false
		}
	}
	return true
}

// lookPath is exec.LookPath of name, kept for the state of PATH.
func (f *found) lookPath(name string) string {
	f.mu.Lock()
	p, ok := f.paths[name]
	f.mu.Unlock()
	if !ok {
		p, _ = exec.LookPath(name)
		f.mu.Lock()
		if len(f.paths) < maxDigests {
			f.paths[name] = p
		}
		f.mu.Unlock()
	}
	return p
}

// execProgram is the file name resolves to on PATH, by what it is.
func execProgram(name string, on *found) (trace.Program, bool) {
	p := on.lookPath(name)
	if p == "" {
		return trace.Program{}, false
	}
	return programAt(name, p)
}

// programAt is the file at p, named name, by what it is.
func programAt(name, p string) (trace.Program, bool) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return trace.Program{}, false
	}
	k := programKey{p, st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
	prog := trace.Program{Name: name, Path: p, Dev: st.Dev, Ino: st.Ino, Size: st.Size}
	if d, ok := digests.Load(k); ok {
		prog.SHA256 = d.(string)
		return prog, true
	}
	f, err := os.Open(p)
	if err != nil {
		return trace.Program{}, false
	}
	defer f.Close()
	var now unix.Stat_t
	if unix.Fstat(int(f.Fd()), &now) != nil {
		return trace.Program{}, false
	}
	if at := (programKey{p, now.Dev, now.Ino, now.Size, now.Mtim, now.Ctim}); at != k {
		// Replaced or written since: known by what is read now, not kept.
		k, prog.Dev, prog.Ino, prog.Size = programKey{}, now.Dev, now.Ino, now.Size
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return trace.Program{}, false
	}
	prog.SHA256 = hex.EncodeToString(h.Sum(nil))
	if k == (programKey{}) || !settled(now) {
		return prog, true
	}
	if digestCount.Add(1) > maxDigests { // programs upgraded again and again
		digests.Clear()
		digestCount.Store(0)
	}
	digests.Store(k, prog.SHA256)
	return prog, true
}

// programKey is a program file as it is now.
type programKey struct {
	path         string
	dev, ino     uint64
	size         int64
	mtime, ctime unix.Timespec
}

const maxDigests = 4096

// settle is how long ago a file must have changed for what is known of
// it to be kept (settled); tests shorten it.
var settle = time.Second

var (
	digests     sync.Map // programKey → hex SHA-256
	digestCount atomic.Int64
)

// judge is why words may not run: "" when they may.
func judge(j *tools.ExecJudge, words []string) string {
	why, ask := j.Decide(words)
	if why == "" || !ask {
		return why
	}
	for _, a := range j.Approved {
		if slices.Equal(a, words) || len(a) > 0 && len(words) > 0 && filepath.Base(a[0]) == words[0] && slices.Equal(a[1:], words[1:]) {
			return ""
		}
	}
	return why + " It was not approved as this call: ask for it as a call of its own."
}

func singleLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
