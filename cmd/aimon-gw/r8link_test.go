package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// TestR8ALinkTheGatewayReadsThroughIsNotTheCommands: the gateway is given
// its policy through a symbolic link in the working directory (--policy
// proj/.policy), where commands may write. The sandbox binds the policy
// read-only, but a command could replace the link itself (a link and a
// rename over it) and the next start, hook call or reload would load the
// agent's policy; so no command runs, with a sentence that names the link
// and the real path, and the link still names the policy. Given through a
// link that lies where no command writes, commands run. As root and as
// nobody (rule R8; the hostile probe's F10).
func TestR8ALinkTheGatewayReadsThroughIsNotTheCommands(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) {
			root, err := os.MkdirTemp("/var/tmp", "aimon-gw-r8link")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			proj, real := root+"/proj", root+"/real/policy"
			for _, d := range []string{proj, real + "/cue.mod", root + "/links", root + "/evil"} {
				os.MkdirAll(d, 0o755)
			}
			policydir.WriteIn(t, real, map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: {Bash: schema.#Bash, Write: schema.#Write}
agent: "allowed-tools": ["Bash", "Write(` + proj + `/**)"]
`})
			for _, l := range []string{proj + "/.policy", root + "/links/policy"} {
				if err := os.Symlink(real, l); err != nil {
					t.Fatal(err)
				}
			}
			if u.uid >= 0 {
				chownAll(t, root, u.uid, u.gid)
			}
			bin := append(u.prefix, gatewayBinary(t))
			env := []string{"HOME=" + root, "XDG_CACHE_HOME=" + root + "/.cache", "XDG_STATE_HOME=" + root + "/.state"}
			swap := "ln -s " + root + "/evil " + proj + "/.policy.new && mv -T " + proj + "/.policy.new " + proj + "/.policy"

			replies := runServeAs(t, bin, []string{"--policy", proj + "/.policy", "--workdir", proj}, env,
				bashLine("swap", swap), bashLine("echo", "echo ran > "+proj+"/ran"))
			for _, r := range replies {
				if w := text(r); r["is_error"] != true || !strings.Contains(w, "symbolic link "+proj+"/.policy") || !strings.Contains(w, "("+real+")") || !strings.Contains(w, "rule R8") {
					t.Errorf("a command under a policy named through a link it may replace: %v", r)
				}
			}
			if to, err := os.Readlink(proj + "/.policy"); err != nil || to != real {
				t.Errorf("the link the gateway reads through now names %q (%v)", to, err)
			}
			if _, err := os.Stat(proj + "/ran"); err == nil {
				t.Error("a command ran")
			}

			replies = runServeAs(t, bin, []string{"--policy", root + "/links/policy", "--workdir", proj}, env,
				bashLine("echo", "echo ran > "+proj+"/ran"))
			if replies[0]["is_error"] == true {
				t.Errorf("a command under a policy named through a link no command writes: %v", replies[0])
			}
			if b, err := os.ReadFile(filepath.Join(proj, "ran")); err != nil || string(b) != "ran\n" {
				t.Errorf("the command did not run: %q %v", b, err)
			}
		})
	}
}

// TestR8TokensFileIsNotTheCommands: mcp --listen's --tokens file, kept in
// the working directory, where commands may write: a caller's command
// that appends a token of its own leaves the file as it was, since it is
// bound read-only like everything the gateway reads (rule R8).
func TestR8TokensFileIsNotTheCommands(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	wd := t.TempDir()
	pol := strings.Replace(httpPolicy, `"Bash(sleep:*)"`, `"Bash", "Write(./**)"`, 1)
	pol = strings.Replace(pol, `Glob: schema.#Glob,`, `Glob: schema.#Glob, Write: schema.#Write,`, 1)
	dir := moduleDir(t, strings.Replace(pol, `Bash: schema.#Bash & {sandbox: mode: "off"}`, `Bash: schema.#Bash`, 1))
	tokens := tokensFile(t, staticTokens)
	inWd := filepath.Join(wd, "tokens")
	copyFile(t, tokens, inWd)
	os.Chmod(inWd, 0o600)
	before := sum(t, inWd)
	g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", inWd)
	_, _, body := g.post("/mcp", "tok-alice", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"Bash","arguments":{"command":"echo sha256:0000 mallory >> `+inWd+`"}}}`)
	if !strings.Contains(body, `"isError":true`) {
		t.Errorf("a command appended to the tokens file: %s", body)
	}
	if sum(t, inWd) != before {
		t.Error("the tokens file was changed by a command")
	}
	// Where the command may write, it writes: the file alone is bound.
	_, _, body = g.post("/mcp", "tok-alice", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Bash","arguments":{"command":"echo x >> `+wd+`/other"}}}`)
	if _, err := os.Stat(filepath.Join(wd, "other")); err != nil {
		t.Errorf("the working directory is not writable to commands, so the test shows nothing: %s", body)
	}
}
