package sandbox

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"aimon.dev/gw/internal/exec/sandbox/trace"
	"golang.org/x/sys/unix"
)

// systemPrograms are programs whose loader is the system's, beside those
// the entries name (rule P16).
var systemPrograms = []string{"/bin/sh", "/usr/bin/env", "/bin/true", "/usr/bin/python3", "/usr/bin/perl"}

// loaders are the dynamic loaders of the system's programs and of the
// programs ps (the entries' files), each known by what it is: the file
// their PT_INTERP names, so that a copy or a link of it under any name is
// the loader (rule P16; issue 41's probe F3: a build-id cache's hard
// link, glibc before 2.34's ld-2.31.so).
func loaders(ps []trace.Program) []trace.Program {
	paths := append([]string(nil), systemPrograms...)
	for _, p := range ps {
		paths = append(paths, p.Path)
	}
	seen := map[[2]uint64]bool{}
	var out []trace.Program
	for _, p := range paths {
		in := interpOf(p)
		if in == "" {
			continue
		}
		prog, ok := programAt(filepath.Base(in), in)
		if !ok || seen[[2]uint64{prog.Dev, prog.Ino}] {
			continue
		}
		seen[[2]uint64{prog.Dev, prog.Ino}] = true
		g := glibcLoader(in, prog.SHA256)
		prog.Lists, prog.Tells = g.lists, g.tells
		out = append(out, prog)
	}
	return out
}

var (
	interps sync.Map // programKey → PT_INTERP ("" for none)
	glibcs  sync.Map // loader's SHA-256 → whether it is glibc's
)

// interpOf is the loader the ELF file p names (PT_INTERP); "" for none.
func interpOf(p string) string {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	k := programKey{p, st.Dev, st.Ino, st.Size, st.Mtim, st.Ctim}
	if in, ok := interps.Load(k); ok {
		return in.(string)
	}
	in := ""
	if f, err := elf.Open(p); err == nil {
		for _, ph := range f.Progs {
			if ph.Type == elf.PT_INTERP {
				b := make([]byte, min(ph.Filesz, 4096))
				if n, _ := ph.ReadAt(b, 0); n > 0 {
					in = strings.TrimRight(string(b[:n]), "\x00")
				}
			}
		}
		f.Close()
	}
	if settled(st) {
		if digestCount.Add(1) > maxDigests {
			interps.Clear()
			digestCount.Store(0)
		}
		interps.Store(k, in)
	}
	return in
}

// glibc is what a loader's modes that run no program are.
type glibc struct{ lists, tells bool }

// glibcLoader is which of glibc's modes the loader at p, of digest sum,
// has: lists when it reads LD_TRACE_LOADED_OBJECTS and --verify (musl's
// ignores the variable and runs the program), tells when it knows --argv0,
// --help and --version too (2.33 and later).
func glibcLoader(p, sum string) glibc {
	if g, ok := glibcs.Load(sum); ok {
		return g.(glibc)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return glibc{}
	}
	has := func(s ...string) bool {
		for _, w := range s {
			if !bytes.Contains(b, []byte(w)) {
				return false
			}
		}
		return true
	}
	g := glibc{lists: has("TRACE_LOADED_OBJECTS", "--verify", "--list")}
	g.tells = g.lists && has("--argv0", "--help", "--version")
	glibcs.Store(sum, g)
	return g
}

// shells run one another's scripts: a sh script is read by any of them.
var shells = []string{"sh", "bash", "dash", "rbash", "ksh", "mksh", "zsh", "busybox"}

// interpreterFamilies are the interpreters whose builds, under any of
// their versions' names, run a script given as their argument: the
// languages' (one build of a language runs another's script: pyenv's,
// conda's or nvm's beside the system's) and the shells.
var interpreterFamilies = append([]string{"python", "pypy", "perl", "ruby", "jruby", "truffleruby", "node", "nodejs", "bun", "deno",
	"php", "lua", "luajit", "tclsh", "wish", "Rscript", "ash", "yash", "fish", "tcsh", "csh", "pwsh", "awk", "gawk", "mawk", "nawk"}, shells...)

// interpreters are the programs that run the scripts among ps (a #! line
// names them): its interpreter, the program env is told to run, and the
// shells for a shell's script, by what each is; and the families of
// interpreters whose builds run them by name (interpreterFamilies and each
// #! line's, its version cut off), none when no program of ps is a script
// (rule P16; probe F4, re-probe P3).
func interpreters(ps []trace.Program) ([]trace.Program, []string) {
	var names, paths, fams []string
	for _, p := range ps {
		line := shebang(p.Path)
		if len(line) == 0 {
			continue
		}
		paths = append(paths, line[0])
		run := line[0]
		if filepath.Base(line[0]) == "env" {
			for _, w := range line[1:] {
				if !strings.HasPrefix(w, "-") {
					names, run = append(names, w), w
					break
				}
			}
		}
		if slices.Contains(shells, filepath.Base(run)) {
			names = append(names, shells...)
		}
		if f := strings.TrimRight(filepath.Base(run), "0123456789.-"); f != "" && !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	if len(paths) == 0 {
		return nil, nil
	}
	for _, f := range interpreterFamilies {
		if !slices.Contains(fams, f) {
			fams = append(fams, f)
		}
	}
	found := lookups()
	for _, n := range names {
		if p := found.lookPath(n); p != "" {
			paths = append(paths, p)
		}
	}
	seen := map[[2]uint64]bool{}
	var out []trace.Program
	for _, p := range paths {
		prog, ok := programAt(filepath.Base(p), p)
		if ok && !seen[[2]uint64{prog.Dev, prog.Ino}] {
			seen[[2]uint64{prog.Dev, prog.Ino}] = true
			out = append(out, prog)
		}
	}
	return out, fams
}

// shebang is the #! line of the file at p, as words; nil for none.
func shebang(p string) []string {
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.Read(b)
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return nil
	}
	// env -S splits its one argument into words, as the kernel does not.
	return strings.Fields(strings.ReplaceAll(string(rest), "-S", " "))
}
