package builtin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

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
	path, err := resolve(env, "file_path", p.FilePath)
	if err != nil {
		return refuse(env, "Write", "%s", err)
	}
	env.Logger().Debug("Write", "path", path, "bytes", len(p.Content))
	if ctx.Err() != nil {
		return cancelled(env, "Write", ctx)
	}

	mode := fs.FileMode(0o644)
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return refuse(env, "Write", "%s is a directory; give the path of a file.", path)
	case err == nil && !fi.Mode().IsRegular():
		return refuse(env, "Write", "%s is not a regular file (its mode is %v); Write replaces regular files only.", path, fi.Mode().Type())
	case err == nil:
		if !wasRead(env, path) {
			return refuse(env, "Write", "File %s already exists and has not been read in this session. Read it first, then write it.", path)
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return statFailure(env, "Write", path, err)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return statFailure(env, "Write", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(p.Content), mode); err != nil {
		return writeFailure(env, "Write", path, err)
	}
	// The session now knows the file's content, so it may edit it (rule C6).
	markRead(env, path)
	verb := "Updated"
	if fi == nil {
		verb = "Created"
	}
	return tools.OK(verb + " " + path + " (" + plural(len(p.Content), "byte") + ").")
}

func statFailure(env *tools.Env, tool, path string, err error) tools.Result {
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
