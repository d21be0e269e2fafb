package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR8VetRefusesAProgramWhereASurfaceWrites: a plugin or server whose
// binary, or a script its arguments name, lies where a surface may write
// (Write's entries, a sandbox's write, anywhere for an unsandboxed Bash) is
// an error at its command, unless pinned by sha256 (servers.NAME.scripts
// for a script); a pin that does not match is an error too.
func TestR8VetRefusesAProgramWhereASurfaceWrites(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj, trusted := root+"/proj", root+"/trusted"
	for _, d := range []string{proj + "/bin", trusted} {
		os.MkdirAll(d, 0o755)
	}
	copyFile(t, misbehave(t), proj+"/bin/plug")
	copyFile(t, misbehave(t), trusted+"/plug")
	copyFile(t, fsServer(t), proj+"/bin/fs")
	writeFile(t, proj+"/srv.sh", "exec "+fsServer(t)+"\n")
	plugSum, fsSum, srvSum := sum(t, proj+"/bin/plug"), sum(t, proj+"/bin/fs"), sum(t, proj+"/srv.sh")
	const zero = "0000000000000000000000000000000000000000000000000000000000000000"
	tests := []struct {
		note, bash, program, want string
	}{
		{note: "a plugin where Write writes", program: `tools: Env: plugin: command: ["` + proj + `/bin/plug"]`, want: "lies under " + proj},
		{note: "the same, pinned", program: `tools: Env: plugin: {command: ["` + proj + `/bin/plug"], sha256: "` + plugSum + `"}`},
		{note: "pinned to another binary", program: `tools: Env: plugin: {command: ["` + proj + `/bin/plug"], sha256: "` + zero + `"}`, want: "has sha256 " + plugSum},
		{note: "a plugin nowhere writable", program: `tools: Env: plugin: command: ["` + trusted + `/plug"]`},
		{note: "a plugin where a sandbox writes", bash: `sandbox: write: ["` + trusted + `"]`, program: `tools: Env: plugin: command: ["` + trusted + `/plug"]`, want: "lies under " + trusted},
		{note: "an unsandboxed Bash writes everywhere", bash: `sandbox: mode: "off"`, program: `tools: Env: plugin: command: ["` + trusted + `/plug"]`, want: "lies under /,"},
		{note: "a server where Write writes", program: `servers: fs: {command: ["` + proj + `/bin/fs"], expose: ["read_file"], pin: false}`, want: "servers.fs.sha256"},
		{note: "the same, pinned", program: `servers: fs: {command: ["` + proj + `/bin/fs"], sha256: "` + fsSum + `", expose: ["read_file"], pin: false}`},
		{note: "a server's script where Write writes", program: `servers: fs: {command: ["/bin/sh", "srv.sh"], cwd: "` + proj + `", expose: ["read_file"], pin: false}`,
			want: `its script ` + proj + `/srv.sh (the argument "srv.sh") lies under ` + proj},
		{note: "the same, pinned", program: `servers: fs: {command: ["/bin/sh", "srv.sh"], cwd: "` + proj + `", scripts: {"srv.sh": "` + srvSum + `"}, expose: ["read_file"], pin: false}`},
		{note: "a script pinned to another file", program: `servers: fs: {command: ["/bin/sh", "srv.sh"], cwd: "` + proj + `", scripts: {"srv.sh": "` + zero + `"}, expose: ["read_file"], pin: false}`,
			want: "has sha256 " + srvSum},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			dir := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash & {%s}}
%s
agent: "allowed-tools": ["Write(%s/**)", "Bash"]
`, tc.bash, tc.program, proj))
			out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
			if tc.want == "" {
				if err != nil || strings.Contains(string(out), "sha256") {
					t.Errorf("vet: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "policy.cue:6:") {
				t.Errorf("vet: %v\n%s\nwant %q at policy.cue:6", err, out, tc.want)
			}
		})
	}
}

// TestR8ProgramsStartByThePathFoundAtLoad: a server found through PATH at
// load is started again, after a crash, by that path, not by a program the
// agent put earlier on PATH in between; and a load that would start a
// program the agent may replace is refused before anything starts.
func TestR8ProgramsStartByThePathFoundAtLoad(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-path")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, trusted, marker := root+"/proj", root+"/trusted", root+"/shadow-ran"
	for _, d := range []string{proj + "/bin", trusted} {
		os.MkdirAll(d, 0o755)
	}
	copyFile(t, fsServer(t), trusted+"/aimon-fs")
	writeFile(t, proj+"/f.txt", "content")
	dir := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash}
servers: fs: {command: ["aimon-fs"], expose: ["read_file", "crash"], pin: false}
tools: fs__read_file: {subject: {field: "path", kind: "path"}, effect: "read"}
agent: "allowed-tools": ["Write(%s/**)", "Bash", "fs__read_file", "fs__crash"]
`, proj))
	env := []string{"PATH=" + proj + "/bin:" + trusted + ":" + os.Getenv("PATH")}
	replies := runServe(t, []string{"--policy", dir, "--workdir", proj}, env,
		bashLine("shadow", fmt.Sprintf("printf '#!/bin/sh\\ntouch %s\\n' > bin/aimon-fs && chmod +x bin/aimon-fs", marker)),
		toolLine("crash", "fs__crash", map[string]any{}),
		toolLine("read", "fs__read_file", map[string]any{"path": proj + "/f.txt"}))
	if r := replies[0]; r["is_error"] != false {
		t.Fatalf("the shadow was not written: %v", r)
	}
	if r := replies[2]; r["is_error"] != false || text(r) != "content" {
		t.Errorf("the server found at load did not answer after its restart: %v", r)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program the agent put on PATH ran")
	}
	// With the shadow in place, the next load finds it where Write writes,
	// and refuses it before anything starts.
	cmd := exec.Command(gatewayBinary(t), "vet", dir)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "its program "+filepath.Join(proj, "bin/aimon-fs")+" lies under "+proj) {
		t.Errorf("vet with the shadow on PATH: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the load started the program it refused")
	}
}

// TestR3ReloadRefusedWholeStartsNothing: an edit that adds a server and a
// plugin pinned to another binary is refused whole: the server, whose name
// comes first, is never started, and the last good policy stays in force.
func TestR3ReloadRefusedWholeStartsNothing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	marker := root + "/started"
	writeFile(t, root+"/server", fmt.Sprintf("#!/bin/sh\ntouch %s\nexec %s\n", marker, fsServer(t)))
	os.Chmod(root+"/server", 0o755)
	copyFile(t, misbehave(t), root+"/plug")
	dir := moduleDir(t, reloadHeader)
	s := startServe(t, dir)
	s.send(`{"type":"status"}`)
	writeFile(t, filepath.Join(dir, "policy.cue"), reloadHeader+fmt.Sprintf(`servers: aaa: {command: [%q], expose: ["read_file"], pin: false}
tools: zzz: plugin: {command: [%q], sha256: %q}
`, root+"/server", root+"/plug", strings.Repeat("0", 64)))
	st := s.waitStatus(func(m map[string]any) bool { return m["last_error"] != nil })
	if st["generation"] != 1.0 || !strings.Contains(st["last_error"].(string), "but plugin.sha256 is") {
		t.Errorf("status after the edit: %v", st)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a reload that was refused started a server")
	}
}
