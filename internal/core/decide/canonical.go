package decide

import (
	"fmt"
	"maps"
	"path"
	"strings"
	"unicode/utf8"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/tools"
)

// PathForm is how a front end's client writes a path subject: what "~"
// stands for, and whether white space around the name is part of it.
type PathForm struct {
	// Home is what "~" and "~/…" stand for; "" refuses them, since neither
	// the line protocol nor MCP defines them.
	Home string
	// Trim drops the white space JavaScript's String.trim drops, as Claude
	// Code does before it opens a path.
	Trim bool
}

// Canonical returns the input a call is decided on and run with (rule R7):
// every null member gone (rule S4: null is missing), and the path subject
// absolute and cleaned, or the declared default in its place. why is the
// sentence of a subject that cannot be made canonical.
func Canonical(t *policy.Tool, in tools.Input, workdir string, form PathForm) (out tools.Input, why string) {
	out, copied := dropNulls(in)
	s := t.Subject
	if s == nil || s.Kind != "path" {
		return out, ""
	}
	raw, present := out[s.Field]
	if !present {
		if s.Default == "" {
			return out, ""
		}
		raw = s.Default
	}
	str, ok := raw.(string)
	if !ok {
		return out, "" // the gate's and the lattice's to refuse (S4, P5)
	}
	abs, why := canonicalPath(str, workdir, form)
	if why != "" {
		return nil, fmt.Sprintf("%s was not run: its %s parameter '%s' %s.", t.Name, s.Kind, s.Field, why)
	}
	if present && abs == str {
		return out, ""
	}
	if !copied {
		out = maps.Clone(in)
	}
	out[s.Field] = abs
	return out, ""
}

// canonicalPath is p as an absolute, cleaned path, relative paths resolved
// against workdir; a trailing slash stays, since it says "a directory".
func canonicalPath(p, workdir string, form PathForm) (string, string) {
	if form.Trim {
		p = strings.TrimFunc(p, jsSpace)
	}
	switch {
	case strings.TrimSpace(p) == "":
		return "", "is blank; give an absolute path or one relative to the working directory"
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Sprintf("%q contains a NUL byte, which no path can hold", p)
	case !utf8.ValidString(p):
		return "", fmt.Sprintf("%q is not valid UTF-8, so it cannot be decided as written; give the path in UTF-8", p)
	case p == "~" || strings.HasPrefix(p, "~/"):
		if form.Home == "" {
			return "", fmt.Sprintf("%q starts with ~, which this front end does not expand; give an absolute path or one relative to the working directory", p)
		}
		p = form.Home + p[1:]
	case strings.HasPrefix(p, "~"):
		return "", fmt.Sprintf("%q names another user's home directory, which is not expanded; give an absolute path", p)
	}
	if !strings.HasPrefix(p, "/") {
		if !strings.HasPrefix(workdir, "/") {
			return "", fmt.Sprintf("is the relative path %q and there is no working directory to resolve it against; give an absolute path", p)
		}
		p = workdir + "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c, ""
}

// jsSpace is what JavaScript's String.prototype.trim removes: white space
// and line terminators, the no-break space and the byte order mark among them.
func jsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// dropNulls returns in without its null members, at every depth: a copy,
// or in itself when it has none, so the common call allocates nothing.
func dropNulls(in tools.Input) (out tools.Input, copied bool) {
	if !hasNull(in) {
		return in, false
	}
	return stripNulls(in).(map[string]any), true
}

func hasNull(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			if x == nil || hasNull(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasNull(x) {
				return true
			}
		}
	}
	return false
}

// stripNulls copies v without null object members; a null array element is
// a value, not a missing parameter, and stays.
func stripNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x != nil {
				out[k] = stripNulls(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = stripNulls(x)
		}
		return out
	}
	return v
}

// Written is a call's path subject as the call wrote it, for the lattice
// to quote beside the canonical path it decides on; nil for a tool
// without one.
func Written(t *policy.Tool, raw tools.Input) any {
	if t.Subject == nil || t.Subject.Kind != "path" {
		return nil
	}
	return raw[t.Subject.Field]
}
