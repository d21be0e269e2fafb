package builtin

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
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
	if r, ok := bind("Write", in, &p); !ok {
		return r
	}
	path, err := resolve(env, "file_path", p.FilePath)
	if err != nil {
		return refuse("Write", "%s", err)
	}
	slog.Debug("Write", "path", path, "bytes", len(p.Content))
	if ctx.Err() != nil {
		return cancelled("Write", ctx)
	}

	mode := fs.FileMode(0o644)
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return refuse("Write", "%s is a directory; give the path of a file.", path)
	case err == nil && !fi.Mode().IsRegular():
		return refuse("Write", "%s is not a regular file (its mode is %v); Write replaces regular files only.", path, fi.Mode().Type())
	case err == nil:
		if !wasRead(env, path) {
			return refuse("Write", "File %s already exists and has not been read in this session. Read it first, then write it.", path)
		}
		mode = fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return statFailure("Write", path, err)
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return statFailure("Write", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, []byte(p.Content), mode); err != nil {
		return writeFailure("Write", path, err)
	}
	// The session now knows the file's content, so it may edit it (rule C6).
	markRead(env, path)
	verb := "Updated"
	if fi == nil {
		verb = "Created"
	}
	return tools.OK(verb + " " + path + " (" + plural(len(p.Content), "byte") + ").")
}

func statFailure(tool, path string, err error) tools.Result {
	if errors.Is(err, fs.ErrPermission) {
		return refuse(tool, "Permission denied reaching %s.", path)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && errors.Is(pe.Err, errNotDir) {
		return refuse(tool, "A parent of %s is a file, not a directory.", path)
	}
	return fail(tool, err, "Could not reach %s: %v.", path, err)
}

func writeFailure(tool, path string, err error) tools.Result {
	if errors.Is(err, fs.ErrPermission) {
		return refuse(tool, "Permission denied writing %s.", path)
	}
	return fail(tool, err, "Could not write %s: %v.", path, err)
}
