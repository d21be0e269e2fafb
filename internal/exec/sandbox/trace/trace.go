// Package trace follows a sandbox's programs where they start (rule P16):
// a thread of the gateway's own (the hub), locked to its goroutine,
// attaches to bwrap's PID 1 in the sandbox (PTRACE_SEIZE, with the
// options TRACEEXEC, TRACEFORK, TRACEVFORK, TRACECLONE and EXITKILL)
// while bwrap waits on its --block-fd, before it forks the sandbox's
// first process, so that every process and thread of the sandbox is
// traced from its first instruction; at each exec stop it asks the
// gateway's judge whether the program may run, and kills one that may
// not there. No process is started for it: a tracer of its own was a
// second Go program's start in every sandboxed command (issue 41).
//
// Why the exec stop: PTRACE_EVENT_EXEC is reported after the kernel has
// put the new image in place (begin_new_exec: de_thread has killed every
// other thread of the process, exec_mmap has given it a new mm) and
// before it returns to user space. The process is stopped, alone in its
// thread group, with an address space no one else shares (a vfork parent
// waits, and a CLONE_VM sibling lost it at the exec): /proc/PID/exe and
// /proc/PID/cmdline read then are what will run, and nothing can change
// them until the tracer lets it go. The tracer is outside the sandbox's
// seccomp filter (which refuses ptrace to everything in it), in the
// gateway's user namespace, so it reads the /proc files even of a program
// that cannot be read (mode 0111), which a tracer inside could not.
package trace

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sources are this package's source files, embedded by the build: the
// gateway knows its sandbox program for one of its own build by the
// digest of these and package launch's (Digest), which the program says
// when started with SourcesArg alone. Nothing else need tell two builds
// apart: one with -buildvcs=false (the image's) records no revision.
//
//go:embed *.go
var Sources embed.FS

// SourcesArg, as the only argument, makes the sandbox program print
// Digest of its sources and exit (cmd/aimon-gw-sandbox).
const SourcesArg = "__aimon-gw-sandbox-sources"

// Digest is the hex SHA-256 of the files of fss, each by its name, its
// length and its content, in order.
func Digest(fss ...embed.FS) string {
	h := sha256.New()
	for _, f := range fss {
		entries, _ := f.ReadDir(".")
		for _, e := range entries { // sorted by name
			b, err := f.ReadFile(e.Name())
			if err != nil {
				continue // a directory
			}
			fmt.Fprintf(h, "%s\x00%d\x00", e.Name(), len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Spec is what the gateway sends first: the programs to know by their
// file, and the decided programs that start the sandbox.
type Spec struct {
	Programs []Program `json:"programs"`
	// Decided are the base names of the execs that start the command
	// (bwrap, the launcher, prlimit, bash), in order: decided already.
	Decided []string `json:"decided"`
	// Launcher is the base name, in Decided, of the sandbox's launcher
	// (package launch), whose own threads are not followed (quiet).
	Launcher string `json:"launcher,omitempty"`
	// Entries says the call has deny or ask entries on programs.
	Entries bool `json:"entries,omitempty"`
	// Loaders are the system's dynamic loaders, by their files: run as
	// a program, one runs whatever file it is given.
	Loaders []Program `json:"loaders,omitempty"`
	// Interpreters are the programs that run the entries' programs that
	// are scripts (their #! lines'), by their files.
	Interpreters []Program `json:"interpreters,omitempty"`
	// Families are the names of the interpreters whose builds may run
	// the entries' scripts (python, node, the shells...), each matched
	// with its version after it; none when no entry's program is a script.
	Families []string `json:"families,omitempty"`
}

// Program is a file a deny or ask entry's command name resolves to.
type Program struct {
	Name   string `json:"name"`
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Path is where the gateway found it (its own view; not sent).
	Path string `json:"-"`
	// Lists says a loader is glibc's, whose --list and --verify (first)
	// and LD_TRACE_LOADED_OBJECTS load a program without running it.
	Lists bool `json:"lists,omitempty"`
	// Tells says a glibc loader is 2.33's or later, whose --help and
	// --version (first) print and exit; an earlier one takes them as the
	// name of the file to run.
	Tells bool `json:"tells,omitempty"`
}

// Request asks whether Words may run; the answer is a line: empty to run,
// else the sentence of its refusal.
type Request struct {
	Words []string `json:"words"`
	Exe   string   `json:"exe"`
	// Argv is the argument vector as the program was started (Words has
	// the name it is judged as in its place).
	Argv []string `json:"argv,omitempty"`
	// Refused is why the tracer refused the program itself, to record.
	Refused string `json:"refused,omitempty"`
}

type tracer struct {
	spec    Spec
	answer  func(Request) string // the gateway's judge
	out     *os.File             // the sandbox's standard error, for refusals; nil for none
	decided int                  // how many of Spec.Decided have run
	hashes  map[fileKey]string   // sha256 of a file as it was
	carries map[fileKey]bool     // whether a program is an interpreter's build
	answers map[string]string    // the gateway's answer by words
	seen    map[int]bool
	// quiet is the launcher's process while it runs, its threads not
	// followed; launched says it has been.
	quiet    int
	launched bool
	// live are the processes traced, but for the root, for Settle;
	// settled is closed once none is.
	mu      sync.Mutex
	live    map[int]bool
	settled chan struct{}
	over    bool
	root    int // bwrap's PID 1
}

// A Tracee is the tracing of one sandbox, by Follow.
type Tracee struct{ t *tracer }

// Every sandbox of the process is traced by one thread, the hub's, which
// its goroutine locks as the package is initialized and never unlocks:
// ptrace answers only the thread that attached, and that thread runs no
// other goroutine, so it forks nothing. Its wait for any of its tracees
// (wait4 of -1 with __WNOTHREAD) then reaps no child of the gateway's
// (a thread's children are its own: a bwrap that another thread started
// and waits for), and no thread of the gateway's exits with a tracer's
// end (a child started by a thread that exits gets its --die-with-parent
// signal). The thread lives as long as the process: at the gateway's
// end, PTRACE_O_EXITKILL kills every process it still traces.
//
// While it traces, the hub blocks in that wait, as a tracer process of
// its own would (each stop a wake of one thread): a sandbox to attach to
// is queued, and the hub woken by a SIGCONT sent to the PID 1 of a
// sandbox it traces (by a pidfd, so never to another process), whose
// signal-delivery stop the hub swallows; bwrap's PID 1 is not stopped,
// and a SIGCONT does nothing else to a running process.
var hub = struct {
	mu      sync.Mutex
	queue   []*attach
	waiting bool        // the hub may be in its wait: ring to wake it
	rings   map[int]int // pidfds of the PID 1s it traces, by PID
	wake    chan struct{}
	started bool
}{rings: map[int]int{}, wake: make(chan struct{}, 1)}

// attach asks the hub to trace t's sandbox, whose PID 1 is pid.
type attach struct {
	pid     int
	t       *tracer
	release *os.File
	done    chan error
}

func init() {
	// Not in the sandbox's launcher, nor when asked for the sources: a
	// thread more there is a slower start, and no sandbox to trace.
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "__aimon-gw-sandbox") {
		return
	}
	hub.started = true
	go serve()
}

// Follow traces the sandbox whose PID 1 bwrap is pid, which waits on its
// --block-fd for release, asking answer about each program it starts;
// stderr, when not nil, is where a refusal is said. It attaches before it
// returns, then writes release a byte; the hub follows the sandbox until
// every process of it is gone. Where it cannot attach it kills pid, so
// that nothing of the sandbox runs untraced, and says why.
func Follow(pid int, spec Spec, release *os.File, answer func(Request) string, stderr *os.File) (*Tracee, error) {
	t := &tracer{spec: spec, answer: answer, out: stderr, hashes: map[fileKey]string{}, carries: map[fileKey]bool{},
		answers: map[string]string{}, seen: map[int]bool{}, live: map[int]bool{}, settled: make(chan struct{}), root: pid}
	if !hub.started {
		syscall.Kill(pid, syscall.SIGKILL)
		t.settle()
		return nil, errors.New("this program does not trace sandboxes")
	}
	r := &attach{pid: pid, t: t, release: release, done: make(chan error, 1)}
	hub.mu.Lock()
	hub.queue = append(hub.queue, r)
	if hub.waiting {
		// Where none rings, each PID 1 is ending, whose end wakes it.
		for _, fd := range hub.rings {
			if unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0) == nil {
				break
			}
		}
	}
	hub.mu.Unlock()
	select {
	case hub.wake <- struct{}{}:
	default:
	}
	if err := <-r.done; err != nil {
		t.settle()
		return nil, err
	}
	return &Tracee{t: t}, nil
}

// serve is the hub: it attaches to each sandbox queued, and handles every
// stop of every process it traces.
func serve() {
	runtime.LockOSThread()
	h := &hubState{of: map[int]*tracer{}, pending: map[int]syscall.WaitStatus{}}
	for {
		hub.mu.Lock()
		queue := hub.queue
		hub.queue = nil
		// Set before the queue is seen empty: a sandbox queued after this
		// rings.
		hub.waiting = len(queue) == 0 && len(h.of) > 0
		hub.mu.Unlock()
		for _, r := range queue {
			r.done <- h.attach(r)
		}
		if len(queue) > 0 {
			continue
		}
		if len(h.of) == 0 {
			<-hub.wake
			continue
		}
		var ws syscall.WaitStatus
		// Only this thread's tracees: it has no children.
		pid, err := syscall.Wait4(-1, &ws, syscall.WALL|wNoThread, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Nothing traced is left (ECHILD): forget what was.
			for p, t := range h.of {
				if p == t.root {
					h.ended(t)
				}
			}
			h.of = map[int]*tracer{}
			continue
		}
		t := h.of[pid]
		if t == nil {
			// A child's first stop before its parent's event: held
			// until that event says whose it is.
			h.pending[pid] = ws
			continue
		}
		if pid == t.root && ws.Stopped() && ws.StopSignal() == syscall.SIGCONT {
			syscall.PtraceCont(pid, 0) // the hub's own wake
			continue
		}
		h.handle(t, pid, ws)
	}
}

// hubState is what the hub traces: each process by its sandbox's tracer,
// and the first stops of children whose parent's event has not been
// handled yet.
type hubState struct {
	of      map[int]*tracer
	pending map[int]syscall.WaitStatus
}

// attach seizes r's PID 1 with the options, then releases it.
func (h *hubState) attach(r *attach) error {
	_, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(r.pid), 0, opts, 0, 0)
	if e != 0 {
		syscall.Kill(r.pid, syscall.SIGKILL)
		return fmt.Errorf("the sandbox cannot be traced (PTRACE_SEIZE of bwrap's PID 1: %v)", e)
	}
	h.of[r.pid] = r.t
	r.t.seen[r.pid] = true
	if fd, err := unix.PidfdOpen(r.pid, 0); err == nil {
		hub.mu.Lock()
		hub.rings[r.pid] = fd
		hub.mu.Unlock()
	}
	if _, err := r.release.Write([]byte{1}); err != nil {
		syscall.Kill(r.pid, syscall.SIGKILL)
		return fmt.Errorf("the sandbox cannot be released: %w", err)
	}
	return nil
}

// ended forgets t's sandbox, whose PID 1 has ended: nothing of it is left.
func (h *hubState) ended(t *tracer) {
	for p, o := range h.of {
		if o == t {
			delete(h.of, p)
		}
	}
	hub.mu.Lock()
	if fd, ok := hub.rings[t.root]; ok {
		unix.Close(fd)
		delete(hub.rings, t.root)
	}
	hub.mu.Unlock()
	t.settle()
}

// handle is one stop or exit of pid, of t's sandbox.
func (h *hubState) handle(t *tracer, pid int, ws syscall.WaitStatus) {
	for _, child := range t.step(pid, ws) {
		h.of[child] = t
		if w, ok := h.pending[child]; ok {
			delete(h.pending, child)
			h.handle(t, child, w)
		}
	}
	if ws.Exited() || ws.Signaled() {
		delete(h.of, pid)
		if pid == t.root {
			h.ended(t) // its PID 1 ends last
		}
	}
}

// Settle waits, at most for wait, until nothing the command started is
// left but the sandbox's PID 1 (bwrap, which starts nothing more): the
// tracer has then judged every program the command started. kill, once
// bwrap has exited (its PID 1 follows it, --die-with-parent), kills what
// is left of the command first. It reports whether it ended in time.
func (tr *Tracee) Settle(kill bool, wait time.Duration) bool {
	if kill {
		tr.t.mu.Lock()
		for pid := range tr.t.live {
			// Listed until its exit is reported, so its PID is not reused.
			syscall.Kill(pid, syscall.SIGKILL)
		}
		tr.t.mu.Unlock()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-tr.t.settled:
		return true
	case <-timer.C:
		return false
	}
}

// ptraceSeize is PTRACE_SEIZE, which package syscall lacks; its data are
// the options, set without a stop.
const ptraceSeize = 0x4206

// ptraceOExitKill is PTRACE_O_EXITKILL, which package syscall lacks.
const ptraceOExitKill = 0x100000

// ptraceEventStop is PTRACE_EVENT_STOP: the first stop of a child
// attached by a seized parent's event, among others.
const ptraceEventStop = 0x80

const opts = syscall.PTRACE_O_TRACEEXEC | syscall.PTRACE_O_TRACEFORK | syscall.PTRACE_O_TRACEVFORK | syscall.PTRACE_O_TRACECLONE | ptraceOExitKill

// quietOpts are the options of the launcher's process from its exec to
// the command's: its own threads (the Go runtime's three or four) are not
// attached, each of which would stop twice as it is made and be reported
// as it ends at the command's exec, a sixth of a sandboxed true's start
// on a loaded machine (issue 41). Nothing of the command runs then: the
// launcher is the gateway's code, which executes only the command, from
// its main thread (traced: the process bwrap forked; a thread that
// executes becomes the process's first), and the command's exec, which
// leaves that thread alone in the process (de_thread), sets opts again
// before it runs an instruction. The launcher forks nothing.
const quietOpts = opts &^ syscall.PTRACE_O_TRACECLONE

// track records pid as traced, or as gone; settled is closed once only
// the root is left, or nothing.
func (t *tracer) track(pid, root int, alive bool) {
	if alive {
		t.seen[pid] = true
	} else {
		delete(t.seen, pid)
	}
	t.living(pid, root, alive)
}

// living records pid as live, or as gone, for Settle: a child is live
// from its parent's fork, vfork or clone event on, before the parent can
// end, so that nothing is settled while a child not yet stopped is left.
func (t *tracer) living(pid, root int, alive bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pid != root {
		if alive {
			t.live[pid] = true
		} else {
			delete(t.live, pid)
		}
	}
	if !alive && len(t.live) == 0 && !t.over {
		t.over = true
		close(t.settled)
		t.closeOut()
	}
}

// closeOut closes the sandbox's standard error once nothing is left to
// refuse: a pipe's reader waits for every writer's end.
func (t *tracer) closeOut() {
	if t.out != nil {
		t.out.Close()
		t.out = nil
	}
}

// settle marks the tracing over where it ended before it began.
func (t *tracer) settle() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.over {
		t.over = true
		close(t.settled)
	}
	t.closeOut()
}

// refuse kills pid, which may not run, and says why on standard error,
// so that the call's result carries it.
func (t *tracer) refuse(pid int, why string) {
	syscall.Kill(pid, syscall.SIGKILL)
	if t.out != nil {
		fmt.Fprintf(t.out, "aimon-gw: %s\n", why)
	}
}

// step handles one stop or exit of pid, and returns the children it
// made (a fork, vfork or clone event): they are traced already.
func (t *tracer) step(pid int, ws syscall.WaitStatus) (children []int) {
	root := t.root
	switch {
	case ws.Exited() || ws.Signaled():
		t.track(pid, root, false)
		return nil
	case !ws.Stopped():
		return nil
	}
	sig := ws.StopSignal()
	switch {
	case !t.seen[pid]:
		// A new process or thread, attached by its parent's event: its
		// first stop is the attach's (PTRACE_EVENT_STOP of a seized
		// parent's child), not a signal to deliver.
		t.track(pid, root, true)
		if sig == syscall.SIGSTOP || sig == syscall.SIGTRAP && ws.TrapCause() == ptraceEventStop {
			sig = 0
		}
	case sig == syscall.SIGTRAP && ws.TrapCause() == syscall.PTRACE_EVENT_EXEC:
		if pid == t.quiet {
			// The launcher executed the command: follow it all again.
			t.quiet = 0
			if err := syscall.PtraceSetOptions(pid, opts); err != nil {
				t.refuse(pid, fmt.Sprintf("the command cannot be traced (%v), so it was not run.", err))
				return nil
			}
		}
		// A thread other than the leader that executes takes the
		// leader's PID, and its own is reported no more.
		if old, err := syscall.PtraceGetEventMsg(pid); err == nil && int(old) != pid {
			t.track(int(old), root, false)
		}
		if why := t.judge(pid); why != "" {
			t.refuse(pid, why)
			return nil
		}
		sig = 0
	case sig == syscall.SIGTRAP && ws.TrapCause() > 0:
		// Fork, vfork, clone: the child is traced, live now; or an
		// event stop.
		if c := ws.TrapCause(); c == syscall.PTRACE_EVENT_FORK || c == syscall.PTRACE_EVENT_VFORK || c == syscall.PTRACE_EVENT_CLONE {
			if child, err := syscall.PtraceGetEventMsg(pid); err == nil {
				children = append(children, int(child))
				if !t.seen[int(child)] {
					t.living(int(child), root, true)
				}
			}
		}
		sig = 0
	case sig == syscall.SIGSYS:
		if why := t.trapped(pid); why != "" {
			t.refuse(pid, why)
			return nil
		}
	case sig == syscall.SIGSTOP || sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU:
		// A group-stop has no siginfo: let the process go on, since a
		// traced group-stop would hold it until the tracer resumes it.
		var si [128]byte
		if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, syscall.PTRACE_GETSIGINFO, uintptr(pid), 0, uintptr(unsafe.Pointer(&si)), 0, 0); e == syscall.EINVAL {
			sig = 0
		}
	}
	syscall.PtraceCont(pid, int(sig))
	return children
}

// wNoThread is __WNOTHREAD, which package syscall lacks: wait for the
// calling thread's children and tracees only.
const wNoThread = 0x20000000

// UntracedTrap is the seccomp data (SECCOMP_RET_DATA) of the sandbox
// filter's trap on clone with CLONE_UNTRACED (package sandbox, filter.go).
const UntracedTrap = 0x5016

// trapped is why pid, stopped by a SIGSYS, is killed: the sandbox's
// filter refused its clone(CLONE_UNTRACED), a child the tracer would not
// be told of, whose programs no one would judge (rule P16); "" for any
// other SIGSYS, delivered as it is.
func (t *tracer) trapped(pid int) string {
	// siginfo_t: si_signo, si_errno, si_code (int32 each); a seccomp
	// trap's si_code is SYS_SECCOMP and its si_errno the filter's data.
	var si [128]byte
	if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, syscall.PTRACE_GETSIGINFO, uintptr(pid), 0, uintptr(unsafe.Pointer(&si)), 0, 0); e != 0 {
		return ""
	}
	errno, code := *(*int32)(unsafe.Pointer(&si[4])), *(*int32)(unsafe.Pointer(&si[8]))
	const sysSeccomp = 1
	if code != sysSeccomp || errno != UntracedTrap {
		return ""
	}
	words, _ := cmdline(pid)
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if len(words) == 0 {
		words = []string{baseOf(exe)}
	}
	return t.ask(Request{Words: words, Exe: exe, Argv: words, Refused: fmt.Sprintf(
		"The program %s was stopped: it made a process with clone's CLONE_UNTRACED flag, which the sandbox's tracer cannot follow, so the programs it ran could not be judged (rule P16); start processes without that flag (fork, posix_spawn, subprocess do).", words[0])})
}

// judge decides the program pid has just executed; "" lets it run.
func (t *tracer) judge(pid int) string {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	words, err := cmdline(pid)
	if err != nil || len(words) == 0 {
		return t.ask(Request{Words: []string{baseOf(exe)}, Exe: exe, Argv: words, Refused: "its arguments cannot be read"})
	}
	base := baseOf(exe)
	if strings.HasPrefix(exe, "/memfd:") {
		// Landlock does not govern a memfd's file (an internal mount): a
		// program made in memory is one a command wrote (rule P16).
		return t.ask(Request{Words: words, Exe: exe, Argv: words, Refused: fmt.Sprintf(
			"The program %s was not run: it was made in memory (a memfd), and a command may not run what it writes (rule P16); put the program where the tool's sandbox.exec lets commands run it.", words[0])})
	}
	if t.decided < len(t.spec.Decided) {
		if base == t.spec.Decided[t.decided] {
			t.decided++
			if base == t.spec.Launcher && !t.launched {
				t.launched = true
				if syscall.PtraceSetOptions(pid, quietOpts) == nil {
					t.quiet = pid
				}
			}
			return ""
		}
		t.decided = len(t.spec.Decided) // the start is over
	}
	file := fmt.Sprintf("/proc/%d/exe", pid)
	args := words[1:]
	if t.spec.Entries {
		if l, ok := t.loader(file, base); ok && !listing(l, pid, args) {
			return t.throughLoader(pid, exe, words)
		}
		if inProcess(exe) {
			return t.ask(Request{Words: words, Exe: exe, Argv: words, Refused: fmt.Sprintf(
				"The program %s was not run: %s runs the programs it is given inside its own process, without starting them, so what it runs could not be judged, and this call has deny or ask entries on programs (rule P16); run the program itself.", words[0], exe)})
		}
	}
	if t.interpreter(file, exe, words[0]) {
		if why := t.scripts(pid, exe, words); why != "" {
			return why
		}
	}
	// A program is judged as what its file is, under its file's name, and
	// under the name it was started with: a program that runs what that
	// name says (git as git-receive-pack runs git receive-pack) is that.
	name := t.identify(file, t.spec.Programs).Name
	names := []string{name, base, baseOf(words[0])}
	for i, n := range names {
		if n == "" || slices.Contains(names[:i], n) {
			continue
		}
		if why := t.ask(Request{Words: append([]string{n}, args...), Exe: exe, Argv: words}); why != "" {
			return why
		}
	}
	return ""
}

// interpreter reports whether the program pid executed, its own file
// (/proc/PID/exe) at exe and started as argv0, may run one of the
// entries' scripts: where any is one (Spec.Families), a program named as
// a build of an interpreter's family (python3.11 of pyenv or conda, node
// of nvm, whichever PATH finds first), or the file of a #! line's
// interpreter or a copy of it (Spec.Interpreters), or a build under
// another name, by its ELF symbols (carriesInterpreter). Another program
// given the script's file reads it (cat /usr/bin/npm), it does not run it.
func (t *tracer) interpreter(file, exe, argv0 string) bool {
	if len(t.spec.Families) == 0 {
		return false
	}
	if family(baseOf(exe), t.spec.Families) || family(baseOf(argv0), t.spec.Families) {
		return true
	}
	return len(t.spec.Interpreters) > 0 && t.identify(file, t.spec.Interpreters).Name != "" || t.carriesInterpreter(file)
}

// family reports whether name is one of fams or a build of one named by
// its version after it (python3, python3.11, perl5.36.0, node-20).
func family(name string, fams []string) bool {
	for _, f := range fams {
		if rest, ok := strings.CutPrefix(name, f); ok && (rest == "" || rest[0] == '.' || rest[0] == '-' || rest[0] >= '0' && rest[0] <= '9') {
			return true
		}
	}
	return false
}

// scripts judges the arguments of an interpreter: an argument that
// names, in the process's own view, a file that is an entry's program,
// by what it is, is that program with the arguments after it (sh n.sh's
// npm, node /usr/bin/npm). One the tracer cannot follow in that view is
// refused: it could be such a file (fail closed). The interpreter opens
// its script after this stop: a file swapped in at that path then is not
// what was judged (the README's caveat).
func (t *tracer) scripts(pid int, exe string, words []string) string {
	var v *view
	defer func() {
		if v != nil {
			v.close()
		}
	}()
	for i := 1; i < len(words); i++ {
		a := words[i]
		if a == "" || a[0] == '-' && a != "-" {
			continue
		}
		if v == nil {
			v = newView(pid)
		}
		p, err := t.identifyIn(v, a, t.spec.Programs)
		if err != nil {
			if len(a) > 200 {
				a = a[:200] + "..."
			}
			return t.ask(Request{Words: words, Exe: exe, Argv: words, Refused: fmt.Sprintf(
				"The program %s was not run: its argument %q could not be followed as the command sees it (%v), so whether it is a script that this call's deny or ask entries name could not be judged (rule P16); name the script by a plain path.", words[0], a, err)})
		}
		if p.Name != "" {
			if why := t.ask(Request{Words: append([]string{p.Name}, words[i+1:]...), Exe: exe, Argv: words}); why != "" {
				return why
			}
		}
	}
	return ""
}

// identifyIn is the one of ps that path names in the view v of a process
// (its root, its working directory, its links and its own /proc). An
// error is a path the tracer could not follow where the process may open
// it (not lookupFails): the caller refuses rather than judge it unknown.
func (t *tracer) identifyIn(v *view, path string, ps []Program) (Program, error) {
	if len(ps) == 0 {
		return Program{}, nil
	}
	fd, err := v.open(path)
	if err != nil {
		if lookupFails(err) {
			return Program{}, nil
		}
		return Program{}, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return Program{}, nil
	}
	return t.identifyStat(fmt.Sprintf("/proc/self/fd/%d", fd), st, ps), nil
}

// oPath is O_PATH of the common architectures (amd64, arm64, riscv64),
// which package syscall lacks.
const oPath = 0x200000

// ask asks the gateway about r, once for each word list.
func (t *tracer) ask(r Request) string {
	// A refusal of the tracer's own is kept apart from the gateway's
	// answer on the same words.
	key := r.Refused + "\x01" + strings.Join(r.Words, "\x00")
	if a, ok := t.answers[key]; ok {
		return a
	}
	a := t.answer(r)
	t.answers[key] = a
	return a
}

// identify is the one of ps that file is: the same file, or a copy of
// it (size, then SHA-256); zero otherwise.
func (t *tracer) identify(file string, ps []Program) Program {
	var st syscall.Stat_t
	if syscall.Stat(file, &st) != nil {
		return Program{}
	}
	return t.identifyStat(file, st, ps)
}

// identifyStat is identify of file, whose stat is st: a regular file
// (a FIFO or a device is no program, and its open could wait).
func (t *tracer) identifyStat(file string, st syscall.Stat_t, ps []Program) Program {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return Program{}
	}
	var sum string
	for _, p := range ps {
		if p.Dev == st.Dev && p.Ino == st.Ino {
			return p
		}
	}
	for _, p := range ps {
		if p.Size != st.Size {
			continue
		}
		if sum == "" {
			sum = t.hash(file, st)
		}
		// A file of its size the tracer cannot read (mode 0111 under a
		// gateway that is not root) could be it: judged as it (fail closed).
		if sum == p.SHA256 || sum == "-" {
			return p
		}
	}
	return Program{}
}

// loader is the system's loader file is, by what it is, or by its name.
func (t *tracer) loader(file, base string) (Program, bool) {
	if l := t.identify(file, t.spec.Loaders); l.Name != "" {
		return l, true
	}
	return Program{Name: base}, isLoader(base)
}

// listing reports whether the loader l, run with args, loads a program
// without running it: glibc's --list or --verify as its first argument,
// or LD_TRACE_LOADED_OBJECTS in its environment, read at the exec stop
// (the new image's, no other thread left to change it), as ldd runs it;
// --help and --version first where the loader knows them (ldd asks for
// its version). Nothing else: glibc before 2.33 takes --help or
// --version as the file to run, and musl's loader ignores the variable.
func listing(l Program, pid int, args []string) bool {
	if !l.Lists {
		return false
	}
	if len(args) > 0 && (args[0] == "--list" || args[0] == "--verify" || l.Tells && (args[0] == "--help" || args[0] == "--version")) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, v := range strings.Split(string(b), "\x00") {
		if strings.HasPrefix(v, "LD_TRACE_LOADED_OBJECTS=") {
			return true
		}
	}
	return false
}

// throughLoader refuses the loader run as a program while the call has
// entries on programs: what it loads is a path it opens after this stop,
// in the sandbox's view (/proc/self/fd/N, a link in its /tmp, a memfd),
// which no judgement here can hold it to. The program it names is first
// judged by its name, for the sentence of an entry that names it.
func (t *tracer) throughLoader(pid int, exe string, words []string) string {
	args := words[1:]
	prog := "no program"
	if i := loaded(args); i >= 0 {
		prog = args[i]
		names := []string{baseOf(args[i])}
		v := newView(pid)
		p, _ := t.identifyIn(v, args[i], t.spec.Programs)
		v.close()
		if p.Name != "" {
			names = append([]string{p.Name}, names...)
		}
		for _, n := range slices.Compact(names) {
			if why := t.ask(Request{Words: append([]string{n}, args[i+1:]...), Exe: exe, Argv: words}); why != "" {
				return why
			}
		}
	}
	return t.ask(Request{Words: words, Exe: exe, Argv: words, Refused: fmt.Sprintf(
		"The program %s was not run: it was started through the dynamic loader %s, which runs whatever file it opens after it is judged, and this call has deny or ask entries on programs (rule P16); run the program itself, not through the loader.", prog, exe)})
}

// fileKey is a file as it is: a write in place keeps its inode, not its
// change time, so a script read once and then rewritten is read again.
type fileKey struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

func (t *tracer) hash(file string, st syscall.Stat_t) string {
	k := fileKey{st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
	if h, ok := t.hashes[k]; ok {
		return h
	}
	h := "-"
	if f, err := os.Open(file); err == nil {
		s := sha256.New()
		if _, err := io.Copy(s, f); err == nil {
			h = hex.EncodeToString(s.Sum(nil))
		}
		f.Close()
	}
	t.hashes[k] = h
	return h
}

// cmdline is the argument vector of pid.
func cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	b = []byte(strings.TrimSuffix(string(b), "\x00"))
	if len(b) == 0 {
		return []string{""}, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// baseOf is the last element of the path p. Not path/filepath's: a
// package the tracer imports is initialized before it runs, and Go
// initializes path/filepath only after most of the gateway's packages
// (the tracer is a process start of every command).
func baseOf(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// inProcess reports whether exe (a program's own file, links followed)
// runs the programs it is given inside its own process, with a loader of
// its own and no execve the tracer would stop at: valgrind's launcher and
// tools, qemu's user-mode emulators, box64 and box86, FEX (re-probe N1).
// Known by name: a copy under another name would lie where commands may
// write, and Landlock keeps it from running there.
func inProcess(exe string) bool {
	base := baseOf(exe)
	switch {
	case base == "valgrind" || base == "valgrind.bin" || strings.Contains(exe, "/valgrind/") && strings.HasSuffix(base, "-linux"):
		return true
	case base == "box64" || base == "box86" || base == "FEXInterpreter" || base == "FEXLoader":
		return true
	case strings.HasPrefix(base, "qemu-"):
		return slices.Contains(qemuUser, strings.TrimSuffix(strings.TrimPrefix(base, "qemu-"), "-static"))
	}
	return false
}

// qemuUser are the targets of qemu's user-mode emulators (qemu-ARCH).
var qemuUser = []string{"aarch64", "aarch64_be", "alpha", "arm", "armeb", "cris", "hexagon", "hppa", "i386", "loongarch64", "m68k", "microblaze", "microblazeel", "mips", "mips64", "mips64el", "mipsel", "mipsn32", "mipsn32el", "or1k", "ppc", "ppc64", "ppc64le", "riscv32", "riscv64", "s390x", "sh4", "sh4eb", "sparc", "sparc32plus", "sparc64", "x86_64", "xtensa", "xtensaeb"}

func isLoader(base string) bool {
	return strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld64.so") || base == "ld.so" || strings.HasPrefix(base, "ld-musl")
}

// loaderValued are the loader's options that take a value.
var loaderValued = []string{"--library-path", "--preload", "--audit", "--argv0", "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask", "--inhibit-rpath"}

// loaded is the index in the loader's arguments of the program it loads;
// -1 when it loads none (--list, --help).
func loaded(args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			if i+1 < len(args) {
				return i + 1
			}
			return -1
		case slices.Contains(loaderValued, a):
			i++
		case strings.HasPrefix(a, "--"):
		default:
			return i
		}
	}
	return -1
}
