// Package gatefiles names, for each agent runtime, the files that make it
// call the gateway: its settings and hook configuration. The agent must
// not switch the gate off by writing them (rule R9), so each front end
// protects them as the policy is protected (R8): no file tool writes them
// and every sandbox binds them read-only.
package gatefiles

import (
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"aimon.dev/gw/internal/exec/sandbox"
)

// A File is one file or directory of a runtime's gate, with what it is.
type File struct {
	What, Path string
	// Dir says it is a directory, which the gateway makes, empty, before
	// a sandbox whose commands could make it, so that no command makes it
	// first and fills it.
	Dir bool
	// Content is what a file (not Dir) that is absent is made with,
	// harmless, before a sandbox whose commands could make it, so that no
	// command makes it first naming a program the runtime runs; Mode is
	// its mode (0o600 for none, /etc's readable to all).
	Content string
	Mode    fs.FileMode
	// Kept says an absent one is not made, only protected once it exists:
	// /etc's shell start-up files, which only a command that may write
	// /etc could make, and such a command (root's) could as well write
	// /etc/ld.so.preload or the shell itself; the gateway does not lay
	// out the system's shells.
	Kept bool
}

// Where is what a runtime's files are found from: the home of the user it
// runs as and its project directory (where it was started, whose settings
// it reads, whatever directory the agent is in now).
type Where struct {
	Home, Project string
	// Env is the runtime's environment, for a variable that moves its
	// files (CLAUDE_CONFIG_DIR); nil for none.
	Env func(string) string
	// Cwd is the directory the runtime's process may have started in,
	// besides Project: a relative variable (CLAUDE_CONFIG_DIR=rel/cfg) is
	// taken from each, as the runtime, a Node process, resolves it against
	// its own, which the gateway cannot know for sure.
	Cwd string
	// Also are more paths of each variable: those the hook sealed for
	// exec (Unseal), protected beside what exec's own Env says.
	Also map[string][]string
}

// Vars are the variables of the runtimes' environments that move their
// files: what the hook seals for exec (Sealed), which protects the files
// the hook protected whatever exec's own environment says.
var Vars = []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "GEMINI_CLI_TRUSTED_FOLDERS_PATH", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"}

// Sealed is each of Vars that w sets, as NAME=PATH with the path absolute
// (a relative one taken from each of w's directories, so a name may come
// twice), sorted: what exec is told to protect (Unseal).
func (w Where) Sealed() []string {
	var out []string
	for _, name := range Vars {
		for _, p := range w.paths(name) {
			out = append(out, name+"="+p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Unseal reads what Sealed wrote into w.Also; an entry that is not one of
// Vars set to an absolute path is an error.
func (w *Where) Unseal(sealed []string) error {
	for _, kv := range sealed {
		name, p, ok := strings.Cut(kv, "=")
		if !ok || !slices.Contains(Vars, name) || !filepath.IsAbs(p) {
			return fmt.Errorf("%q is not one of %s set to an absolute path", kv, strings.Join(Vars, ", "))
		}
		if w.Also == nil {
			w.Also = map[string][]string{}
		}
		w.Also[name] = append(w.Also[name], p)
	}
	return nil
}

// runtimes maps a runtime's name to its files.
var runtimes = map[string]func(Where) []File{
	"claude-code": ClaudeCode,
	"codex":       Codex,
	"gemini-cli":  GeminiCLI,
}

// Runtimes are the runtimes whose files are known, sorted.
func Runtimes() []string { return slices.Sorted(maps.Keys(runtimes)) }

// Of lists runtime's files; an error names the runtimes known.
func Of(runtime string, w Where) ([]File, error) {
	f, ok := runtimes[runtime]
	if !ok {
		return nil, fmt.Errorf("no agent runtime is called %q; the runtimes whose files the gateway protects are %s", runtime, strings.Join(Runtimes(), ", "))
	}
	return f(w), nil
}

// Protect protects runtime's files (rule R9), and those of every other
// runtime it knows: an agent under one runtime must not switch off the
// gate of another that runs in the same home or project next, nor plant
// a hook there that the other runs outside every sandbox. Each runtime's
// directories (project, user and system) are made before a sandbox whose
// commands could make them, whichever runtime's hook runs; /etc's are
// made readable to every user, as the administrator's settings there
// must be.
func Protect(runtime string, w Where) error {
	if _, ok := runtimes[runtime]; !ok {
		_, err := Of(runtime, w)
		return err
	}
	ProtectAll(w)
	return nil
}

// ProtectAll is Protect of no one runtime: what serve and mcp protect,
// whose agent's tools and commands must not plant a hook that a runtime
// run in the same home or project later runs outside every sandbox.
func ProtectAll(w Where) {
	var gates []sandbox.Named
	for _, name := range Runtimes() {
		files, _ := Of(name, w)
		for _, f := range files {
			etc := strings.HasPrefix(f.Path, "/etc/")
			switch {
			case f.Kept:
			case f.Dir:
				mode := fs.FileMode(0o700)
				if etc {
					mode = 0o755
				}
				sandbox.ProtectGateDir(f.What, f.Path, mode)
			default:
				mode := f.Mode
				if mode == 0 {
					mode = 0o600
				}
				if etc {
					mode |= 0o444
				}
				sandbox.ProtectGateFile(f.What, f.Path, f.Content, mode)
			}
			gates = append(gates, sandbox.Named{What: f.What, Path: f.Path})
		}
	}
	sandbox.ProtectGates(gates)
}

func (w Where) env(name string) string {
	if w.Env == nil {
		return ""
	}
	return w.Env(name)
}

// paths are the paths the variable name names: its value in Env when
// absolute, else taken from the project and from Cwd, and those of Also.
func (w Where) paths(name string) []string {
	var out []string
	switch v := w.env(name); {
	case v == "":
	case filepath.IsAbs(v):
		out = append(out, filepath.Clean(v))
	default:
		for _, base := range []string{w.Project, w.Cwd} {
			if filepath.IsAbs(base) {
				out = append(out, filepath.Join(base, v))
			}
		}
	}
	return slices.Compact(append(out, w.Also[name]...))
}

// lister collects a runtime's files, absolute and cleaned; an empty path
// (an unset variable) is left out, a relative one taken as paths does.
type lister struct {
	w     Where
	files []File
}

func (l *lister) add(what, path string, dir bool) {
	if path != "" && filepath.IsAbs(path) {
		l.files = append(l.files, File{What: what, Path: filepath.Clean(path), Dir: dir})
	}
}

// file adds a file made, while absent, with content and mode.
func (l *lister) file(what, path, content string, mode fs.FileMode) {
	if path != "" && filepath.IsAbs(path) {
		l.files = append(l.files, File{What: what, Path: filepath.Clean(path), Content: content, Mode: mode})
	}
}

// addVar adds what the variable name names, each path joined with sub.
func (l *lister) addVar(what, name, sub string, dir bool) {
	for _, p := range l.w.paths(name) {
		l.add(what, filepath.Join(p, sub), dir)
	}
}

// Codex lists Codex's files: its home (~/.codex, or $CODEX_HOME: the
// config.toml that holds its hooks, MCP servers and features, hooks.json,
// its profiles, execpolicy rules and trust of hooks), the system
// configuration and requirements (/etc/codex), and the project's .codex/
// (config.toml, hooks.json and rules, loaded once the project is trusted).
func Codex(w Where) []File {
	l := lister{w: w}
	const home = "Codex's home (its config.toml with its hooks, MCP servers and features, hooks.json, profiles and rules)"
	if w.Home != "" {
		l.add(home, filepath.Join(w.Home, ".codex"), true)
	}
	// Both: a command's environment is not the hook's to trust.
	l.addVar(home, "CODEX_HOME", "", true)
	l.add("Codex's system configuration and requirements", "/etc/codex", true)
	for _, d := range w.codexLayers() {
		l.add("Codex's project configuration (its config.toml, hooks.json and rules)", filepath.Join(d, ".codex"), true)
	}
	return append(l.files, shellFiles(w)...)
}

// codexLayers are the directories whose .codex/ Codex loads for a project
// it starts in: every one from the project root down to Project, the
// root being the directory that holds one of project_root_markers
// (default .git), walking up from where it starts. The outermost such
// directory is taken, not the nearest: a command that removed the inner
// marker would move Codex's root up to it. Without a marker, Project.
func (w Where) codexLayers() []string {
	if !filepath.IsAbs(w.Project) {
		return nil
	}
	dirs := ancestors(filepath.Clean(w.Project))
	markers := w.codexMarkers()
	root := 0
	for i, d := range dirs {
		if slices.ContainsFunc(markers, func(m string) bool { return exists(filepath.Join(d, m)) }) {
			root = i
		}
	}
	out := dirs[:root+1]
	slices.Reverse(out)
	return out
}

// codexMarkers are the names that mark a project root for Codex: .git,
// which it takes by default, and every name project_root_markers sets in
// its system and user configuration (each home the hook or exec saw): a
// marker more only widens what is protected.
func (w Where) codexMarkers() []string {
	markers := []string{".git"}
	files := []string{"/etc/codex/config.toml"}
	homes := w.paths("CODEX_HOME")
	if w.Home != "" {
		homes = append(homes, filepath.Join(w.Home, ".codex"))
	}
	for _, h := range homes {
		files = append(files, filepath.Join(h, "config.toml"))
	}
	for _, f := range files {
		var c struct {
			Markers []string `toml:"project_root_markers"`
		}
		b, err := readSmall(f)
		if err != nil || toml.Unmarshal(b, &c) != nil {
			continue // Codex starts on neither, or with its default
		}
		for _, m := range c.Markers {
			if m = filepath.Clean(m); m != "." && !filepath.IsAbs(m) && !strings.HasPrefix(m, "..") {
				markers = append(markers, m)
			}
		}
	}
	return slices.Compact(markers)
}

// readSmall reads a configuration file of at most a mebibyte.
func readSmall(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// ancestors is dir and each directory above it, nearest first.
func ancestors(dir string) []string {
	out := []string{dir}
	for d := dir; d != "/"; {
		d = filepath.Dir(d)
		out = append(out, d)
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// gitRoots are the directories above or at dir that hold a .git, and for
// a worktree's .git file the main repository's root: Claude Code keeps a
// project's local settings at its canonical git root (any of them, were
// an inner .git removed), beside its settings in the directory it starts
// in.
func gitRoots(dir string) []string {
	var out []string
	for _, d := range ancestors(dir) {
		git := filepath.Join(d, ".git")
		fi, err := os.Lstat(git)
		if err != nil {
			continue
		}
		out = append(out, d)
		if !fi.Mode().IsRegular() {
			continue
		}
		// "gitdir: MAIN/.git/worktrees/NAME"
		b, err := readSmall(git)
		if err != nil {
			continue
		}
		to, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !ok {
			continue
		}
		if !filepath.IsAbs(to) {
			to = filepath.Join(d, to)
		}
		if main, _, ok := strings.Cut(filepath.Clean(to), "/.git/worktrees/"); ok && filepath.IsAbs(main) {
			out = append(out, main)
		}
	}
	return out
}

// GeminiCLI lists Gemini CLI's files: its user directory (~/.gemini, or
// $GEMINI_CLI_HOME/.gemini: settings.json with its hooks and MCP servers,
// trusted folders, policies, extensions, agents and commands), the
// system settings and defaults (/etc/gemini-cli, or where the variables
// that move them say), and the project's .gemini/ (its settings.json).
func GeminiCLI(w Where) []File {
	l := lister{w: w}
	const user = "Gemini CLI's user directory (its settings.json with its hooks and MCP servers, trusted folders, policies and extensions)"
	if w.Home != "" {
		l.add(user, filepath.Join(w.Home, ".gemini"), true)
	}
	l.addVar(user, "GEMINI_CLI_HOME", ".gemini", true)
	for _, v := range []struct{ what, name string }{
		{"Gemini CLI's trusted folders", "GEMINI_CLI_TRUSTED_FOLDERS_PATH"},
		{"Gemini CLI's system settings", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"},
		{"Gemini CLI's system defaults", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"},
	} {
		for _, p := range w.paths(v.name) {
			l.file(v.what, p, "{}\n", 0o600)
		}
	}
	l.add("Gemini CLI's system settings", "/etc/gemini-cli", true)
	if w.Project != "" {
		l.add("Gemini CLI's project settings (its settings.json, hooks and MCP servers)", filepath.Join(w.Project, ".gemini"), true)
	}
	return append(l.files, shellFiles(w)...)
}

// ClaudeCode lists Claude Code's files: its user configuration directory
// (settings, hook scripts, and the agents, skills, commands and plugins
// that may carry hooks of their own), its state file (~/.claude.json,
// which holds MCP servers and the project's trust), the managed settings,
// and each project directory's .claude/ and .mcp.json.
func ClaudeCode(w Where) []File {
	l := lister{w: w}
	// Both the default place and the one CLAUDE_CONFIG_DIR names: a
	// command's environment is not the hook's to trust.
	const state = "Claude Code's state file (its MCP servers and trusted projects)"
	const user = "Claude Code's user configuration (its settings, hooks, agents, skills and plugins)"
	if w.Home != "" {
		l.file(state, filepath.Join(w.Home, ".claude.json"), "{}\n", 0o600)
	}
	for _, p := range w.paths("CLAUDE_CONFIG_DIR") {
		l.file(state, filepath.Join(p, ".claude.json"), "{}\n", 0o600)
	}
	if w.Home != "" {
		l.add(user, filepath.Join(w.Home, ".claude"), true)
	}
	l.addVar(user, "CLAUDE_CONFIG_DIR", "", true)
	l.add("Claude Code's managed settings", "/etc/claude-code", true)
	if w.Project != "" {
		l.add("Claude Code's project configuration (its settings, local settings, hooks, agents and skills)", filepath.Join(w.Project, ".claude"), true)
		if filepath.IsAbs(w.Project) {
			// Claude Code reads the .mcp.json of the directory it starts
			// in and of each above it, the root's aside.
			for _, d := range ancestors(filepath.Clean(w.Project)) {
				if d != "/" {
					l.file("Claude Code's project MCP servers", filepath.Join(d, ".mcp.json"), "{\"mcpServers\":{}}\n", 0o644)
				}
			}
			for _, d := range gitRoots(filepath.Clean(w.Project)) {
				l.add("Claude Code's local settings of the project's git repository", filepath.Join(d, ".claude"), true)
			}
		}
	}
	return append(l.files, shellFiles(w)...)
}

// The shells' start-up files: what a shell function of the gateway's own
// path (a bash "/usr/local/bin/aimon-gw() { ...; }") would be defined in,
// which then runs in the gateway's place for each command the hook
// rewrites: Claude Code's snapshot of the user's shell ($SHELL -c -l,
// then ~/.bashrc or $ZDOTDIR/.zshrc), Codex's bash -lc, a login bash.
const (
	whatShell = "a start-up file of the user's shell (whose functions and aliases the runtimes' shells take, a function of the gateway's path among them)"
	// bashProfile is an absent ~/.bash_profile made: a login bash reads
	// the first of ~/.bash_profile, ~/.bash_login and ~/.profile, so one
	// made empty would hide the others; this one reads them as bash
	// would have.
	bashProfile = `# Made by aimon-gw (rule R9) in place of an absent ~/.bash_profile, so that no
# command makes it first; it reads ~/.bash_login or ~/.profile as bash would.
if [ -f "$HOME/.bash_login" ]; then . "$HOME/.bash_login"; elif [ -f "$HOME/.profile" ]; then . "$HOME/.profile"; fi
`
	bashLogin = `# Made by aimon-gw (rule R9) in place of an absent ~/.bash_login, so that no
# command makes it first; it reads ~/.profile as bash would.
if [ -f "$HOME/.profile" ]; then . "$HOME/.profile"; fi
`
	emptyShell = "# Made empty by aimon-gw (rule R9), so that no command makes it first.\n"
)

// shellFiles are the shells' start-up files of w's home (and $ZDOTDIR's),
// made while absent with what reads as before, and /etc's (Kept).
func shellFiles(w Where) []File {
	l := lister{w: w}
	if w.Home != "" {
		l.file(whatShell, filepath.Join(w.Home, ".bash_profile"), bashProfile, 0o644)
		l.file(whatShell, filepath.Join(w.Home, ".bash_login"), bashLogin, 0o644)
		for _, name := range []string{".profile", ".bashrc", ".bash_aliases", ".bash_logout"} {
			l.file(whatShell, filepath.Join(w.Home, name), emptyShell, 0o644)
		}
		fish := filepath.Join(w.Home, ".config", "fish")
		if strings.HasSuffix(w.env("SHELL"), "/fish") || exists(fish) {
			l.add(whatShell, fish, true)
		}
	}
	zdot := []string{w.Home}
	if z := w.env("ZDOTDIR"); filepath.IsAbs(z) {
		zdot = append(zdot, z)
	}
	for _, d := range zdot {
		if d == "" {
			continue
		}
		for _, name := range []string{".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout"} {
			l.file(whatShell, filepath.Join(d, name), emptyShell, 0o644)
		}
	}
	for _, f := range []string{"/etc/profile", "/etc/profile.d", "/etc/bash.bashrc", "/etc/bash.bash_logout", "/etc/bashrc", "/etc/zsh", "/etc/zshenv", "/etc/zprofile", "/etc/zshrc", "/etc/zlogin", "/etc/zlogout"} {
		l.files = append(l.files, File{What: whatShell, Path: f, Kept: true})
	}
	return l.files
}
