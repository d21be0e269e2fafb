package policy_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/policy"
)

// Claude Code's settings become a policy that loads, and decides as Claude
// Code does: a denied command is refused, a read of the project allowed.
func ExampleImport() {
	project, _ := os.MkdirTemp("", "project")
	defer os.RemoveAll(project)
	settings := filepath.Join(project, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"permissions": {"allow": ["Read"], "deny": ["Bash(rm:*)"]}}`), 0o644)

	im, err := policy.Import("claude-code", []string{settings}, policy.ImportOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(im.Lossy), "rules made stricter")
	// A CUE module beside it, as aimon-gw init writes one.
	os.MkdirAll(filepath.Join(project, "cue.mod"), 0o755)
	os.WriteFile(filepath.Join(project, "cue.mod", "module.cue"), []byte("module: \"example.com/p@v0\"\nlanguage: version: \"v0.12.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(project, "policy.cue"), []byte(im.Source), 0o644)
	pol, err := policy.Load(context.Background(), project, policy.WithWorkdir(project))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Contains(im.Source, `"Bash(rm:*)"`), len(pol.Tools()) > 0)
	// Output:
	// 0 rules made stricter
	// true true
}

// A directory is read as the runtime reads it: Codex's CODEX_HOME holds
// its config.toml and rules/*.rules.
func ExampleImportFiles() {
	home, _ := os.MkdirTemp("", "codex")
	defer os.RemoveAll(home)
	os.MkdirAll(filepath.Join(home, "rules"), 0o755)
	os.WriteFile(filepath.Join(home, "config.toml"), []byte("sandbox_mode = \"read-only\"\n"), 0o644)
	os.WriteFile(filepath.Join(home, "rules", "default.rules"), []byte("prefix_rule(pattern = [\"git\", \"status\"], decision = \"allow\")\n"), 0o644)
	files, err := policy.ImportFiles("codex", home)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range files {
		fmt.Println(filepath.Base(f))
	}
	// Output:
	// config.toml
	// default.rules
}

// Each bad input of Import is an error that names what is wrong and what
// to give instead, and no policy (rule P14: an import keeps each rule
// exactly, or says it could not): an unknown runtime, a settings file
// that cannot be read (an *fs.PathError), one that is not JSON, two
// settings files for Claude Code, a Codex rule that is not Starlark.
func TestP14ImportBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	notJSON := write("settings.json", "{\"permissions\": ")
	bad := write("bad.rules", "prefix_rule(")
	for _, c := range []struct {
		name, runtime string
		files         []string
		want          string
	}{
		{"unknown runtime", "cursor", []string{notJSON}, `there is no importer of the runtime "cursor"; give one of [claude-code codex gemini-cli]`},
		{"no such file", "claude-code", []string{filepath.Join(dir, "none.json")}, "no such file"},
		{"not JSON", "claude-code", []string{notJSON}, "not a Claude Code settings file (JSON)"},
		{"two settings", "claude-code", []string{notJSON, notJSON}, "read from one settings file, and 2 were given"},
		{"bad Starlark", "codex", []string{bad}, "bad.rules"},
	} {
		im, err := policy.Import(c.runtime, c.files, policy.ImportOptions{Project: dir})
		if err == nil || im != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Import = %v, %v; want no policy and an error saying %q", c.name, im, err, c.want)
		}
	}
	if _, err := policy.Import("claude-code", []string{filepath.Join(dir, "none.json")}, policy.ImportOptions{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing settings file is %v, want an *fs.PathError of fs.ErrNotExist", err)
	}
	if _, err := policy.ImportFiles("gemini-cli", filepath.Join(dir, "none")); err == nil {
		t.Errorf("ImportFiles of a missing path succeeded")
	}
	if _, err := policy.ImportFiles("cursor", dir); err == nil || !strings.Contains(err.Error(), "no importer") {
		t.Errorf("ImportFiles of an unknown runtime: %v", err)
	}
}

// A rule the policy cannot keep exactly is reported in Lossy, and the
// policy made keeps it stricter (rule P14).
func TestP14ImportReportsLossyRules(t *testing.T) {
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(settings, []byte(`{"permissions": {"allow": ["Bash(git *:*)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	im, err := policy.Import("claude-code", []string{settings}, policy.ImportOptions{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Lossy) == 0 {
		t.Fatalf("no rule reported lossy in %q", im.Source)
	}
}
