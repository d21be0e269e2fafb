package gatefiles

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestR9EachRuntimesFiles: each runtime's files are found from its home,
// its project and the variables that move them; every directory of each
// (project, user and system) is one made before a sandbox; a relative
// variable is taken from the project and from the runtime's start
// directory (P4's CLAUDE_CONFIG_DIR=rel/cfg), and what the hook sealed is
// found again in exec (Sealed, Unseal); an unknown runtime is a sentence
// naming the runtimes known.
func TestR9EachRuntimesFiles(t *testing.T) {
	env := map[string]string{"CODEX_HOME": "/ch", "GEMINI_CLI_HOME": "/gh", "GEMINI_CLI_SYSTEM_SETTINGS_PATH": "/s.json",
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "rel.json", "GEMINI_CLI_TRUSTED_FOLDERS_PATH": "/t.json", "CLAUDE_CONFIG_DIR": "rel/cfg"}
	w := Where{Home: "/h", Project: "/p", Env: func(k string) string { return env[k] }, Cwd: "/c"}
	want := map[string][]string{
		"codex":       {"/h/.codex+", "/ch+", "/etc/codex+", "/p/.codex+"},
		"gemini-cli":  {"/h/.gemini+", "/gh/.gemini+", "/t.json", "/s.json", "/p/rel.json", "/c/rel.json", "/etc/gemini-cli+", "/p/.gemini+"},
		"claude-code": {"/h/.claude.json", "/p/rel/cfg/.claude.json", "/c/rel/cfg/.claude.json", "/h/.claude+", "/p/rel/cfg+", "/c/rel/cfg+", "/etc/claude-code+", "/p/.claude+", "/p/.mcp.json"},
	}
	files := func(w Where) map[string][]string {
		got := map[string][]string{}
		for _, runtime := range Runtimes() {
			fs, err := Of(runtime, w)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if f.What == whatShell {
					continue // TestR9ShellFilesAreEveryRuntimes
				}
				if f.Dir {
					f.Path += "+"
				}
				got[runtime] = append(got[runtime], f.Path)
			}
		}
		return got
	}
	for runtime, got := range files(w) {
		if !slices.Equal(got, want[runtime]) {
			t.Errorf("%s: %v, want %v", runtime, got, want[runtime])
		}
	}
	// exec, told what the hook sealed, finds the same files with no
	// environment of its own.
	sealed := w.Sealed()
	exec := Where{Home: "/h", Project: "/p"}
	if err := exec.Unseal(sealed); err != nil {
		t.Fatal(err)
	}
	for runtime, got := range files(exec) {
		// In the sealed order, sorted.
		if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want[runtime]))) {
			t.Errorf("%s from the sealed %v: %v, want %v", runtime, sealed, got, want[runtime])
		}
	}
	for _, bad := range []string{"CLAUDE_CONFIG_DIR=rel", "PATH=/x", "CODEX_HOME"} {
		if err := exec.Unseal([]string{bad}); err == nil || !strings.Contains(err.Error(), "CLAUDE_CONFIG_DIR, CODEX_HOME") {
			t.Errorf("Unseal of %q: %v", bad, err)
		}
	}
	if _, err := Of("cursor", w); err == nil || !strings.Contains(err.Error(), "claude-code, codex, gemini-cli") {
		t.Errorf("an unknown runtime: %v", err)
	}
	if err := Protect("cursor", w); err == nil {
		t.Error("Protect of an unknown runtime must fail")
	}
}

// TestR9CodexLayersFromTheProjectRoot: Codex's project layers run from
// the outermost directory holding a marker (.git, or one its user
// configuration names) down to where it runs; a configuration that does
// not parse, or markers that are absolute or climb out with .., change
// nothing but are read without failing; with no marker, only the project;
// Claude Code's git roots include a worktree's main repository.
func TestR9CodexLayersFromTheProjectRoot(t *testing.T) {
	root := t.TempDir()
	home, proj := root+"/home", root+"/r/proj"
	for _, d := range []string{home + "/.codex", proj + "/a/b", root + "/main/.git/worktrees/w"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	layers := func() []string { return Where{Home: home, Project: proj + "/a/b"}.codexLayers() }
	if got := layers(); !slices.Equal(got, []string{proj + "/a/b"}) {
		t.Errorf("no marker: %v", got)
	}
	os.WriteFile(proj+"/.root", nil, 0o644)
	os.WriteFile(root+"/r/.root", nil, 0o644)
	for _, bad := range []string{"project_root_markers = [", `project_root_markers = ["/etc", "../..", ".", ""]`, `project_root_markers = 7`} {
		os.WriteFile(home+"/.codex/config.toml", []byte(bad), 0o644)
		if got := layers(); !slices.Equal(got, []string{proj + "/a/b"}) {
			t.Errorf("with %q: %v", bad, got)
		}
	}
	os.WriteFile(home+"/.codex/config.toml", []byte(`project_root_markers = [".root"]`), 0o644)
	if got := layers(); !slices.Equal(got, []string{root + "/r", proj, proj + "/a", proj + "/a/b"}) {
		t.Errorf("by the configured marker, from the outermost: %v", got)
	}
	os.Remove(home + "/.codex/config.toml")
	os.Mkdir(proj+"/a/.git", 0o755)
	if got := layers(); !slices.Equal(got, []string{proj + "/a", proj + "/a/b"}) {
		t.Errorf("by .git: %v", got)
	}
	os.WriteFile(proj+"/.git", []byte("gitdir: "+root+"/main/.git/worktrees/w\n"), 0o644)
	if got := gitRoots(proj + "/a/b"); !slices.Equal(got, []string{proj + "/a", proj, root + "/main"}) {
		t.Errorf("git roots: %v", got)
	}
}

// TestR9ShellFilesAreEveryRuntimes: the start-up files of the user's
// shells (the home's, $ZDOTDIR's and /etc's) are gate files of every
// runtime, each made while absent but /etc's; those made in a home where only one of
// ~/.bash_login and ~/.profile exists, or neither, leave a login bash
// reading what it read before (the hostile probe's V5).
func TestR9ShellFilesAreEveryRuntimes(t *testing.T) {
	env := map[string]string{"ZDOTDIR": "/z"}
	w := Where{Home: "/h", Project: "/p", Env: func(k string) string { return env[k] }}
	for _, runtime := range Runtimes() {
		fs, _ := Of(runtime, w)
		var got []string
		for _, f := range fs {
			if f.What == whatShell && !f.Dir {
				if got = append(got, f.Path); f.Kept != strings.HasPrefix(f.Path, "/etc/") {
					t.Errorf("%s: %s is made while absent: %v", runtime, f.Path, !f.Kept)
				}
			}
		}
		for _, want := range []string{"/h/.bashrc", "/h/.bash_profile", "/h/.bash_login", "/h/.profile", "/h/.zshrc", "/h/.zshenv", "/z/.zshrc", "/z/.zlogin", "/etc/profile", "/etc/bash.bashrc"} {
			if !slices.Contains(got, want) {
				t.Errorf("%s: %s is not among its shell files %v", runtime, want, got)
			}
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	for _, had := range []string{".profile", ".bash_login", ""} {
		home := t.TempDir()
		if had != "" {
			os.WriteFile(filepath.Join(home, had), []byte("echo read "+had+"\n"), 0o644)
		}
		fs, _ := Of("codex", Where{Home: home})
		for _, f := range fs {
			if _, err := os.Lstat(f.Path); f.What == whatShell && !f.Dir && !f.Kept && err != nil {
				os.WriteFile(f.Path, []byte(f.Content), f.Mode)
			}
		}
		c := exec.Command(bash, "-lc", "true")
		c.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
		out, err := c.CombinedOutput()
		want := ""
		if had != "" {
			want = "read " + had + "\n"
		}
		if err != nil || string(out) != want {
			t.Errorf("a login bash in a home that had %q only, once the files are made: %v %q, want %q", had, err, out, want)
		}
	}
}
