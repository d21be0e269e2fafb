// Package builtin holds the gateway's built-in tools: Read, Write, Edit, Bash,
// Grep, Glob and Echo. Their input schemas live in CUE (schema/builtins.cue);
// each tool binds its input into a Go struct whose json tags are the same wire
// names, and a test proves the two agree (rule S12).
package builtin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/tools"
)

// entry is one built-in: its tool and a fresh value of its input struct, which
// the S12 test compares with the CUE definition #<Name>Input.
type entry struct {
	tool  tools.Tool
	input func() any
}

var registry = map[string]entry{
	"Read":  {Read{}, func() any { return &ReadInput{} }},
	"Write": {Write{}, func() any { return &WriteInput{} }},
	"Edit":  {Edit{}, func() any { return &EditInput{} }},
	"Bash":  {Bash{}, func() any { return &BashInput{} }},
	"Grep":  {Grep{}, func() any { return &GrepInput{} }},
	"Glob":  {Glob{}, func() any { return &GlobInput{} }},
	"Echo":  {Echo{}, func() any { return &EchoInput{} }},
}

// Lookup returns the built-in tool of that name.
func Lookup(name string) (tools.Tool, bool) {
	e, ok := registry[name]
	return e.tool, ok
}

// MaxLineChars is the length beyond which Read and Grep cut a line.
const MaxLineChars = 2000

// MaxOutput caps the bytes of output Bash returns per stream and Grep returns in all.
const MaxOutput = 30000

// bind fills dst from in; ok is false with the error result when the input
// breaks its schema (the same sentences as the gate, rule S10).
func bind(env *tools.Env, tool string, in tools.Input, dst any) (tools.Result, bool) {
	if vs := tools.Bind(in, dst); len(vs) > 0 {
		return refuse(env, tool, "%s", tools.Sentences(vs, false)), false
	}
	return tools.Result{}, true
}

// refuse is an error result for bad input from the model, logged at warn (rule C7).
func refuse(env *tools.Env, tool, format string, args ...any) tools.Result {
	r := tools.Errorf(format, args...)
	env.Logger().Warn("tool refused input", "tool", tool, "reason", r.Text)
	return r
}

// fail is an error result for an unexpected failure, logged at error with its cause (rule C7).
func fail(env *tools.Env, tool string, cause error, format string, args ...any) tools.Result {
	r := tools.Failure(cause, format, args...)
	env.Logger().Error("tool failed", "tool", tool, "reason", r.Text, "cause", cause)
	return r
}

// cancelled is the result of a call whose context ended before it finished.
func cancelled(env *tools.Env, tool string, ctx context.Context) tools.Result {
	env.Logger().Debug("tool cancelled", "tool", tool, "cause", context.Cause(ctx))
	return tools.Errorf("The %s call was cancelled before it finished.", tool)
}

// resolve makes a path parameter absolute and lexically clean, the same way
// the permission subject is computed (rule P4): relative to the working
// directory, symbolic links not resolved. The error is a sentence for the model.
func resolve(env *tools.Env, param, p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("Parameter '%s' must not be empty; give an absolute path.", param)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("Parameter '%s' contains a NUL byte, which no path can hold: %s.", param, quote(p))
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	wd := workdir(env)
	if wd == "" {
		return "", fmt.Errorf("Parameter '%s' is the relative path %s and there is no working directory to resolve it against; give an absolute path.", param, quote(p))
	}
	return filepath.Join(wd, p), nil
}

func workdir(env *tools.Env) string {
	if env == nil {
		return ""
	}
	return env.Workdir
}

// files is the session's set of read files; nil when the call has none.
func files(env *tools.Env) *tools.FileSet {
	if env == nil {
		return nil
	}
	return env.Files
}

// readState returns what the session's last read of path saw (rule C6).
func readState(env *tools.Env, path string) (tools.FileState, bool) {
	fs := files(env)
	if fs == nil {
		return tools.FileState{}, false
	}
	return fs.State(path)
}

// markRead records path as read in the session, as it is now (rule C6).
func markRead(env *tools.Env, path string, st tools.FileState) {
	if fs := files(env); fs != nil {
		fs.Record(path, st)
	}
}

// stale refuses a file that the session has not read, or that changed on
// disk since it was last read (rule C6); fi is the open file's own state.
func stale(env *tools.Env, tool, path string, fi tools.FileState) (tools.Result, bool) {
	st, ok := readState(env, path)
	switch {
	case !ok:
		return refuse(env, tool, "File %s has not been read in this session. Read it first, then %s it.", path, strings.ToLower(tool)), false
	case st != (tools.FileState{}) && (st.Size != fi.Size || !st.ModTime.Equal(fi.ModTime) || !st.ChangeTime.Equal(fi.ChangeTime) || st.Inode != fi.Inode):
		return refuse(env, tool, "File %s has changed since it was read; Read it again, then %s it.", path, strings.ToLower(tool)), false
	}
	return tools.Result{}, true
}

// guarded refuses a path the gateway reads or runs (rule R8).
func guarded(env *tools.Env, tool, path string) (tools.Result, bool) {
	if why := sandbox.Guarding(path).Refusal(); why != "" {
		return refuse(env, tool, "%s.", why), false
	}
	return tools.Result{}, true
}

// Bounds of one Glob or Grep (rule R8): the files and directories it may
// open, and how long it may take.
var (
	maxSearchSteps = 200000
	searchDeadline = 30 * time.Second
)

var (
	errSteps    = errors.New("the search's step budget is spent")
	errDeadline = errors.New("the search's deadline passed")
)

// bounded is ctx with the search deadline.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, searchDeadline, errDeadline)
}

// overBudget is the result of a search that stopped at its deadline, its
// step budget or its cancellation; stopped is false when it did not.
func overBudget(env *tools.Env, tool string, ctx context.Context, err error, narrower string) (tools.Result, bool) {
	switch {
	case errors.Is(err, errSteps):
		return refuse(env, tool, "%s stopped after opening %d files and directories without finishing; search with %s.", tool, maxSearchSteps, narrower), true
	case errors.Is(context.Cause(ctx), errDeadline):
		return refuse(env, tool, "%s stopped at its deadline of %s without finishing; search with %s.", tool, searchDeadline, narrower), true
	case ctx.Err() != nil:
		return cancelled(env, tool, ctx), true
	}
	return tools.Result{}, false
}

// quote renders a value from the model for a sentence, shortened when long.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// cutLine shortens a line to MaxLineChars characters, marking the cut with "...".
func cutLine(line string) string {
	if cut, ok := cutAt([]byte(line)); ok {
		return line[:cut] + "..."
	}
	return line
}

// errNotDir is the error of a path whose parent is a file.
var errNotDir = syscall.ENOTDIR

// plural renders "1 line", "3 lines".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
