package sandbox

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"aimon.dev/gw/internal/exec/sandbox/trace"
	"aimon.dev/gw/tools"
	"golang.org/x/sys/unix"
)

// traceArgs is how many arguments the tracer takes before the command's:
// the binary, trace.Arg, FD, JOIN, GROUP, PATH and "--".
const traceArgs = 7

// withTrace makes cmd start under the tracer (package trace), which asks
// j about each program the command starts (rule P16). decided are the
// execs after cmd's own that start the command: already decided. The
// tracer starts cmd in g, when not nil (tracedPids); Release closes what
// withTrace opened, Finish removes g. The tracer is the launcher's binary,
// on its descriptor launcherFD in cmd: the file chosen and checked once
// (program.go), not a path looked up again.
func withTrace(cmd *exec.Cmd, j *tools.ExecJudge, decided []string, launcher string, g *pidsGroup, launcherFD int) error {
	exe := cmd.ExtraFiles[launcherFD-3].Name()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "trace-control"), os.NewFile(uintptr(pair[1]), "trace-control")
	spec := trace.Spec{Decided: decided, Launcher: launcher, Programs: programs(j.Names), Entries: len(j.Names) > 0}
	if spec.Entries {
		spec.Loaders = loaders(spec.Programs)
		spec.Interpreters, spec.Families = interpreters(spec.Programs)
	}
	b, _ := json.Marshal(spec)
	if _, err := ours.Write(append(b, '\n')); err != nil {
		ours.Close()
		theirs.Close()
		return err
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
	// After the control socket: the tracer passes its child the
	// descriptors below that one only.
	join, group := "-", "-"
	if g != nil {
		join, group = strconv.Itoa(fd+1), groupTag+g.dir
		cmd.ExtraFiles = append(cmd.ExtraFiles, g.procs)
	}
	cmd.Args = slices.Concat([]string{exe, trace.Arg, strconv.Itoa(fd), join, group, cmd.Path, "--"}, cmd.Args)
	// The child's own descriptor, in place before its execve opens it.
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(launcherFD)
	// The tracer is the command's parent instead of the gateway, so bwrap's
	// --die-with-parent no longer ends it with the gateway: the tracer ends
	// with it (its death kills every traced process, PTRACE_O_EXITKILL).
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	go serveTrace(ours, j)
	return nil
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

// serveTrace answers the tracer's questions until the command ends.
func serveTrace(c *os.File, j *tools.ExecJudge) {
	defer c.Close()
	in := bufio.NewReader(c)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var r trace.Request
		why := "its request could not be read"
		if json.Unmarshal(line, &r) == nil {
			why = r.Refused
			if why == "" {
				why = judge(j, r.Words)
			}
		}
		if why != "" {
			if len(r.Argv) > 0 && len(r.Words) > 0 && r.Argv[0] != r.Words[0] && r.Argv[0] != r.Exe {
				// A link, a copy or a loader: say what it really was.
				why += fmt.Sprintf(" It was started as %s, the file %s.", r.Argv[0], r.Exe)
			}
			j.Note(why)
			// Recorded before the tracer is answered: the refusal is in
			// the decision log before the program is killed (rule R10).
			if j.Refused != nil {
				j.Refused(r.Words, r.Exe, r.Argv, why)
			}
		}
		if _, err := c.Write(append([]byte(singleLine(why)), '\n')); err != nil {
			return
		}
	}
}

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
