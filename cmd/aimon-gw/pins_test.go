package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3PinWithoutServers: pin of a policy with no server held to pins
// says so and writes nothing (issue 29).
func TestS3PinWithoutServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ note, policy string }{
		{"no server", "import \"aimon.dev/gw/schema\"\n\ntools: Echo: schema.#Echo\n"},
		{"only servers that opt out", "servers: fs: {command: [\"/nonexistent/mcp\"], expose: \"*\", pin: false}\n"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := moduleDir(t, "package policy\n\n"+tc.policy)
			out, err := exec.Command(gatewayBinary(t), "pin", dir).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "nothing to pin") {
				t.Errorf("pin: %v\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "pins.cue")); err == nil {
				t.Error("pin wrote pins.cue for a policy with nothing to pin")
			}
		})
	}
}

// TestS3VetWantsPins: vet, which starts no server, reports a server held
// to pins that has none, an entry naming a tool the pins do not list (with
// a did-you-mean), and a tool named without a pin; a server that opts out
// (pin: false) or is pinned passes (issue 29).
func TestS3VetWantsPins(t *testing.T) {
	t.Parallel()
	const pin = `"sha256:0000000000000000000000000000000000000000000000000000000000000000"`
	for _, tc := range []struct{ note, policy, want string }{
		{"named tools, no pins", `servers: fs: {command: ["/nonexistent/mcp"], expose: ["read_file"]}`, "server fs has no pins"},
		{"every tool, no pins", `servers: fs: {command: ["/nonexistent/mcp"], expose: "*"}`, "server fs has no pins"},
		{"opted out", `servers: fs: {command: ["/nonexistent/mcp"], expose: ["read_file"], pin: false}`, ""},
		{"pinned", `servers: fs: {command: ["/nonexistent/mcp"], expose: ["read_file"]}
pins: fs: read_file: ` + pin, ""},
		{"pinned, every tool", `servers: fs: {command: ["/nonexistent/mcp"], expose: "*"}
pins: fs: read_file: ` + pin, ""},
		{"an entry its pins do not list", `servers: ev: {command: ["/nonexistent/mcp"], expose: "*"}
pins: ev: echo: ` + pin + `
agent: "allowed-tools": ["ev__ehco", "ev__echo", "mcp__ev"]`, `entry "ev__ehco" names a tool that the pins of the server ev do not list; did you mean "ev__echo"?`},
		{"entries its pins list", `servers: ev: {command: ["/nonexistent/mcp"], expose: "*"}
pins: ev: echo: ` + pin + `
agent: "allowed-tools": ["ev__echo", "mcp__ev", "mcp__ev__echo"]`, ""},
		{"a tool named without a pin", `servers: fs: {command: ["/nonexistent/mcp"], expose: ["read_file", "write_file"]}
pins: fs: read_file: ` + pin, "tool fs__write_file has no pin among the server's"},
		{"pins of digests only", `servers: fs: {command: ["/nonexistent/mcp"], expose: ["read_file"]}
pins: fs: read_file: ` + pin, "hold only the digest of read_file, not its definition"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dir := moduleDir(t, "package policy\n\n"+tc.policy+"\n")
			out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
			if tc.want == "" {
				if err != nil {
					t.Errorf("vet: %v\n%s", err, out)
				}
				return
			}
			// A server without pins and an entry its pins do not list are
			// errors; a tool without a pin and pins without definitions,
			// warnings.
			warning := strings.Contains(tc.want, "no pin among") || strings.Contains(tc.want, "only the digest")
			if failed := err != nil; failed == warning || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "policy.cue:") {
				t.Errorf("vet: %v\n%s\nwant %q at the server", err, out, tc.want)
			}
		})
	}
}

// TestS3WithheldToolsAreWarnings: serve logs, at WARN, a server without
// pins and each tool it withholds (issue 29).
func TestS3WithheldToolsAreWarnings(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, "package policy\n\nservers: fs: {command: [\"/nonexistent/mcp\"], expose: [\"read_file\"]}\n")
	cmd := exec.Command(gatewayBinary(t), "serve", "--policy", dir)
	cmd.Stdin = strings.NewReader(`{"type":"status"}` + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"has no pins", "withheld"} {
		found := false
		for _, l := range strings.Split(stderr.String(), "\n") {
			found = found || strings.Contains(l, "WARN") && strings.Contains(l, want)
		}
		if !found {
			t.Errorf("no WARN line saying %q:\n%s", want, stderr.String())
		}
	}
}
