// Package gatefiles names, for each agent runtime, the files that make it
// call the gateway: its settings and hook configuration. The agent must
// not switch the gate off by writing them (rule R9), so each front end
// protects them as the policy is protected (R8): no file tool writes them
// and every sandbox binds them read-only.
package gatefiles

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"aimon.dev/gw/internal/exec/sandbox"
)

// A File is one file or directory of a runtime's gate, with what it is.
type File struct {
	What, Path string
	// Dir says the gateway creates it, empty, before a sandbox is made,
	// so that no command can create it first and fill it.
	Dir bool
}

// Where is what a runtime's files are found from: the home of the user it
// runs as and its project directory (where it was started, whose settings
// it reads, whatever directory the agent is in now).
type Where struct {
	Home, Project string
	// Env is the runtime's environment, for a variable that moves its
	// files (CLAUDE_CONFIG_DIR); nil for none.
	Env func(string) string
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
// gate of another that runs in the same home or project next. Only the
// running runtime's project directory is created before a sandbox is
// made (Dir); another's is protected where it exists, and by its name
// from every file tool.
func Protect(runtime string, w Where) error {
	if _, ok := runtimes[runtime]; !ok {
		_, err := Of(runtime, w)
		return err
	}
	var gates []sandbox.Named
	for _, name := range Runtimes() {
		files, _ := Of(name, w)
		for _, f := range files {
			if f.Dir && name == runtime {
				sandbox.ProtectDir(f.What, f.Path)
			}
			gates = append(gates, sandbox.Named{What: f.What, Path: f.Path})
		}
	}
	sandbox.ProtectGates(gates)
	return nil
}

func (w Where) env(name string) string {
	if w.Env == nil {
		return ""
	}
	return w.Env(name)
}

// lister collects a runtime's files, absolute and cleaned; a relative or
// empty path (an unset variable) is left out.
type lister []File

func (l *lister) add(what, path string, dir bool) {
	if path != "" && filepath.IsAbs(path) {
		*l = append(*l, File{What: what, Path: filepath.Clean(path), Dir: dir})
	}
}

// Codex lists Codex's files: its home (~/.codex, or $CODEX_HOME: the
// config.toml that holds its hooks, MCP servers and features, hooks.json,
// its profiles, execpolicy rules and trust of hooks), the system
// configuration and requirements (/etc/codex), and the project's .codex/
// (config.toml, hooks.json and rules, loaded once the project is trusted).
func Codex(w Where) []File {
	var l lister
	const home = "Codex's home (its config.toml with its hooks, MCP servers and features, hooks.json, profiles and rules)"
	if w.Home != "" {
		l.add(home, filepath.Join(w.Home, ".codex"), false)
	}
	// Both: a command's environment is not the hook's to trust.
	l.add(home, w.env("CODEX_HOME"), false)
	l.add("Codex's system configuration and requirements", "/etc/codex", false)
	if w.Project != "" {
		l.add("Codex's project configuration (its config.toml, hooks.json and rules)", filepath.Join(w.Project, ".codex"), true)
	}
	return l
}

// GeminiCLI lists Gemini CLI's files: its user directory (~/.gemini, or
// $GEMINI_CLI_HOME/.gemini: settings.json with its hooks and MCP servers,
// trusted folders, policies, extensions, agents and commands), the
// system settings and defaults (/etc/gemini-cli, or where the variables
// that move them say), and the project's .gemini/ (its settings.json).
func GeminiCLI(w Where) []File {
	var l lister
	const user = "Gemini CLI's user directory (its settings.json with its hooks and MCP servers, trusted folders, policies and extensions)"
	for _, home := range []string{w.Home, w.env("GEMINI_CLI_HOME")} {
		if home != "" {
			l.add(user, filepath.Join(home, ".gemini"), false)
		}
	}
	l.add("Gemini CLI's trusted folders", w.env("GEMINI_CLI_TRUSTED_FOLDERS_PATH"), false)
	l.add("Gemini CLI's system settings", "/etc/gemini-cli", false)
	l.add("Gemini CLI's system settings", w.env("GEMINI_CLI_SYSTEM_SETTINGS_PATH"), false)
	l.add("Gemini CLI's system defaults", w.env("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"), false)
	if w.Project != "" {
		l.add("Gemini CLI's project settings (its settings.json, hooks and MCP servers)", filepath.Join(w.Project, ".gemini"), true)
	}
	return l
}

// ClaudeCode lists Claude Code's files: its user configuration directory
// (settings, hook scripts, and the agents, skills, commands and plugins
// that may carry hooks of their own), its state file (~/.claude.json,
// which holds MCP servers and the project's trust), the managed settings,
// and each project directory's .claude/ and .mcp.json.
func ClaudeCode(w Where) []File {
	var files []File
	add := func(what, path string, dir bool) {
		if path != "" && filepath.IsAbs(path) {
			files = append(files, File{What: what, Path: filepath.Clean(path), Dir: dir})
		}
	}
	config := ""
	if w.Env != nil {
		config = w.Env("CLAUDE_CONFIG_DIR")
	}
	// Both the default place and the one CLAUDE_CONFIG_DIR names: a
	// command's environment is not the hook's to trust.
	for _, dir := range []string{w.Home, config} {
		if dir != "" {
			add("Claude Code's state file (its MCP servers and trusted projects)", filepath.Join(dir, ".claude.json"), false)
		}
	}
	// Made before a sandbox when absent, as the project's is: a command
	// that made it first could fill it with a settings file that switches
	// the hooks off.
	for _, dir := range []string{filepath.Join(w.Home, ".claude"), config} {
		if w.Home != "" || dir == config {
			add("Claude Code's user configuration (its settings, hooks, agents, skills and plugins)", dir, true)
		}
	}
	add("Claude Code's managed settings", "/etc/claude-code", false)
	if w.Project != "" {
		add("Claude Code's project configuration (its settings, local settings, hooks, agents and skills)", filepath.Join(w.Project, ".claude"), true)
		add("Claude Code's project MCP servers", filepath.Join(w.Project, ".mcp.json"), false)
	}
	return files
}
