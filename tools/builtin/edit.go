package builtin

import (
	"context"
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
	env.Logger().Debug("Edit", "path", path, "replace_all", all)
	if ctx.Err() != nil {
		return cancelled(env, "Edit", ctx)
	}

	if r, ok := regularFile(env, "Edit", path, "Give the path of a file."); !ok {
		return r
	}
	if !wasRead(env, path) {
		return refuse(env, "Edit", "File %s has not been read in this session. Read it first, then edit it.", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return openFailure(env, "Edit", path, err)
	}
	text := string(data)
	n := strings.Count(text, p.OldString)
	switch {
	case n == 0:
		return refuse(env, "Edit", "old_string %s was not found in %s. Read the file again and copy the text exactly, including whitespace.", quote(p.OldString), path)
	case n > 1 && !all:
		return refuse(env, "Edit", "old_string %s occurs %d times in %s. Add surrounding lines to make it unique, or set replace_all to true.", quote(p.OldString), n, path)
	}
	if all {
		text = strings.ReplaceAll(text, p.OldString, p.NewString)
	} else {
		text = strings.Replace(text, p.OldString, p.NewString, 1)
	}
	// WriteFile keeps the mode of the existing file.
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return writeFailure(env, "Edit", path, err)
	}
	return tools.OK("Replaced " + plural(n, "occurrence") + " in " + path + ".")
}
