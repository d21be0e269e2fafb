package builtin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"aimon.dev/gw/tools"
)

// WriteInput is the input of Write; it mirrors #WriteInput.
type WriteInput struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

// Write writes a whole file, creating parent directories. It refuses to
// overwrite a file the session has not read (rule C6). Sequential.
type Write struct{}

// Run writes the file.
func (Write) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p WriteInput
	if r, ok := bind(env, "Write", in, &p); !ok {
		return r
	}
	if r, ok := trailingSlash(env, "Write", p.FilePath); !ok {
		return r
	}
	path, err := resolve(env, "file_path", p.FilePath)
	if err != nil {
		return refuse(env, "Write", "%s", err)
	}
	if max := maxFileBytes(env); int64(len(p.Content)) > max {
		return refuse(env, "Write", "Parameter 'content' is %d bytes, more than the %d bytes a file may have here (maxFileBytes); write a smaller file.", len(p.Content), max)
	}
	if r, ok := guarded(env, "Write", path); !ok {
		return r
	}
	env.Logger().Debug("Write", "path", path, "bytes", len(p.Content))
	if ctx.Err() != nil {
		return cancelled(env, "Write", ctx)
	}
	a, err := openAnchor(env)
	if err != nil {
		return statFailure(env, "Write", path, err)
	}
	defer a.Close()

	// An existing file is opened first, without truncating it: it must be a
	// regular file the session has read as it is now (rule C6).
	created := false
	f, err := a.open(path, os.O_WRONLY, 0)
	switch {
	case err == nil:
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return statFailure(env, "Write", path, err)
		}
		if !fi.Mode().IsRegular() {
			f.Close()
			return refuse(env, "Write", "%s is not a regular file (it is a %s); Write replaces regular files only.", path, fileKind(fi.Mode()))
		}
		if _, read := readState(env, path); !read {
			f.Close()
			return refuse(env, "Write", "File %s already exists and has not been read in this session. Read it first, then write it.", path)
		}
		if r, ok := stale(env, "Write", path, stateOf(fi)); !ok {
			f.Close()
			return r
		}
		if err := f.Truncate(0); err != nil {
			f.Close()
			return writeFailure(env, "Write", path, err)
		}
	case errors.Is(err, errEscapes):
		return a.escaped("Write", path)
	case errors.Is(err, syscall.EISDIR):
		return refuse(env, "Write", "%s is a directory; give the path of a file.", path)
	case errors.Is(err, syscall.ENXIO):
		return refuse(env, "Write", "%s is not a regular file (it is a named pipe or a device); Write replaces regular files only.", path)
	case errors.Is(err, fs.ErrNotExist):
		f, err = create(a, path)
		if errors.Is(err, errEscapes) {
			return a.escaped("Write", path)
		}
		if err != nil {
			return statFailure(env, "Write", path, err)
		}
		created = true
	default:
		return statFailure(env, "Write", path, err)
	}
	defer f.Close()
	if _, err := f.Write([]byte(p.Content)); err != nil {
		return writeFailure(env, "Write", path, err)
	}
	// The session now knows the file's content, so it may edit it (rule C6).
	if fi, err := f.Stat(); err == nil {
		markRead(env, path, stateOf(fi))
	}
	verb := "Updated"
	if created {
		verb = "Created"
	}
	return tools.OK(verb + " " + path + " (" + plural(len(p.Content), "byte") + ").")
}

// create makes a new file at path under the anchor, with its parents; a
// dangling symbolic link in its place is an escape, never followed.
func create(a *anchor, path string) (*os.File, error) {
	rel, ok := a.rel(path)
	if !ok {
		return nil, errEscapes
	}
	if err := a.withheldAt(path, leadsTo(path)); err != nil {
		return nil, err // before any directory is made there
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := a.root.MkdirAll(dir, 0o755); err != nil {
			if isEscape(err) {
				return nil, errEscapes
			}
			return nil, err
		}
	}
	f, err := a.open(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if fi, lerr := a.root.Lstat(rel); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, errEscapes
		}
	}
	return f, err
}

func statFailure(env *tools.Env, tool, path string, err error) tools.Result {
	if r, ok := anchorFailure(env, tool, err); ok {
		return r
	}
	if errors.Is(err, fs.ErrPermission) {
		return refuse(env, tool, "Permission denied reaching %s.", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, errNotDir) {
		return refuse(env, tool, "A parent of %s is a file, not a directory.", path)
	}
	return fail(env, tool, err, "Could not reach %s: %v.", path, err)
}

func writeFailure(env *tools.Env, tool, path string, err error) tools.Result {
	if errors.Is(err, fs.ErrPermission) {
		return refuse(env, tool, "Permission denied writing %s.", path)
	}
	return fail(env, tool, err, "Could not write %s: %v.", path, err)
}
