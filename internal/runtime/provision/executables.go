package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"aimon.dev/gw/internal/core/policy"
	"aimon.dev/gw/internal/core/rule"
)

// preflight checks what can be checked of gen before anything of it starts
// (rules R3, R8), so that a generation that will be refused starts no
// process: every tool's kind is one this gateway runs, and every program
// it would start is found now, through PATH, and started by that absolute
// path, not found again later (what was checked is what runs). A program
// that lies where a surface may write (its Write and Edit entries, a
// sandbox's write, an unsandboxed Bash) could be replaced before its next
// start, so it is refused unless pinned by sha256, and a pinned one must
// match its pin now.
func (r Registry) preflight(gen *policy.Generation) policy.Errors {
	var errs policy.Errors
	writable := writableDirs(gen)
	seen := map[string]bool{}
	ts := slices.Collect(maps.Values(gen.Tools))
	ts = append(ts, slices.Collect(maps.Values(gen.Wildcards))...)
	slices.SortFunc(ts, func(a, b *policy.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range ts {
		if _, ok := r[t.Kind()]; !ok {
			errs = append(errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.C1,
				Message: fmt.Sprintf("tool %s is implemented by a %s, which this gateway cannot run here.", t.Name, t.Kind())})
			continue
		}
		var cmd *[]string
		var sum, field, cwd, scriptsField string
		var scripts map[string]string
		switch {
		case t.Plugin != nil:
			cmd, sum, field = &t.Plugin.Command, t.Plugin.SHA256, "plugin.sha256"
		case t.Upstream != nil && len(t.Upstream.Command) > 0:
			cmd, sum, field = &t.Upstream.Command, t.Upstream.SHA256, "servers."+t.Upstream.Server+".sha256"
			cwd, scripts, scriptsField = t.Upstream.Cwd, t.Upstream.Scripts, "servers."+t.Upstream.Server+".scripts"
		default:
			continue
		}
		if len(*cmd) == 0 || (*cmd)[0] == "" {
			continue // the bind says what is wrong
		}
		path, err := exec.LookPath((*cmd)[0])
		if err != nil {
			continue // the bind reports it: a plugin fails, a server is down
		}
		if path, err = filepath.Abs(path); err != nil {
			continue
		}
		*cmd = slices.Concat([]string{path}, (*cmd)[1:])
		key := path + "\x00" + t.ImplPos.String()
		if seen[key] {
			continue // one server's tools share its command
		}
		seen[key] = true
		problems := []error{checkProgram(path, sum, field, writable)}
		problems = append(problems, checkScripts((*cmd)[1:], cwd, scripts, scriptsField, writable)...)
		for _, err := range problems {
			if err != nil {
				errs = append(errs, policy.Diagnostic{Pos: t.ImplPos, Code: rule.R8, Message: fmt.Sprintf("tool %s: %s", t.Name, sentence(err))})
			}
		}
	}
	return errs
}

// checkProgram checks one program: it matches its pin, or, without one,
// lies nowhere writable (by its path and by where its links lead).
func checkProgram(path, sum, field string, writable []string) error {
	if sum != "" {
		return checkSum(path, sum, field)
	}
	if p, w, got := underWritable(path, writable); w != "" {
		return fmt.Errorf("its program %s lies under %s, which a surface of the policy may write (its Write and Edit entries, a sandbox's write, or an unsandboxed command), so a command could replace it before it next starts; pin it with %s: %q (its sha256 now), or install it where no surface writes", p, w, field, got)
	}
	return nil
}

// underWritable is the first of path and the path its links lead to that
// lies under a writable directory, the directory, and the file's sha256;
// w is "" when neither does.
func underWritable(path string, writable []string) (p, w, sum string) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	for _, w := range writable {
		for _, p := range []string{path, real} {
			if p == w || w == "/" || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/") {
				sum, _ := fileSum(real)
				return p, w, sum
			}
		}
	}
	return "", "", ""
}

// Scripts are the files that the arguments of a command name (scripts,
// ["node", "server.js"]), by absolute path, a relative one taken from dir
// (the process's working directory when ""), as the program will be
// started there: what the program runs besides itself (rule R8).
func Scripts(args []string, dir string) []string {
	var out []string
	for _, a := range args {
		if p := scriptPath(a, dir); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// scriptPath is the absolute path of the regular file arg names from dir;
// "" when it names none.
func scriptPath(arg, dir string) string {
	if arg == "" || strings.HasPrefix(arg, "-") {
		return ""
	}
	p := arg
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}

// checkScripts checks the files a command's arguments name as its program
// is checked: each matches its pin in field (servers.NAME.scripts, by the
// argument as written), or lies nowhere writable. A plugin's scripts
// (field "") cannot be pinned. A pin for an argument that names no file is
// an error: what it meant to hold is not there.
func checkScripts(args []string, dir string, pins map[string]string, field string, writable []string) []error {
	var errs []error
	for _, a := range args {
		p := scriptPath(a, dir)
		want, pinned := pins[a]
		switch {
		case p == "" && pinned:
			errs = append(errs, fmt.Errorf("%s pins the argument %q, which names no file from %s; fix the command, its cwd, or the pin", field, a, dirName(dir)))
		case p == "":
		case pinned:
			if err := checkFile("script", p, want, fmt.Sprintf("%s[%q]", field, a)); err != nil {
				errs = append(errs, err)
			}
		default:
			at, w, got := underWritable(p, writable)
			if w == "" {
				continue
			}
			fix := fmt.Sprintf("pin it with %s: {%q: %q} (its sha256 now), or install it where no surface writes", field, a, got)
			if field == "" {
				fix = "install it where no surface writes (a plugin's scripts cannot be pinned)"
			}
			errs = append(errs, fmt.Errorf("its script %s (the argument %q) lies under %s, which a surface of the policy may write (its Write and Edit entries, a sandbox's write, or an unsandboxed command), so a command could change what the program runs before it next starts; %s", at, a, w, fix))
		}
	}
	for _, a := range slices.Sorted(maps.Keys(pins)) {
		if !slices.Contains(args, a) {
			errs = append(errs, fmt.Errorf("%s pins %q, which is not an argument of the command; pin the arguments as written", field, a))
		}
	}
	return errs
}

func dirName(dir string) string {
	if dir == "" {
		return "the gateway's working directory"
	}
	return dir
}

// checkSum checks the program at path against want, the hex sha256 in
// field.
func checkSum(path, want, field string) error { return checkFile("program", path, want, field) }

// checkFile checks the file at path, a program or a script, against want.
func checkFile(what, path, want, field string) error {
	got, err := fileSum(path)
	if err != nil {
		return fmt.Errorf("the %s %s cannot be read to check it against %s: %v", what, path, field, err)
	}
	if got != want {
		return fmt.Errorf("the %s %s has sha256 %s, but %s is %s; it was not started. Install the %[1]s the policy names, or update %[4]s if the new one is trusted", what, path, got, field, want)
	}
	return nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckServer checks a server's program and scripts before a start: their
// pins, where they have them (a later start than the load's, rule R8).
func CheckServer(u *policy.Upstream) error {
	if len(u.Command) == 0 {
		return nil
	}
	for _, a := range slices.Sorted(maps.Keys(u.Scripts)) {
		p := scriptPath(a, u.Cwd)
		if p == "" {
			return fmt.Errorf("servers.%s.scripts pins the argument %q, which names no file from %s now; it was not started", u.Server, a, dirName(u.Cwd))
		}
		if err := checkFile("script", p, u.Scripts[a], fmt.Sprintf("servers.%s.scripts[%q]", u.Server, a)); err != nil {
			return err
		}
	}
	if u.SHA256 == "" {
		return nil
	}
	path, err := exec.LookPath(u.Command[0])
	if err != nil {
		return err
	}
	return checkSum(path, u.SHA256, "servers."+u.Server+".sha256")
}

// writableDirs is where some surface of gen may write (rule R6): the
// literal directories of the agent's effective Write and Edit entries
// (every chain starts at the agent, so none writes more), every tool's
// sandbox.write, and "/" for a command the agent may run unsandboxed.
func writableDirs(gen *policy.Generation) []string {
	eff, err := gen.Effective([]string{"agent"})
	if err != nil {
		return nil
	}
	var dirs []string
	for _, name := range gen.Names() {
		t := gen.Tools[name]
		listed := eff.Listed(name)
		switch {
		case t.WritesFiles() && listed:
			d, all := eff.Prefixes(name)
			if all {
				d = []string{"/"}
			}
			dirs = append(dirs, d...)
		case t.Builtin == "Bash" && listed && (t.Sandbox == nil || t.Sandbox.Off):
			dirs = append(dirs, "/")
		}
		if t.Sandbox != nil {
			dirs = append(dirs, homes(t.Sandbox.Write)...)
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}
