package cchook

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"aimon.dev/gw/internal/core/rule"
	"aimon.dev/gw/internal/runtime/provision"
)

// Claude Code runs a Bash command in a shell of its own and keeps the
// directory the shell ends in as its working directory for the next one.
// A command the hook wraps in aimon-gw exec changes no directory, so a
// leading "cd DIR" (alone, or "cd DIR && rest") is answered outside the
// wrapper: the shell moves to DIR, judged first, and only rest runs in
// the sandbox, decided with DIR as its working directory (issue 42).

// leadingCd splits a command that begins with cd and one directory: dir as
// written, and what follows "&&" ("" for a cd alone). ok is false for any
// other command, and for a cd whose directory is not one plain or single-
// quoted word (cd alone, cd -, an expansion): those are decided as written.
func leadingCd(cmd string) (dir, rest string, ok bool) {
	s := strings.TrimLeft(cmd, " \t")
	after, found := strings.CutPrefix(s, "cd")
	if !found || after == "" || (after[0] != ' ' && after[0] != '\t') {
		return "", "", false
	}
	s = strings.TrimLeft(after, " \t")
	switch {
	case strings.HasPrefix(s, "'"):
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "", false
		}
		dir, s = s[1:1+end], s[2+end:]
	default:
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		dir, s = s[:end], s[end:]
		if strings.ContainsAny(dir, "'\"\\$`;|&<>(){}[]*?!#\n\r\x00") {
			return "", "", false
		}
	}
	if dir == "" || dir == "-" || strings.HasPrefix(dir, "-") {
		return "", "", false
	}
	s = strings.TrimLeft(s, " \t")
	if s == "" {
		return dir, "", true
	}
	rest, found = strings.CutPrefix(s, "&&")
	if rest = strings.TrimSpace(rest); !found || rest == "" {
		return "", "", false
	}
	return dir, rest, true
}

// cdTarget is the directory a leading cd moves to and the lists' allow
// of reading it, or the sentence that refuses it: the directory, read as Claude Code's shell reads it ("~" the
// user's home, relative to the cwd) and where its links lead, must exist,
// lie in the project (whose "./" patterns a working directory elsewhere
// would move), be one the lists let Read, and be named by no deny entry
// of the shell tool.
func cdTarget(gen *provision.Generation, chain []string, in Input, home, shell, written string) (string, rule.Decision, string) {
	p := written
	switch {
	case p == "~":
		p = home
	case strings.HasPrefix(p, "~/"):
		p = filepath.Join(home, p[2:])
	case !filepath.IsAbs(p):
		p = filepath.Join(in.Cwd, p)
	}
	refuse := func(format string, args ...any) (string, rule.Decision, string) {
		return "", rule.Decision{}, fmt.Sprintf("%s cd %s is refused: ", shell, written) + fmt.Sprintf(format, args...)
	}
	dir, err := filepath.EvalSymlinks(filepath.Clean(p))
	if st, serr := os.Stat(dir); err != nil || serr != nil || !st.IsDir() {
		return refuse("%s is not a directory; cd into one that exists.", filepath.Clean(p))
	}
	project, err := filepath.EvalSymlinks(in.Project)
	if err != nil {
		project = in.Project
	}
	if dir != project && !strings.HasPrefix(dir, strings.TrimSuffix(project, "/")+"/") {
		return refuse("it leads to %s, outside the project %s, and Claude Code's working directory stays in the project (the policy's ./ patterns are read against it); name the paths in the command instead.", dir, project)
	}
	e, err := gen.Effective(chain)
	if err != nil {
		return refuse("%v", err)
	}
	if !e.Listed(shell) {
		return refuse("%s is not allowed on this surface.", shell)
	}
	read := e.Decide("Read", map[string]any{"file_path": dir}, in.Cwd)
	if !read.Allowed {
		return refuse("the lists do not let its directory %s be read: %s", dir, read.Reason)
	}
	if d := e.Decide(shell, map[string]any{"command": "cd " + dir}, in.Cwd); !d.Allowed && d.Rule == rule.P14 {
		return refuse("%s", d.Reason)
	}
	return dir, read, ""
}

// cdPrefix is the shell text that moves Claude Code's shell to dir and
// fails, back in cwd, when dir no longer leads where it was judged to (a
// link swapped in since): what follows it with && then runs in dir or not
// at all.
func cdPrefix(dir, cwd string) string {
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	return fmt.Sprintf(`{ cd -P -- %s && test "$(pwd -P)" = %s || { cd -P -- %s; false; }; }`, q(dir), q(dir), q(cwd))
}
