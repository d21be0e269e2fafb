package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"os/exec"
	"testing"

	"aimon.dev/gw/internal/exec/sandbox/launch"
	"aimon.dev/gw/internal/exec/sandbox/trace"
	"aimon.dev/gw/internal/testkit/gobuild"
)

func TestMain(m *testing.M) { gobuild.Main(m) }

// TestP16SandboxProgramRefusesToRunAlone: started by hand, with no
// arguments or any but the tracer's and the launcher's, the sandbox
// program does nothing: it says on standard error, in one sentence, that
// aimon-gw starts it, writes nothing on standard output, and exits 2.
func TestP16SandboxProgramRefusesToRunAlone(t *testing.T) {
	bin := gobuild.Binary(t, gobuild.SandboxProgram)
	const want = "aimon-gw-sandbox is started by aimon-gw, which runs each sandboxed command through it; run aimon-gw instead.\n"
	for _, args := range [][]string{nil, {"--help"}, {"version"}, {"__aimon-gw-sandbox"}, {"-", "__aimon-gw-sandbox-launch"}, {"__aimon-gw-sandbox-sources", "x"}} {
		cmd := exec.Command(bin, args...)
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || out.Len() != 0 || errs.String() != want {
			t.Errorf("aimon-gw-sandbox %q: %v, stdout %q, stderr %q; want exit 2 and %q", args, err, out.String(), errs.String(), want)
		}
	}
}

// TestP16SandboxProgramSaysItsSources: asked for its sources alone, the
// sandbox program prints the digest of its packages' sources, the one the
// gateway of its build computes (package sandbox compares them), and
// nothing on standard error.
func TestP16SandboxProgramSaysItsSources(t *testing.T) {
	cmd := exec.Command(gobuild.Binary(t, gobuild.SandboxProgram), trace.SourcesArg)
	var errs bytes.Buffer
	cmd.Stderr = &errs
	out, err := cmd.Output()
	if want := trace.Digest(trace.Sources, launch.Sources) + "\n"; err != nil || string(out) != want || errs.Len() > 0 {
		t.Errorf("%v, stdout %q, stderr %q; want %q", err, out, errs.String(), want)
	}
}

// TestP16SandboxProgramLinksNoCLibrary: built as go install builds it
// (cgo as the environment has it), the sandbox program names no dynamic
// loader and no shared library: a program that loads the C library and
// starts its threads through it takes 1.4 ms more to start, and every
// sandboxed command starts it twice (issue 41). A package that needs cgo
// among its imports (libcap's psx, which go-landlock's syscall package
// imports) makes it one.
func TestP16SandboxProgramLinksNoCLibrary(t *testing.T) {
	f, err := elf.Open(gobuild.Binary(t, gobuild.SandboxProgram))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the sandbox program names a dynamic loader (PT_INTERP): one of its packages needs cgo")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the sandbox program needs the shared libraries %q (%v)", libs, err)
	}
}
