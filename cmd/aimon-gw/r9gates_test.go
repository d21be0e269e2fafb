package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/policydir"
)

// gateLayout is a home and a project in /var/tmp (nobody can reach them),
// owned by the gateway's user, and a policy beside them whose Bash may
// write where writes says.
func gateLayout(t *testing.T, u gatewayUser, writes ...string) (root, home, proj, policy string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-gates")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	home, proj, policy = root+"/home", root+"/proj", root+"/policy"
	for _, d := range []string{home, proj, root + "/links", root + "/w2"} {
		os.MkdirAll(d, 0o755)
	}
	for i, w := range writes {
		writes[i] = `"` + strings.NewReplacer("ROOT", root).Replace(w) + `"`
	}
	policydir.WriteIn(t, policy, map[string]string{"policy.cue": `package policy

import "aimon.dev/gw/schema"

tools: Bash: schema.#Bash & {sandbox: write: [` + strings.Join(writes, ", ") + `]}
agent: "allowed-tools": ["Bash"]
`})
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return root, home, proj, policy
}

// gateHook asks aimon-gw hook RUNTIME, run as argv in dir with env, about
// a Bash command in proj; it returns the exec line it hands back, failing
// the test on any other answer.
func gateHook(t *testing.T, argv []string, runtime, policy, dir, proj string, env []string, command string) string {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": proj, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": command}, "tool_use_id": "c"})
	h := exec.Command(argv[0], append(argv[1:], "hook", runtime, "--policy", policy, "--cache", "off")...)
	h.Dir, h.Env, h.Stdin = dir, env, strings.NewReader(string(in))
	out, err := h.Output()
	var ans hookAnswer
	if err != nil || json.Unmarshal(out, &ans) != nil {
		t.Fatalf("hook %s: %v: %s", runtime, err, out)
	}
	line, _ := ans.Out.Updated["command"].(string)
	if ans.Out.Decision != "allow" || !strings.Contains(line, "'--ticket'") {
		t.Fatalf("hook %s on %q: %s %q %q", runtime, command, ans.Out.Decision, ans.Out.Reason, line)
	}
	return line
}

// plant is a command that makes each directory and a settings file in it
// (a hook the runtime would run outside every sandbox), then writes ok:
// each step goes on after a refusal.
func plant(ok string, dirs ...string) string {
	var b strings.Builder
	for _, d := range dirs {
		b.WriteString("mkdir -p " + d + "; echo '{\"hooks\":{\"PreToolUse\":[]}}' > " + d + "/settings.json; ")
	}
	return b.String() + "echo ok > " + ok
}

// TestR9MissingGateDirsOfEveryRuntimeAreMadeFirst: whichever runtime's
// hook runs, the gate directories of every runtime that do not exist yet
// — the project's .claude, .codex and .gemini, the home's .claude, .codex
// and .gemini, $CODEX_HOME — are made, empty and read-only in the
// sandbox, before a command that could make them runs, so its settings
// file (a hook another runtime would run outside every sandbox) is never
// written, while its write beside them lands. /etc's managed settings
// directories, where a command may write everywhere: as root they are
// made (readable to all) and stay empty; as nobody neither the gateway nor
// the command can make them. As root and as nobody (rule R9; the hostile
// probe's P2).
func TestR9MissingGateDirsOfEveryRuntimeAreMadeFirst(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		for _, runtime := range []string{"claude-code", "codex"} {
			_, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
			gates := []string{proj + "/.claude", proj + "/.codex", proj + "/.gemini", home + "/.claude", home + "/.codex", home + "/.gemini", home + "/cx"}
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj, "CODEX_HOME="+home+"/cx")
			line := gateHook(t, gw, runtime, policy, proj, proj, env, plant(proj+"/ok", gates...))
			out, _ := runAs(t, u, proj, line)
			for _, d := range gates {
				if _, err := os.Stat(d + "/settings.json"); err == nil {
					t.Errorf("%s: a command made %s first and wrote its settings:\n%s", runtime, d, out)
				}
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
					t.Errorf("%s: %s was not made before the sandbox: %v", runtime, d, err)
				}
			}
			if _, err := os.Stat(proj + "/ok"); err != nil {
				t.Errorf("%s: the command's write beside them did not land, so the test shows nothing:\n%s", runtime, out)
			}
		}

		// A sandbox that writes everywhere, and /etc's directories.
		etc := []string{"/etc/claude-code", "/etc/codex", "/etc/gemini-cli"}
		var absent []string
		// And the gate files root's gateway makes first there: the
		// .mcp.json of the directories above the project.
		for _, d := range append(etc, "/var/.mcp.json", "/var/tmp/.mcp.json") {
			if _, err := os.Lstat(d); err != nil {
				absent = append(absent, d)
			}
		}
		t.Cleanup(func() {
			for _, d := range absent {
				os.Remove(d) // made by this test, empty
			}
		})
		_, home, proj, policy := gateLayout(t, u, "/")
		env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj)
		line := gateHook(t, gw, "codex", policy, proj, proj, env, plant(proj+"/ok", etc...))
		out, _ := runAs(t, u, proj, line)
		for _, d := range etc {
			if _, err := os.Stat(d + "/settings.json"); err == nil {
				os.Remove(d + "/settings.json")
				t.Errorf("a command wrote %s/settings.json:\n%s", d, out)
			}
			// Root's gateway makes them first; nobody's cannot, nor can
			// its command.
			if fi, err := os.Stat(d); u.uid < 0 && os.Geteuid() == 0 && (err != nil || fi.Mode().Perm() != 0o755) {
				t.Errorf("%s was not made before root's sandbox, readable to all: %v %v", d, fi, err)
			}
		}
		if _, err := os.Stat(proj + "/ok"); err != nil {
			t.Errorf("the command's write beside them did not land, so the test shows nothing:\n%s", out)
		}
	})
}

// TestR9ExecProtectsTheConfigDirTheHookSaw: the hook, whose environment
// sets CLAUDE_CONFIG_DIR (absolute, or relative to the project Claude
// Code started in), seals it for exec, which protects it whatever its own
// environment says: run by a shell without the variable, a command that
// writes settings there writes nothing; a tampered --runtime-env is
// refused. As root and as nobody (rule R9; the hostile probe's P4).
func TestR9ExecProtectsTheConfigDirTheHookSaw(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		for _, config := range []string{"PROJ/ccfg", "rel/cfg"} {
			_, home, proj, policy := gateLayout(t, u, "ROOT/proj")
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj, "CLAUDE_CONFIG_DIR="+strings.Replace(config, "PROJ", proj, 1))
			dir := filepath.Join(proj, strings.TrimPrefix(config, "PROJ/"))
			off := "mkdir -p " + dir + "; echo '{\"disableAllHooks\":true}' > " + dir + "/settings.json; echo ok > " + proj + "/ok"
			line := gateHook(t, gw, "claude-code", policy, proj, proj, env, off)
			// Tampered first (the ticket was sealed with the directory),
			// then as the hook handed it back.
			if tampered := strings.Replace(line, "CLAUDE_CONFIG_DIR="+dir, "CLAUDE_CONFIG_DIR="+home, 1); tampered == line {
				t.Errorf("the exec line does not carry the config directory %s: %s", dir, line)
			} else if out, code := runAs(t, u, proj, "env -u CLAUDE_CONFIG_DIR bash -c "+shellQuote(tampered)); code != exitNotRun || !strings.Contains(out, "--runtime-env") {
				t.Errorf("a tampered --runtime-env: %d %s", code, out)
			}
			out, _ := runAs(t, u, proj, "env -u CLAUDE_CONFIG_DIR bash -c "+shellQuote(line))
			if b, err := os.ReadFile(dir + "/settings.json"); err == nil {
				t.Errorf("CLAUDE_CONFIG_DIR=%s: a command wrote %s/settings.json (%s):\n%s", config, dir, b, out)
			}
			if _, err := os.Stat(proj + "/ok"); err != nil {
				t.Errorf("CLAUDE_CONFIG_DIR=%s: the command's write beside it did not land, so the test shows nothing:\n%s", config, out)
			}
		}
	})
}

// TestR9TheGatewaysOwnLinkIsNotTheCommands: the runtime's settings start
// the hook through a symbolic link to the gateway that lies where the
// policy's commands write: a command that repoints it (a link and a
// rename over it) would make the next hook its own program, so exec runs
// no command, with a sentence that names the link and the real path, and
// the link still names the gateway. Started through a link where no
// command writes, the command runs. As root and as nobody (rules R8, R9;
// the hostile probe's P12).
func TestR9TheGatewaysOwnLinkIsNotTheCommands(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		root, home, proj, policy := gateLayout(t, u, "ROOT/proj", "ROOT/w2")
		env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj)
		for _, dir := range []string{root + "/w2", root + "/links"} {
			link := dir + "/gwlink"
			if err := os.Symlink(bin, link); err != nil {
				t.Fatal(err)
			}
			if u.uid >= 0 {
				os.Lchown(link, u.uid, u.gid)
			}
			argv := append(append([]string{}, u.prefix...), link)
			swap := "ln -s /bin/true " + link + ".new && mv -T " + link + ".new " + link + "; echo ran > " + proj + "/ran"
			line := gateHook(t, argv, "claude-code", policy, proj, proj, env, swap)
			out, code := runAs(t, u, proj, line)
			_, ran := os.Stat(proj + "/ran")
			switch writable := dir == root+"/w2"; {
			case writable && (code != exitNotRun || !strings.Contains(out, "symbolic link "+link) || !strings.Contains(out, "("+bin+")") || !strings.Contains(out, "rule")):
				t.Errorf("a command under a hook started through a link it may replace: %d %s", code, out)
			case writable && ran == nil:
				t.Error("a command ran")
			case !writable && ran != nil:
				t.Errorf("a command under a hook started through a link no command writes did not run (%v): %d %s", ran, code, out)
			}
			if to, err := os.Readlink(link); err != nil || to != bin {
				t.Errorf("the link the runtime starts the gateway by now names %q (%v)", to, err)
			}
		}
	})
}

// TestR9ServeKeepsEveryRuntimesGateFiles: serve, whose Write may write the
// home and the working directory and whose Bash may write there too,
// refuses a Write of each runtime's settings there (Claude Code's,
// Codex's, Gemini CLI's, their directories absent), and a command that
// makes those directories and fills them writes nothing, while its write
// beside them lands: an agent served by the gateway plants no hook that
// a runtime started there later runs outside every sandbox. As root and
// as nobody (rule R9; the hostile probe's P2).
func TestR9ServeKeepsEveryRuntimesGateFiles(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		_, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
		os.WriteFile(policy+"/policy.cue", []byte(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Bash: schema.#Bash}
agent: "allowed-tools": ["Bash", "Write(`+home+`/**)", "Write(`+proj+`/**)"]
`), 0o644)
		files := []string{home + "/.claude/settings.json", home + "/.codex/config.toml", home + "/.gemini/settings.json",
			proj + "/.claude/settings.json", proj + "/.codex/config.toml", proj + "/.gemini/settings.json"}
		var lines []string
		for i, f := range files {
			lines = append(lines, toolLine(strconv.Itoa(i), "Write", map[string]any{"file_path": f, "content": `{"hooks":{}}`}))
		}
		lines = append(lines, bashLine("plant", plant(proj+"/ok", proj+"/.claude", proj+"/.codex", proj+"/.gemini", home+"/.claude", home+"/.codex", home+"/.gemini")))
		replies := runServeAs(t, gw, []string{"--policy", policy, "--workdir", proj}, []string{"HOME=" + home}, lines...)
		for i, f := range files {
			if r := replies[i]; r["is_error"] != true || !strings.Contains(text(r), "rule R9") {
				t.Errorf("a Write of %s: %v", f, r)
			}
		}
		for _, f := range append(files, proj+"/.claude/settings.json", proj+"/.codex/settings.json", proj+"/.gemini/settings.json", home+"/.codex/settings.json") {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was written", f)
			}
		}
		if _, err := os.Stat(proj + "/ok"); err != nil {
			t.Errorf("the command's write beside them did not land, so the test shows nothing: %v", replies[len(files)])
		}
	})
}
