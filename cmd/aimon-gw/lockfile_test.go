package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/mcptest"
)

// TestS3PinsAreTheLockfile: pin writes each tool's whole definition, and
// with every server gone (the stdio server's binary removed, the HTTP
// server stopped, its header secret unset) vet and check decide from the
// pins alone: the pinned schema gates the input, the pinned annotations
// say the effect, entries the pins do not list are errors with a
// did-you-mean in both entry forms, and a pin edited by hand is an error
// at its place (issue 29).
func TestS3PinsAreTheLockfile(t *testing.T) {
	t.Parallel()
	server := filepath.Join(t.TempDir(), "fsserver")
	copyFile(t, fsServer(t), server)
	os.Chmod(server, 0o755)
	addr := freeAddr(t)
	dir := moduleDir(t, fmt.Sprintf(`package policy

servers: fs: {command: [%q], expose: "*", trustAnnotations: true}
servers: web: {url: "http://%s/mcp", headers: Authorization: "Bearer ${AIMON_TEST_TOKEN}", expose: ["echo"]}
agent: "allowed-tools": ["fs__read_file", "fs__write_file", "mcp__web__echo"]
subagents: reader: {"allowed-tools": ["fs__read_file", "fs__write_file"], "max-effect": "read"}
validation: "enforce"
`, server, addr))
	t.Run("pin", func(t *testing.T) {
		mcptest.NewEchoAt(t, "s3cret", addr) // stopped when this subtest ends
		cmd := exec.Command(gatewayBinary(t), "pin", dir)
		cmd.Env = append(os.Environ(), "AIMON_TEST_TOKEN=s3cret")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pin: %v\n%s", err, out)
		}
	})
	if t.Failed() {
		return
	}
	pins, _ := os.ReadFile(filepath.Join(dir, "pins.cue"))
	for _, want := range []string{`description: "Reads a file."`, "readOnlyHint:   true", `description: "the file to write"`, `description: "Echoes its text."`} {
		if !strings.Contains(string(pins), want) {
			t.Errorf("pins.cue lacks %s:\n%s", want, pins)
		}
	}
	os.Remove(server)
	// No server, no secret.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AIMON_TEST_TOKEN=") })
	run := func(args ...string) (int, string) {
		cmd := exec.Command(gatewayBinary(t), args...)
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	// vet needs no server to check the policy against its pins; it warns
	// only that the server's command is not installed here (R4).
	if code, out := run("vet", dir); code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "warning: server fs's command "+server+" cannot be found here") {
		t.Errorf("vet from the pins: exit %d\n%s", code, out)
	}
	call := func(name string, input map[string]any) string {
		b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": "1", "name": name, "input": input})
		return string(b)
	}
	for _, tc := range []struct {
		note, surface, call string
		code                int
		want                string
	}{
		{"the pinned schema gates", "agent", call("fs__write_file", map[string]any{"path": "/tmp/x", "contnt": "a"}), 1, "Unknown parameter 'contnt'. Did you mean 'content'?"},
		{"a sound call", "agent", call("fs__write_file", map[string]any{"path": "/tmp/x", "content": "a"}), 0, `"allowed": true`},
		{"an HTTP server's tool, its secret unset", "agent", call("web__echo", map[string]any{"text": "hi"}), 0, `"allowed": true`},
		{"the HTTP server's pinned schema", "agent", call("web__echo", map[string]any{"txt": "hi"}), 1, "Unknown parameter 'txt'"},
		{"pinned readOnlyHint under max-effect read", "agent,subagent:reader", call("fs__read_file", map[string]any{"path": "/tmp/x"}), 0, `"allowed": true`},
		{"a writing tool under max-effect read", "agent,subagent:reader", call("fs__write_file", map[string]any{"path": "/tmp/x", "content": "a"}), 1, "write"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if code, out := run("check", "--policy", dir, "--surface", tc.surface, tc.call); code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("check: exit %d, want %d with %q\n%s", code, tc.code, tc.want, out)
			}
		})
	}
	t.Run("entries the pins do not list", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "typo.cue"), "package policy\n\nsubagents: typo: \"allowed-tools\": [\"fs__wirte_file\", \"mcp__fs__raed_file\", \"mcp__web__ecoh\"]\n")
		defer os.Remove(filepath.Join(dir, "typo.cue"))
		code, out := run("vet", dir)
		for _, want := range []string{`typo.cue:3:36: subagent:typo allowed-tools entry "fs__wirte_file" names a tool that the pins of the server fs do not list; did you mean "fs__write_file"?`,
			`did you mean "mcp__fs__read_file"?`, `did you mean "mcp__web__echo"?`} {
			if code != 1 || !strings.Contains(out, want) {
				t.Errorf("vet: exit %d, want %q\n%s", code, want, out)
			}
		}
	})
	t.Run("a pin edited by hand", func(t *testing.T) {
		edited := strings.Replace(string(pins), `"Reads a file."`, `"Reads a file. Harmless."`, 1)
		writeFile(t, filepath.Join(dir, "pins.cue"), edited)
		defer writeFile(t, filepath.Join(dir, "pins.cue"), string(pins))
		code, out := run("vet", dir)
		if code != 1 || !strings.Contains(out, "pins.cue:") || !strings.Contains(out, "is not the one its sha256 names") {
			t.Errorf("vet: exit %d\n%s", code, out)
		}
	})
}
