package gatefiles

import (
	"slices"
	"strings"
	"testing"
)

// TestR9EachRuntimesFiles: each runtime's files are found from its home,
// its project and the variables that move them, the project's directory
// is the one created before a sandbox, and an unknown runtime is a
// sentence naming the runtimes known.
func TestR9EachRuntimesFiles(t *testing.T) {
	env := map[string]string{"CODEX_HOME": "/ch", "GEMINI_CLI_HOME": "/gh", "GEMINI_CLI_SYSTEM_SETTINGS_PATH": "/s.json",
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH": "rel.json", "GEMINI_CLI_TRUSTED_FOLDERS_PATH": "/t.json"}
	w := Where{Home: "/h", Project: "/p", Env: func(k string) string { return env[k] }}
	for runtime, want := range map[string][]string{
		"codex":      {"/h/.codex", "/ch", "/etc/codex", "/p/.codex+"},
		"gemini-cli": {"/h/.gemini", "/gh/.gemini", "/t.json", "/etc/gemini-cli", "/s.json", "/p/.gemini+"},
	} {
		files, err := Of(runtime, w)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			if f.Dir {
				f.Path += "+"
			}
			got = append(got, f.Path)
		}
		// A relative path a variable names is no file of the runtime's.
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", runtime, got, want)
		}
	}
	if _, err := Of("cursor", w); err == nil || !strings.Contains(err.Error(), "claude-code, codex, gemini-cli") {
		t.Errorf("an unknown runtime: %v", err)
	}
	if err := Protect("cursor", w); err == nil {
		t.Error("Protect of an unknown runtime must fail")
	}
}
