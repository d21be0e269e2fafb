// Package trace is the tracer of a sandbox whose command's programs are
// judged where they start (rule P16): the gateway's binary started with
// Arg, outside bwrap, as the parent of the sandbox's launch (sh, bwrap).
// It starts that traced (PTRACE_TRACEME, then the options TRACEEXEC,
// TRACEFORK, TRACEVFORK, TRACECLONE and EXITKILL), so that every process
// and thread of the sandbox is traced from its first instruction, and at
// each exec stop it asks the gateway, over the socket on its descriptor,
// whether the program may run; one that may not is killed there.
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
//
// It runs from this package's init, before the packages the gateway's
// commands need: a tracer costs a process start. Go runs that init once
// the packages it imports are initialized, in import-path order among
// those ready, so it imports only early ones: with golang.org/x/sys/unix
// and path/filepath, some ninety more of the gateway's came first.
package trace

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Arg, as the first argument, makes the binary the tracer:
// Arg FD JOIN GROUP PATH -- ARGV..., FD being the socket to the gateway,
// JOIN a descriptor above it of the pids cgroup GROUP, or "-": PATH is
// born in the group, with no process started to join it (package
// sandbox, pids.go). JOIN is the group's directory in cgroup v2, which
// PATH is cloned into (CLONE_INTO_CGROUP), or its tasks file in v1, to
// which the thread that starts PATH writes 0 first, which moves that
// thread alone; the tracer's other threads stay out (Go starts a thread
// for a locked one from its template thread, not by cloning the locked
// one). If the join fails, nothing runs.
const Arg = "__aimon-gw-sandbox-trace"

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

func init() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	code, err := run(os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "aimon-gw: the programs of the command could not be watched, so it was not run: %v.\n", err)
		os.Exit(126)
	}
	os.Exit(code)
}

type tracer struct {
	spec    Spec
	ctl     *os.File
	in      *bufio.Reader
	decided int                // how many of Spec.Decided have run
	hashes  map[fileKey]string // sha256 of a file as it was
	carries map[fileKey]bool   // whether a program is an interpreter's build
	answers map[string]string  // the gateway's answer by words
	seen    map[int]bool
	refused bool // a program was refused: the call fails with 126
	// quiet is the launcher's process while it runs, its threads not
	// followed; launched says it has been.
	quiet    int
	launched bool
}

func run(args []string) (int, error) {
	if len(args) < 5 || args[4] != "--" {
		return 0, fmt.Errorf("the tracer takes FD JOIN GROUP PATH -- ARGV, not %q", args)
	}
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 {
		return 0, fmt.Errorf("the tracer's descriptor %q is not a number above 2", args[0])
	}
	syscall.CloseOnExec(fd)
	join := -1
	if args[1] != "-" {
		if join, err = strconv.Atoi(args[1]); err != nil || join <= fd {
			return 0, fmt.Errorf("the tracer's pids cgroup descriptor %q is not a number above %d", args[1], fd)
		}
		syscall.CloseOnExec(join)
	}
	t := &tracer{ctl: os.NewFile(uintptr(fd), "trace-control"), hashes: map[fileKey]string{}, carries: map[fileKey]bool{}, answers: map[string]string{}, seen: map[int]bool{}}
	t.in = bufio.NewReader(t.ctl)
	line, err := t.in.ReadBytes('\n')
	if err != nil {
		return 0, fmt.Errorf("no programs from the gateway: %w", err)
	}
	if err := json.Unmarshal(line, &t.spec); err != nil {
		return 0, fmt.Errorf("the gateway's programs do not read: %w", err)
	}
	// ptrace answers only the thread that is the tracer: the one that
	// started the child, which the child's pids cgroup is of. Go runs
	// init locked to the main thread already, but LockOSThread starts the
	// template thread now, before the join: the threads Go starts later
	// come from it, outside the group (see Arg), not cloned from this one.
	runtime.LockOSThread()
	group := strings.TrimPrefix(args[2], "aimon-gw-pids:")
	sys := &syscall.SysProcAttr{Ptrace: true}
	if join >= 0 {
		var st syscall.Stat_t
		err := syscall.Fstat(join, &st)
		if err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			sys.UseCgroupFD, sys.CgroupFD = true, join
		} else if err == nil {
			_, err = syscall.Write(join, []byte("0"))
			syscall.Close(join)
		}
		if err != nil {
			return 0, fmt.Errorf("the command's pids cgroup %s cannot be joined: %w", group, err)
		}
	}
	files := []uintptr{0, 1, 2}
	for i := 3; i < fd; i++ {
		files = append(files, uintptr(i))
	}
	pid, err := syscall.ForkExec(args[3], args[5:], &syscall.ProcAttr{Env: os.Environ(), Files: files, Sys: sys})
	if sys.UseCgroupFD {
		syscall.Close(join)
	}
	if err != nil {
		if sys.UseCgroupFD {
			return 0, fmt.Errorf("the command could not be started in its pids cgroup %s: %w", group, err)
		}
		return 0, err
	}
	return t.loop(pid)
}

// ptraceOExitKill is PTRACE_O_EXITKILL, which package syscall lacks. The
// tracer uses syscall, not golang.org/x/sys/unix, for the same reason as
// baseOf: Go initializes that only after most of the gateway's packages.
const ptraceOExitKill = 0x100000

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

// loop runs until the root process ends, and exits as it did.
func (t *tracer) loop(root int) (int, error) {
	t.seen[root] = true
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WALL, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("waiting for the command: %w", err)
		}
		switch {
		case ws.Exited() || ws.Signaled():
			delete(t.seen, pid)
			if pid != root {
				continue
			}
			if t.refused {
				return 126, nil
			}
			if ws.Signaled() {
				return 128 + int(ws.Signal()), nil
			}
			return ws.ExitStatus(), nil
		case !ws.Stopped():
			continue
		}
		sig := ws.StopSignal()
		switch {
		case !t.seen[pid]:
			// A new process or thread, attached by its parent's event:
			// its first stop is a SIGSTOP of the attach, not to deliver.
			t.seen[pid] = true
			if sig == syscall.SIGSTOP {
				sig = 0
			}
		case sig == syscall.SIGTRAP && ws.TrapCause() == syscall.PTRACE_EVENT_EXEC:
			if pid == t.quiet {
				// The launcher executed the command: follow it all again.
				t.quiet = 0
				if err := syscall.PtraceSetOptions(pid, opts); err != nil {
					syscall.Kill(pid, syscall.SIGKILL)
					return 0, fmt.Errorf("the command cannot be traced: %w", err)
				}
			}
			if why := t.judge(pid); why != "" {
				syscall.Kill(pid, syscall.SIGKILL)
				// On standard error, so that the call's result carries it.
				fmt.Fprintf(os.Stderr, "aimon-gw: %s\n", why)
				t.refused = true
				continue
			}
			sig = 0
		case sig == syscall.SIGTRAP && ws.TrapCause() > 0:
			sig = 0 // fork, vfork, clone: the child is traced
		case sig == syscall.SIGTRAP && pid == root && t.decided == 0:
			// The root's own exec, before the options: set them.
			if err := syscall.PtraceSetOptions(pid, opts); err != nil {
				syscall.Kill(pid, syscall.SIGKILL)
				return 0, fmt.Errorf("the command cannot be traced: %w", err)
			}
			sig = 0
		case sig == syscall.SIGSYS:
			if why := t.trapped(pid); why != "" {
				syscall.Kill(pid, syscall.SIGKILL)
				fmt.Fprintf(os.Stderr, "aimon-gw: %s\n", why)
				t.refused = true
				continue
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
	}
}

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
	name := t.identify(file, t.spec.Programs).Name
	for _, n := range slices.Compact([]string{name, base}) {
		if n == "" {
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
	b, _ := json.Marshal(r)
	a := "the gateway cannot be asked whether it may run"
	if _, err := t.ctl.Write(append(b, '\n')); err == nil {
		if line, err := t.in.ReadString('\n'); err == nil {
			a = strings.TrimSuffix(line, "\n")
		}
	}
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
