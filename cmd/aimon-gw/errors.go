package main

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// A failure is a command's error: its sentence and its exit code. Commands
// return failures and print none; run prints each once, at the command's
// edge, after the name of the command that failed (aimon-gw vet: …), as
// CUE's cmd/cue prints what its commands return. The sentence need not end
// with a period: the edge ends it.
type failure struct {
	msg  string
	code int
}

func (f *failure) Error() string { return f.msg }

// ExitCode makes a failure a cli.ExitCoder, so that the command-line
// library hands it back as it is.
func (f *failure) ExitCode() int { return f.code }

// fail is the failure of the running command with code and the sentence
// format makes.
func fail(code int, format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...), code: code}
}

// quiet is a failure whose output said why already (a vet finding, a
// failing test): exit code, nothing more on standard error.
func quiet(code int) error { return &failure{code: code} }

// sentence is a failure as run prints it: the command's name, then its
// sentence ended once; a report of several lines (a policy's problems,
// each at its place) is printed as it is.
func sentence(command, msg string) string {
	if !strings.Contains(msg, "\n") {
		msg = strings.TrimRight(msg, ". ") + "."
	}
	return command + ": " + msg
}

// pathProblem is a file system error in words, without the name of the
// system call that met it ("open x: no such file"): "cannot read x: no
// such file", "cannot make the directory x: …", "cannot write x: …".
func pathProblem(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	what := "read"
	switch pe.Op {
	case "mkdir", "mkdirat":
		what = "make the directory"
	case "write", "create", "rename", "link", "symlink", "chmod", "truncate":
		what = "write"
	}
	return fmt.Sprintf("cannot %s %s: %v", what, pe.Path, pe.Err)
}
