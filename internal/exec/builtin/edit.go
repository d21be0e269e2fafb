package builtin

import (
	"context"
	"io"
	"os"
	"strings"

	"aimon.dev/gw/tools"
)

// EditInput is the input of Edit; it mirrors #EditInput.
type EditInput struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll *bool  `json:"replace_all"`
}

// Edit replaces text in a file the session has read (rule C6). old_string
// must occur exactly once unless replace_all is set. Sequential.
type Edit struct{}

// Run edits the file.
func (Edit) Run(ctx context.Context, env *tools.Env, in tools.Input) tools.Result {
	var p EditInput
	if r, ok := bind(env, "Edit", in, &p); !ok {
		return r
	}
	all := p.ReplaceAll != nil && *p.ReplaceAll
	if r, ok := trailingSlash(env, "Edit", p.FilePath); !ok {
		return r
	}
	path, err := resolve(env, "file_path", p.FilePath)
	if err != nil {
		return refuse(env, "Edit", "%s", err)
	}
	switch {
	case p.OldString == "":
		return refuse(env, "Edit", "Parameter 'old_string' must not be empty; to write a whole file, use Write.")
	case p.OldString == p.NewString:
		return refuse(env, "Edit", "Parameters 'old_string' and 'new_string' are the same (%s), so the edit would change nothing.", quote(p.OldString))
	}
	if r, ok := guarded(env, "Edit", path); !ok {
		return r
	}
	env.Logger().Debug("Edit", "path", path, "replace_all", all)
	if ctx.Err() != nil {
		return cancelled(env, "Edit", ctx)
	}

	a, err := openAnchor(env)
	if err != nil {
		return openFailure(env, "Edit", path, err)
	}
	defer a.Close()
	f, fi, r, ok := a.openRegular("Edit", path, os.O_RDWR, "Give the path of a file.")
	if !ok {
		return r
	}
	defer f.Close()
	if r, ok := stale(env, "Edit", path, stateOf(fi)); !ok {
		return r
	}
	max := maxFileBytes(env)
	if fi.Size() > max {
		return refuse(env, "Edit", "File %s is %d bytes, more than the %d bytes Edit works on here (maxFileBytes); change it another way.", path, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return openFailure(env, "Edit", path, err)
	}
	if int64(len(data)) > max {
		return refuse(env, "Edit", "File %s grew past the %d bytes Edit works on here (maxFileBytes) while it was read; change it another way.", path, max)
	}
	text := string(data)
	n := strings.Count(text, p.OldString)
	switch {
	case n == 0:
		return refuse(env, "Edit", "old_string %s was not found in %s. Read the file again and copy the text exactly, including whitespace.", quote(p.OldString), path)
	case n > 1 && !all:
		return refuse(env, "Edit", "old_string %s occurs %d times in %s. Add surrounding lines to make it unique, or set replace_all to true.", quote(p.OldString), n, path)
	}
	times := int64(1)
	if all {
		times = int64(n)
	}
	// The result's size is known before it is made: refuse it before allocating.
	if size := int64(len(text)) + times*(int64(len(p.NewString))-int64(len(p.OldString))); size > max {
		return refuse(env, "Edit", "The edit would make %s %d bytes, more than the %d bytes a file may have here (maxFileBytes); make a smaller change.", path, size, max)
	}
	if all {
		text = strings.ReplaceAll(text, p.OldString, p.NewString)
	} else {
		text = strings.Replace(text, p.OldString, p.NewString, 1)
	}
	if err := f.Truncate(0); err != nil {
		return writeFailure(env, "Edit", path, err)
	}
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		return writeFailure(env, "Edit", path, err)
	}
	if fi, err := f.Stat(); err == nil {
		markRead(env, path, stateOf(fi))
	}
	return tools.OK("Replaced " + plural(n, "occurrence") + " in " + path + ".")
}
