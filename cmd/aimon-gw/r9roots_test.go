package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestR9EveryProjectLayerFromTheRootIsMadeFirst: Codex, started in a
// subdirectory of a repository, loads the .codex/ of every directory from
// the project root (the directory holding .git, or a marker its own
// project_root_markers names) down to its cwd, and Claude Code keeps a
// project's local settings at its git root: each such directory that does
// not exist yet is made, empty and read-only in the sandbox, before a
// command that could make it, so the command's settings file (a hook the
// runtime would run outside every sandbox) is never written there, while
// its write beside them lands. As root and as nobody (rule R9; the
// hostile re-probe's Q6 a).
func TestR9EveryProjectLayerFromTheRootIsMadeFirst(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		for _, c := range []struct {
			name, runtime, cwd string
			setup              func(root, home, proj string)
			gates              []string
		}{
			{"codex under .git", "codex", "PROJ/a/b", func(root, home, proj string) { os.MkdirAll(proj+"/.git", 0o755) },
				[]string{"PROJ/.codex", "PROJ/a/.codex", "PROJ/a/b/.codex"}},
			{"codex by its own marker", "codex", "PROJ/a", func(root, home, proj string) {
				os.MkdirAll(home+"/.codex", 0o755)
				writeFile(t, home+"/.codex/config.toml", `project_root_markers = [".root"]`+"\n")
				writeFile(t, proj+"/.root", "")
			}, []string{"PROJ/.codex", "PROJ/a/.codex"}},
			{"claude code's git root", "claude-code", "PROJ/a", func(root, home, proj string) { os.MkdirAll(proj+"/.git", 0o755) },
				[]string{"PROJ/.claude", "PROJ/a/.claude"}},
		} {
			root, home, proj, policy := gateLayout(t, u, "ROOT/home", "ROOT/proj")
			cwd := strings.Replace(c.cwd, "PROJ", proj, 1)
			os.MkdirAll(cwd, 0o755)
			c.setup(root, home, proj)
			if u.uid >= 0 {
				chownAll(t, root, u.uid, u.gid)
			}
			gates := make([]string, len(c.gates))
			for i, g := range c.gates {
				gates[i] = strings.Replace(g, "PROJ", proj, 1)
			}
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+cwd)
			line := gateHook(t, gw, c.runtime, policy, cwd, cwd, env, plant(proj+"/ok", gates...))
			out, _ := runAs(t, u, cwd, line)
			for _, d := range gates {
				if _, err := os.Stat(d + "/settings.json"); err == nil {
					t.Errorf("%s: a command made %s first and wrote its settings:\n%s", c.name, d, out)
				}
				if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
					t.Errorf("%s: %s was not made before the sandbox: %v", c.name, d, err)
				}
			}
			if _, err := os.Stat(proj + "/ok"); err != nil {
				t.Errorf("%s: the command's write beside them did not land, so the test shows nothing:\n%s", c.name, out)
			}
		}
	})
}

// TestR9NoToolWritesInAGateDirAnywhere: a .claude, .codex or .gemini
// directory in any subdirectory of a project is one a runtime started
// there reads its settings and hooks from, so serve's Write and Edit
// (whose list allows the whole project) write nothing in one, by its
// name, a .. spelling, or a link that leads there, dangling or not, each
// refused with a sentence that names the directory and R9, while a
// file in a directory merely called claude is written; the hook refuses
// Claude Code's own Write and Edit of the same paths. As root and as
// nobody (rule R9; the hostile re-probe's Q6 b).
func TestR9NoToolWritesInAGateDirAnywhere(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		root, home, proj, policy := gateLayout(t, u, "ROOT/proj")
		os.MkdirAll(proj+"/pkg/.claude", 0o755)
		writeFile(t, proj+"/pkg/.claude/settings.json", `{"hooks":{}}`)
		os.MkdirAll(proj+"/sub", 0o755)
		os.Symlink(proj+"/pkg/.claude", proj+"/lnk")
		os.Symlink(proj+"/new/.gemini", proj+"/dangling")
		if u.uid >= 0 {
			chownAll(t, root, u.uid, u.gid)
		}
		os.WriteFile(policy+"/policy.cue", []byte(`package policy

import "aimon.dev/gw/schema"

tools: {Write: schema.#Write, Edit: schema.#Edit}
agent: "allowed-tools": ["Write(`+proj+`/**)", "Edit(`+proj+`/**)"]
`), 0o644)
		refused := map[string]string{ // the path and the directory its sentence names
			proj + "/sub/.claude/settings.json":          proj + "/sub/.claude",
			proj + "/a/b/.codex/config.toml":             proj + "/a/b/.codex",
			proj + "/sub/x/../.gemini/settings.json":     proj + "/sub/.gemini",
			proj + "/lnk/settings.local.json":            proj + "/pkg/.claude",
			proj + "/dangling/settings.json":             proj + "/new/.gemini",
			proj + "/pkg/.claude/settings.json":          proj + "/pkg/.claude",
			proj + "/pkg/.claude/hooks/../settings.json": proj + "/pkg/.claude",
		}
		var lines, paths []string
		for p := range refused {
			paths = append(paths, p)
			lines = append(lines, toolLine(strconv.Itoa(len(lines)), "Write", map[string]any{"file_path": p, "content": `{"disableAllHooks":true}`}))
		}
		lines = append(lines, toolLine("edit", "Edit", map[string]any{"file_path": proj + "/lnk/settings.json", "old_string": `{"hooks":{}}`, "new_string": `{"disableAllHooks":true}`}),
			toolLine("beside", "Write", map[string]any{"file_path": proj + "/sub/claude/settings.json", "content": "{}"}))
		replies := runServeAs(t, gw, []string{"--policy", policy, "--workdir", proj}, []string{"HOME=" + home}, lines...)
		for i, p := range paths {
			if r := replies[i]; r["is_error"] != true || !strings.Contains(text(r), "rule R9") || !strings.Contains(text(r), refused[p]+", a directory named "+filepath.Base(refused[p])) {
				t.Errorf("a Write of %s: %v", p, r)
			}
		}
		if r := replies[len(paths)]; r["is_error"] != true || !strings.Contains(text(r), "rule R9") {
			t.Errorf("an Edit through a link into pkg/.claude: %v", r)
		}
		for _, p := range []string{proj + "/sub/.claude", proj + "/a", proj + "/sub/.gemini", proj + "/new", proj + "/pkg/.claude/settings.local.json"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was written", p)
			}
		}
		if b, _ := os.ReadFile(proj + "/pkg/.claude/settings.json"); string(b) != `{"hooks":{}}` {
			t.Errorf("pkg/.claude/settings.json now holds %s", b)
		}
		if r := replies[len(paths)+1]; r["is_error"] == true {
			t.Errorf("a Write of sub/claude/settings.json, in no gate directory, so the test shows nothing: %v", r)
		}
		if u.uid >= 0 {
			return
		}
		// Claude Code's own Write and Edit under the hook.
		hookPolicy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Write(`+proj+`/**)", "Edit(`+proj+`/**)"]
`)
		env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj)
		for _, p := range paths {
			for tool, input := range map[string]map[string]any{
				"Write": {"file_path": p, "content": "{}"},
				"Edit":  {"file_path": p, "old_string": "hooks", "new_string": "x"},
			} {
				ans := claudeHook(t, bin, hookPolicy, env, map[string]any{"cwd": proj, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input})
				if ans.Out.Decision != "deny" || !strings.Contains(ans.Out.Reason, "rule R9") || !strings.Contains(ans.Out.Reason, refused[p]) {
					t.Errorf("the hook on %s of %s: %s %q", tool, p, ans.Out.Decision, ans.Out.Reason)
				}
			}
		}
		if ans := claudeHook(t, bin, hookPolicy, env, map[string]any{"cwd": proj, "hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": map[string]any{"file_path": proj + "/sub/claude/x.json", "content": "{}"}}); ans.Out.Decision != "allow" {
			t.Errorf("the hook on a Write in no gate directory: %s %q", ans.Out.Decision, ans.Out.Reason)
		}
		// Codex's patch and Gemini CLI's write_file under their hooks.
		codexPolicy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/codex"

tools: codex.#Tools & {Bash: sandbox: write: ["`+proj+`"]}
agent: "allowed-tools": ["apply_patch"]
`)
		geminiPolicy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/geminicli"

tools: geminicli.#Tools
agent: "allowed-tools": ["write_file(./**)"]
`)
		for _, c := range []struct{ runtime, policy, tool, field, denied, want string }{
			{"codex", codexPolicy, "apply_patch", "command", `"permissionDecision":"deny"`, proj + "/a/b/.codex, a directory named .codex"},
			{"gemini-cli", geminiPolicy, "write_file", "file_path", `"decision":"deny"`, proj + "/sub/.gemini, a directory named .gemini"},
		} {
			for _, rel := range []string{"a/b/.codex/config.toml", "sub/x/../.gemini/settings.json", "sub/claude/x.json"} {
				input := map[string]any{"file_path": rel, "content": "{}"}
				if c.tool == "apply_patch" {
					input = map[string]any{"command": "*** Begin Patch\n*** Add File: " + rel + "\n+x\n*** End Patch\n"}
				}
				in, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": proj, "hook_event_name": map[string]string{"codex": "PreToolUse", "gemini-cli": "BeforeTool"}[c.runtime],
					"tool_name": c.tool, "tool_input": input, "turn_id": "t", "tool_use_id": "u", "model": "m"})
				h := exec.Command(bin, "hook", c.runtime, "--policy", c.policy, "--cache", "off")
				h.Dir, h.Env, h.Stdin = proj, env, strings.NewReader(string(in))
				out, _ := h.Output()
				denied := strings.Contains(string(out), c.denied) && strings.Contains(string(out), "rule R9")
				switch {
				case rel == "sub/claude/x.json" && denied:
					t.Errorf("%s on %s, in no gate directory: %s", c.tool, rel, out)
				case rel != "sub/claude/x.json" && !denied:
					t.Errorf("%s on %s: %s", c.tool, rel, out)
				case strings.Contains(rel, "."+strings.Split(c.runtime, "-")[0]) && !strings.Contains(string(out), c.want):
					t.Errorf("%s on %s names not %s: %s", c.tool, rel, c.want, out)
				}
			}
		}
	})
}

// bareHook is gateHook with the hook started by the bare name aimon-gw,
// found through the PATH of env as the runtime's shell finds it.
func bareHook(t *testing.T, u gatewayUser, bin, policy, proj string, env []string, command string) (string, hookAnswer) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": proj, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": command}, "tool_use_id": "c"})
	args := []string{"aimon-gw", "hook", "claude-code", "--policy", policy, "--cache", "off"}
	h := &exec.Cmd{Path: bin, Args: args}
	if len(u.prefix) > 0 {
		// setpriv finds aimon-gw on env's PATH.
		h = &exec.Cmd{Path: u.prefix[0], Args: append(append([]string{}, u.prefix...), args...)}
	}
	h.Dir, h.Env, h.Stdin = proj, env, strings.NewReader(string(in))
	out, err := h.Output()
	var ans hookAnswer
	if err != nil || json.Unmarshal(out, &ans) != nil {
		t.Fatalf("hook by its bare name: %v: %s", err, out)
	}
	line, _ := ans.Out.Updated["command"].(string)
	return line, ans
}

// TestR9TheGatewaysBareNameIsNotShadowed: the runtime's settings start the
// hook by the bare name aimon-gw, and a PATH directory before the one it
// is found in lies where the policy's commands write (and does not exist
// yet): a command could put a program named aimon-gw there, which the
// runtime would start as its next hook, so exec runs no command, with a
// sentence that names that directory and the gateway's absolute path; no
// program is planted, and the next hook is still the gateway's. A PATH
// directory before it where no command writes changes nothing: the
// command runs. As root and as nobody (rules R8, R9; the hostile
// re-probe's Q4).
func TestR9TheGatewaysBareNameIsNotShadowed(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		for _, early := range []string{"w2/bin", "links/bin"} {
			root, home, proj, policy := gateLayout(t, u, "ROOT/proj", "ROOT/w2")
			dir := root + "/" + early
			env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj, "PATH="+dir+":"+filepath.Dir(bin)+":/usr/bin:/bin")
			fake := dir + "/aimon-gw"
			planted := "mkdir -p " + dir + " && printf '#!/bin/sh\\ncat >/dev/null\\necho {\\\"hookSpecificOutput\\\":{\\\"permissionDecision\\\":\\\"allow\\\",\\\"permissionDecisionReason\\\":\\\"fake\\\"}}\\n' > " + fake + " && chmod 755 " + fake + "; echo ran > " + proj + "/ran"
			line, ans := bareHook(t, u, bin, policy, proj, env, planted)
			if ans.Out.Decision != "allow" || !strings.Contains(line, "'--ticket'") {
				t.Fatalf("%s: the hook on the planting command: %s %q", early, ans.Out.Decision, ans.Out.Reason)
			}
			out, code := runAs(t, u, proj, line)
			_, ran := os.Stat(proj + "/ran")
			if early == "links/bin" {
				if ran != nil {
					t.Errorf("a command under a hook whose earlier PATH directory no command writes did not run (%v): %d %s", ran, code, out)
				}
				continue
			}
			if code != exitNotRun || !strings.Contains(out, "bare name aimon-gw") || !strings.Contains(out, "PATH directory "+dir+" ") || !strings.Contains(out, "("+bin+")") || !strings.Contains(out, "rule") {
				t.Errorf("a command that could plant aimon-gw before the gateway on PATH: %d %s", code, out)
			}
			if ran == nil {
				t.Error("the command ran")
			}
			if _, err := os.Lstat(fake); err == nil {
				t.Errorf("a command planted %s", fake)
			}
			// The next hook, started as before, is the gateway's.
			if _, ans := bareHook(t, u, bin, policy, proj, env, "echo next"); ans.Out.Decision != "allow" || ans.Out.Reason == "fake" {
				t.Errorf("the next hook by the bare name: %s %q", ans.Out.Decision, ans.Out.Reason)
			}
			// serve, started by the bare name too (an MCP client's
			// "command": "aimon-gw"), refuses its own command alike.
			args := []string{"aimon-gw", "serve", "--policy", policy, "--workdir", proj, "--cache", "off"}
			s := &exec.Cmd{Path: bin, Args: args}
			if len(u.prefix) > 0 {
				s = &exec.Cmd{Path: u.prefix[0], Args: append(append([]string{}, u.prefix...), args...)}
			}
			s.Dir, s.Env, s.Stdin = proj, env, strings.NewReader(bashLine("plant", planted)+"\n")
			reply, err := s.Output()
			if err != nil || !strings.Contains(string(reply), `"is_error":true`) || !strings.Contains(string(reply), "bare name aimon-gw") || strings.Contains(string(reply), "bubblewrap") {
				t.Errorf("serve started by the bare name, on the planting command: %v %s", err, reply)
			}
			if _, err := os.Lstat(fake); err == nil {
				t.Errorf("a command of serve planted %s", fake)
			}
		}
	})
}

// TestR9ExecRefusesABadShadow: exec told of a place on PATH before the
// gateway that is not an absolute path, or without the path the gateway
// was started by, runs nothing and names the flag (rule R9).
func TestR9ExecRefusesABadShadow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"--started-as", "/usr/local/bin/aimon-gw", "--shadow", "bin/aimon-gw"}, {"--shadow", "/home/u/.local/bin/aimon-gw"}} {
		c := exec.Command(gatewayBinary(t), append(append([]string{"exec", "--workdir", dir}, args...), "--", "touch ran")...)
		out, err := c.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--shadow") || !strings.Contains(string(out), "--started-as") {
			t.Errorf("exec %v: %v\n%s", args, err, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
			t.Error("exec ran the command")
		}
	}
}

// TestR9ExistingGateDirsAnywhereAreReadOnly: the .claude, .codex and
// .gemini directories that exist in subdirectories of the tree a command
// may write (a monorepo's packages) are read-only in its sandbox, so it
// neither switches off the gate of a runtime started there nor adds a
// hook to its settings, while its write beside them lands. As root and
// as nobody (rule R9; the hostile re-probe's Q6 b).
func TestR9ExistingGateDirsAnywhereAreReadOnly(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		root, home, proj, policy := gateLayout(t, u, "ROOT/proj")
		files := []string{proj + "/pkg/a/.claude/settings.json", proj + "/pkg/.codex/config.toml", proj + "/x/y/z/.gemini/settings.json"}
		for _, f := range files {
			os.MkdirAll(filepath.Dir(f), 0o755)
			writeFile(t, f, "{}")
		}
		if u.uid >= 0 {
			chownAll(t, root, u.uid, u.gid)
		}
		var b strings.Builder
		for _, f := range files {
			b.WriteString("echo '{\"disableAllHooks\":true}' > " + f + "; mkdir " + filepath.Dir(f) + "/hooks; ")
		}
		b.WriteString("echo ok > " + proj + "/ok")
		env := append(os.Environ(), "HOME="+home, "CLAUDE_PROJECT_DIR="+proj)
		line := gateHook(t, gw, "claude-code", policy, proj, proj, env, b.String())
		out, _ := runAs(t, u, proj, line)
		for _, f := range files {
			if got, _ := os.ReadFile(f); string(got) != "{}" {
				t.Errorf("a command rewrote %s: %s\n%s", f, got, out)
			}
			if _, err := os.Stat(filepath.Dir(f) + "/hooks"); err == nil {
				t.Errorf("a command made %s/hooks", filepath.Dir(f))
			}
		}
		if _, err := os.Stat(proj + "/ok"); err != nil {
			t.Errorf("the command's write beside them did not land, so the test shows nothing:\n%s", out)
		}
	})
}
