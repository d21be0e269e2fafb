package sandbox

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/exec/sandbox/launch"
	"aimon.dev/gw/internal/exec/sandbox/trace"
)

// ProgramName is the file name of the gateway's sandbox program
// (cmd/aimon-gw-sandbox): a binary of the launcher alone,
// which starts in a tenth of the time the gateway's own binary takes
// (the kernel maps and faults in 62 MB, Go runs some hundred package
// inits), and every sandbox starts it (issue 41).
const ProgramName = "aimon-gw-sandbox"

// Sibling is where the sandbox program of the gateway at exe is looked
// for: beside it, where go install ./cmd/... and the image put it. Not on
// PATH: a directory of PATH may be anyone's.
func Sibling(exe string) string { return filepath.Join(filepath.Dir(exe), ProgramName) }

// ProtectPrograms protects the gateway's own binary at exe and its
// sandbox program beside it (rule R8): no file tool writes either, every
// sandbox binds the one that exists read-only, and while the sandbox
// program is absent no sandbox may create it (args binds its directory
// read-only where the sandbox could write there): a program the agent
// put there would run as the next gateway's launcher, before every
// sandbox's restrictions.
func ProtectPrograms(exe string) {
	if exe == "" || !filepath.IsAbs(exe) {
		return
	}
	Protect("the gateway's own program", exe)
	sib := Sibling(exe)
	Protect("the gateway's sandbox program (aimon-gw-sandbox), which starts every sandboxed command", sib)
	protected.mu.Lock()
	defer protected.mu.Unlock()
	if !slices.Contains(protected.programs, sib) {
		protected.programs = append(protected.programs, sib)
	}
}

// absentPrograms are the directories of the protected sandbox programs
// that do not exist, resolved: each is bound read-only in a sandbox that
// could write there.
func absentPrograms() []string {
	protected.mu.RLock()
	defer protected.mu.RUnlock()
	var out []string
	for _, p := range protected.programs {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			if real := resolved(filepath.Dir(p)); real != "" {
				out = append(out, real)
			}
		}
	}
	return out
}

// A launcher is the binary every sandbox of this process starts as its
// first process (package launch).
type launcher struct {
	f    *os.File // held open; each sandbox gets a duplicate
	name string   // its base name, as /proc/PID/exe shows it
}

var launchers struct {
	mu sync.Mutex
	by map[string]*launcher // by the gateway's path (Launcher)
}

// launcherFile is a descriptor of the binary every sandbox starts, for
// cmd's ExtraFiles, and its base name: the trusted sandbox program beside
// the gateway's binary, else that binary itself. The binary is chosen and
// opened once per process (what is trusted is the file opened, not a
// path opened again later); bwrap executes it by the
// descriptor, /proc/self/fd/N.
func launcherFile() (*os.File, string, error) {
	exe, err := Launcher()
	if err != nil {
		return nil, "", fmt.Errorf("the gateway's own binary, which starts every sandbox, cannot be found: %w", err)
	}
	launchers.mu.Lock()
	l := launchers.by[exe]
	if l == nil {
		if l, err = chooseLauncher(exe); err != nil {
			launchers.mu.Unlock()
			return nil, "", err // tried again by the next sandbox
		}
		if launchers.by == nil {
			launchers.by = map[string]*launcher{}
		}
		launchers.by[exe] = l
	}
	launchers.mu.Unlock()
	fd, err := unix.FcntlInt(l.f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, "", fmt.Errorf("the binary that starts every sandbox, %s, cannot be handed to it: %w", l.f.Name(), err)
	}
	return os.NewFile(uintptr(fd), l.f.Name()), l.name, nil
}

// chooseLauncher opens the sandbox program beside exe when it can be
// trusted, else exe.
func chooseLauncher(exe string) (*launcher, error) {
	sib := Sibling(exe)
	f, why := openTrusted(sib)
	if f != nil {
		return &launcher{f: f, name: ProgramName}, nil
	}
	if why != "" {
		slog.Warn(fmt.Sprintf("the sandbox program %s is not used, since %s; each sandboxed command starts the gateway's own binary instead, which takes longer. Install it again beside aimon-gw (go install ./cmd/...), owned by root or uid %d and writable by its owner only, in a directory writable by its owner only, or remove it", sib, why, os.Geteuid()))
	}
	f, err := os.Open(exe)
	if err != nil {
		return nil, fmt.Errorf("the gateway's own binary, which starts every sandbox, cannot be opened: %w", err)
	}
	return &launcher{f: f, name: filepath.Base(exe)}, nil
}

// openTrusted opens the program at path when nobody but root and the
// gateway's own user could have put it there or changed it: a regular
// file this process may execute, owned by root or the gateway's user,
// writable by its owner only, in a directory of the same, whose every
// ancestor is too (or sticky, as /tmp: others may not rename or remove
// what they do not own there); and built from the same gateway as this
// binary. The gateway may run as root and the agent be hostile: a
// program another user could replace would run as the launcher, with
// the sandbox's capabilities and before its filter, Landlock and noexec
// mounts, as the gateway's user. nil and "" when there is none;
// nil and why it is not trusted otherwise. The checks are made on the
// descriptor, which is what runs, and on directories nobody else can
// change.
func openTrusted(path string) (*os.File, string) {
	// Not a link (its target's directories would be unchecked), and no
	// wait on a FIFO put there.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, ""
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, "it is a symbolic link"
	}
	if err != nil {
		return nil, fmt.Sprintf("it cannot be opened (%v)", err)
	}
	f := os.NewFile(uintptr(fd), path)
	why := untrusted(f, path)
	if why != "" {
		f.Close()
		return nil, why
	}
	return f, ""
}

// untrusted is why the opened program f at path may not run as the
// gateway's sandbox program; "" when it may.
func untrusted(f *os.File, path string) string {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Sprintf("it cannot be examined (%v)", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "it is not a regular file"
	}
	if why := owned("it", st); why != "" {
		return why
	}
	if unix.Faccessat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.X_OK, unix.AT_EACCESS) != nil {
		return "the gateway may not execute it"
	}
	for d, first := filepath.Dir(path), true; ; d, first = filepath.Dir(d), false {
		var ds unix.Stat_t
		if err := unix.Lstat(d, &ds); err != nil {
			return fmt.Sprintf("its directory %s cannot be examined (%v)", d, err)
		}
		if ds.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Sprintf("%s on its way is not a directory", d)
		}
		// A sticky directory's other users cannot move what lies on the
		// way (it is owned by root or the gateway's user); its own
		// directory must be written by its owner alone.
		if !first && ds.Mode&unix.S_ISVTX != 0 {
			ds.Mode &^= 0o022
		}
		if why := owned("its directory "+d, ds); why != "" {
			return why
		}
		if d == "/" || d == "." {
			break
		}
	}
	return sameBuild(f)
}

// owned is why a file (what) of st could be changed by someone other
// than root and the gateway's user; "" when it cannot.
func owned(what string, st unix.Stat_t) string {
	if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Sprintf("%s is owned by uid %d, neither root nor the gateway's user", what, uid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Sprintf("%s is writable by its group or by others (mode %04o)", what, st.Mode&0o7777)
	}
	return ""
}

// sameBuild is why the program f is not the sandbox program of the
// gateway this binary is, "" when it is: a program of another version may
// not speak this one's protocol, or hold each restriction it asks for.
func sameBuild(f *os.File) string {
	theirs, err := buildinfo.Read(f)
	if err != nil {
		return fmt.Sprintf("it is not a Go program of the gateway's (%v)", err)
	}
	ours, ok := debug.ReadBuildInfo()
	if !ok {
		return "this gateway knows nothing of its build to compare it with"
	}
	if why := otherBuild(ours, theirs); why != "" {
		return why
	}
	return otherSources(f)
}

// otherSources is why the program f was not built from the sources of
// packages trace and launch that this binary was built from; "" when it
// was. Each build embeds them (trace.Sources): f, started once by its
// descriptor with trace.SourcesArg, says their digest. The build's
// records (otherBuild) cannot tell an older program from this one where
// neither records a revision (-buildvcs=false, as the image builds them)
// and the modules are the same.
func otherSources(f *os.File) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/3", trace.SourcesArg)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = []string{}
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("it does not say what it was built from (%v: %s), as the sandbox program of this gateway's build does", err, bytes.TrimSpace(errs.Bytes()))
	}
	if got, want := string(bytes.TrimSpace(out.Bytes())), trace.Digest(trace.Sources, launch.Sources); got != want {
		return fmt.Sprintf("it was built from other sources than this gateway (the digest of its packages trace and launch is %.12s, this gateway's %.12s)", got, want)
	}
	return ""
}

// otherBuild is why theirs is not the sandbox program of the build ours;
// "" when it is. Each field is compared that both builds record: the
// program's package, Go's version, the main module's path, version and
// sum, the revision and whether it was modified, and every module both
// hold. Builds that record no revision, or of one modified revision, are
// told apart by their sources (otherSources).
func otherBuild(ours, theirs *debug.BuildInfo) string {
	if want := ours.Main.Path + "/cmd/" + ProgramName; theirs.Path != want {
		return fmt.Sprintf("it is not the gateway's sandbox program (its package is %q, not %s)", theirs.Path, want)
	}
	differ := func(what, a, b string) string {
		return fmt.Sprintf("it was built from another gateway (%s %q, this one's %q)", what, b, a)
	}
	switch {
	case ours.GoVersion != theirs.GoVersion:
		return differ("Go", ours.GoVersion, theirs.GoVersion)
	case ours.Main.Version != theirs.Main.Version:
		return differ("version", ours.Main.Version, theirs.Main.Version)
	case ours.Main.Sum != theirs.Main.Sum:
		return differ("module sum", ours.Main.Sum, theirs.Main.Sum)
	}
	set := func(bi *debug.BuildInfo) map[string]string {
		m := map[string]string{}
		for _, s := range bi.Settings {
			m[s.Key] = s.Value
		}
		return m
	}
	mine, ts := set(ours), set(theirs)
	for _, k := range []string{"vcs.revision", "vcs.modified", "GOOS", "GOARCH"} {
		a, okA := mine[k]
		b, okB := ts[k]
		if okA && okB && a != b {
			return differ(k, a, b)
		}
	}
	deps := map[string]*debug.Module{}
	for _, m := range ours.Deps {
		deps[m.Path] = m
	}
	for _, m := range theirs.Deps {
		o := deps[m.Path]
		if o == nil {
			continue // a test binary lists fewer
		}
		if o.Version != m.Version || o.Sum != m.Sum || (o.Replace == nil) != (m.Replace == nil) || o.Replace != nil && *o.Replace != *m.Replace {
			return differ(m.Path, o.Version, m.Version)
		}
	}
	return ""
}
