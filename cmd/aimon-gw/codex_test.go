package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/codex"
)

// codexHookPolicy is the hook's policy of the Codex tests: Codex's own
// shell and patch tools, and the MCP server's tools, by name. Codex has
// no file tool with a path to derive the sandbox's writable directories
// from, so its shell's sandbox names the project (PROJECT).
const codexHookPolicy = `package policy

import "aimon.dev/gw/schema/codex"

tools: codex.#Tools & {Bash: sandbox: write: ["PROJECT"]}
agent: "allowed-tools": ["Bash(touch:*)", "Bash(rm:*)", "Bash(cp:*)", "apply_patch", "mcp__aimon__Echo", "mcp__aimon__Bash"]
agent: "denied-tools": ["Bash(rm:*)"]
`

// codexRun is one codex exec run of the real CLI in a project of its
// own, configured as the README's Codex section says.
type codexRun struct {
	t             *testing.T
	project, home string // home is CODEX_HOME, ~/.codex of the run's HOME
	hookPolicy    string
	mcpPolicy     string
	server        *codex.Server
	// untrusted runs codex exec without --dangerously-bypass-hook-trust;
	// sandbox is its --sandbox instead of danger-full-access.
	untrusted bool
	sandbox   string
}

func newCodexRun(t *testing.T, hookPolicy string) *codexRun {
	t.Helper()
	codex.Find(t, "../../.ci/npm/node_modules/.bin/codex")
	root, _ := filepath.EvalSymlinks(t.TempDir())
	r := &codexRun{t: t, project: filepath.Join(root, "proj"), home: filepath.Join(root, "home", ".codex"),
		mcpPolicy: moduleDir(t, agentMCPPolicy)}
	r.hookPolicy = moduleDir(t, strings.ReplaceAll(hookPolicy, "PROJECT", r.project))
	for _, d := range []string{r.project, r.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// config is the README's Codex block n, for this run's gateway, policies
// and URL, with extra appended (a key of the last table).
func (r *codexRun) config(n int, url, extra string) string {
	bin := gatewayBinary(r.t)
	return readmeSetup(r.t, "Codex", "toml", n,
		`"/usr/local/bin/aimon-gw hook codex --policy /etc/aimon-gw/codex"`, `"`+shellQuote(bin)+` hook codex --policy `+shellQuote(r.hookPolicy)+`"`,
		`command = "/usr/local/bin/aimon-gw"`, `command = "`+bin+`"`,
		"/etc/aimon-gw/tools", r.mcpPolicy,
		"https://gw.example.com/mcp", url) + "\n" + extra
}

// run runs codex exec on the prompt key with the script, under config
// (the hook's block and an MCP server's), with env added.
func (r *codexRun) run(config string, script codex.Script, env ...string) string {
	r.t.Helper()
	r.server = codex.Serve(r.t, script)
	return r.again(config, script.Key, env...)
}

// again runs codex exec on the prompt key against the same server, under
// config, or, with config "", under the config.toml the last run left.
func (r *codexRun) again(config, key string, env ...string) string {
	r.t.Helper()
	ctx, cancel := withTimeout(3 * time.Minute)
	defer cancel()
	out, err := codex.Run{Codex: codex.Find(r.t, "../../.ci/npm/node_modules/.bin/codex"), Project: r.project, Home: r.home,
		Prompt: key, Config: config, Env: env,
		Args: r.flags()}.Start(ctx, r.server)
	if err != nil {
		r.t.Fatalf("codex exec: %v\n%s", err, out)
	}
	return out
}

// flags are the README's codex exec flags.
func (r *codexRun) flags() []string {
	flags := []string{"--sandbox", "danger-full-access"}
	if r.sandbox != "" {
		flags[1] = r.sandbox
	}
	if r.untrusted {
		return flags
	}
	// codex exec cannot ask to trust a hook of config.toml (README).
	return append(flags, "--dangerously-bypass-hook-trust")
}

func call(name string, kv ...any) codex.Call { return codex.Call{Name: name, Args: kvArgs(kv...)} }

func patch(body string) codex.Call {
	return codex.Call{Name: "apply_patch", Input: "*** Begin Patch\n" + body + "*** End Patch\n"}
}

// wantOutputs checks that what the CLI sent the model back for each call of
// key holds the sentence given for it.
func wantOutputs(t *testing.T, s *codex.Server, key string, want map[[2]int]string) {
	t.Helper()
	wantSaid(t, key, codex.ID, s.Said, want)
}

// TestR7CodexHookHolds drives the real Codex with aimon-gw as its
// PreToolUse hook and its MCP server over standard input, configured as
// the README says: an allowed command runs, through aimon-gw exec, whose
// sandbox keeps an allowed touch outside the project from writing, and
// an allowed patch writes its file; a denied or unlisted command and a
// tool the policy does not mention change nothing, and the model gets
// the gateway's sentence for each; the MCP server's Echo answers, a call
// outside Echo's bound or with a parameter Echo has not is refused with
// the gate's sentence, and a call Codex stops waiting for has its sleep
// killed (rules R7, R2, S1).
func TestR7CodexHookHolds(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	r := newCodexRun(t, codexHookPolicy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	writeFile(t, p("kept.txt"), "kept")
	// Bash(touch:*) allows it; exec's sandbox, which writes only the
	// project, keeps it from landing: the command Codex ran was wrapped.
	outside := filepath.Join(filepath.Dir(r.project), "outside.txt")
	sleep := watchFor("sleep 13.125")
	r.run(r.config(0, "", "tool_timeout_sec = 2\n"), codex.Script{Key: "MAIN", Turns: [][]codex.Call{
		{call("exec_command", "cmd", "touch made.txt")},
		{call("exec_command", "cmd", "rm kept.txt")},
		{call("exec_command", "cmd", "mkdir unlisted")},
		{patch("*** Add File: patched.txt\n+patched\n")},
		{call("view_image", "path", p("x.png"))},
		{call("mcp__aimon__Echo", "message", "hi", "times", 2)},
		{call("mcp__aimon__Echo", "message", "hi", "times", 9)},
		{call("mcp__aimon__Echo", "message", "hi", "bogus", true)},
		{call("mcp__aimon__Bash", "command", "sleep 13.125")},
		{call("exec_command", "cmd", "touch "+outside)},
	}})
	sleep.gone(t)
	wantExist(t, map[string]bool{p("made.txt"): true, p("kept.txt"): true, p("unlisted"): false, p("patched.txt"): true, outside: false})
	wantOutputs(t, r.server, "MAIN", map[[2]int]string{
		{1, 0}: "is denied on this surface by Bash(rm:*)",
		{2, 0}: "is not allowed on this surface",
		{4, 0}: "does not mention view_image",
		{5, 0}: "hihi",
		{6, 0}: "times",
		{7, 0}: "Unknown parameter 'bogus'",
		{8, 0}: "timed out",
	})
}

// TestR2CodexMCPOverHTTP drives the real Codex against aimon-gw mcp
// --listen, configured as the README's HTTP block says: Echo answers, a
// call Codex stops waiting for has its sleep killed over stateless HTTP
// as over standard input, and with a wrong token Codex leaves the server
// out and the model gets Codex's own "unsupported call" (rules R2, R10).
func TestR2CodexMCPOverHTTP(t *testing.T) {
	t.Parallel()
	r := newCodexRun(t, codexHookPolicy)
	g := startHTTP(t, http.DefaultClient, "--policy", r.mcpPolicy, "--workdir", r.project, "--tokens", tokensFile(t, staticTokens))
	config := r.config(1, g.base+"/mcp", "tool_timeout_sec = 2\n")
	sleep := watchFor("sleep 13.375")
	r.run(config, codex.Script{Key: "HTTP", Turns: [][]codex.Call{
		{call("mcp__aimon__Echo", "message", "hi", "times", 3)},
		{call("mcp__aimon__Bash", "command", "sleep 13.375")},
	}}, "AIMON_GW_TOKEN=tok-alice")
	sleep.gone(t)
	wantOutputs(t, r.server, "HTTP", map[[2]int]string{{0, 0}: "hihihi", {1, 0}: "timed out"})
	r.run(config, codex.Script{Key: "WRONG", Turns: [][]codex.Call{
		{call("mcp__aimon__Echo", "message", "hi")},
	}}, "AIMON_GW_TOKEN=tok-wrong")
	wantOutputs(t, r.server, "WRONG", map[[2]int]string{{0, 0}: "unsupported call: mcp__aimonEcho"})
	if slices.Contains(r.server.Tools(), "mcp__aimon") {
		t.Errorf("with a wrong token Codex still offered the server's tools: %v", r.server.Tools())
	}
}

// TestR9CodexCannotSwitchTheGateOff: the real Codex, whose lists allow cp
// and apply_patch, cannot rewrite the configuration that makes it call
// the hook: a cp of a config.toml without the hook over
// $CODEX_HOME/config.toml or into $CODEX_HOME/hooks.json fails on a
// read-only file, a patch that updates or deletes it, or adds
// .codex/config.toml with hooks = false to the project, is refused
// naming R9, and a cp into the project's .codex/ fails too; the
// config.toml is as written, and the next session still runs the hook:
// its rm stays denied and the file stays (rule R9).
func TestR9CodexCannotSwitchTheGateOff(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	r := newCodexRun(t, codexHookPolicy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	writeFile(t, p("kept.txt"), "kept")
	writeFile(t, p("off.toml"), "[features]\nhooks = false\n")
	config := filepath.Join(r.home, "config.toml")
	r.server = codex.Serve(t, codex.Script{Key: "MAIN", Turns: [][]codex.Call{
		{call("exec_command", "cmd", "cp off.toml "+config)},
		{call("exec_command", "cmd", "cp off.toml "+filepath.Join(r.home, "hooks.json"))},
		{patch("*** Update File: " + config + "\n@@\n-[[hooks.PreToolUse]]\n+[features]\n")},
		{patch("*** Delete File: " + config + "\n")},
		{patch("*** Add File: .codex/config.toml\n+[features]\n+hooks = false\n")},
		{call("exec_command", "cmd", "cp off.toml .codex/config.toml")},
		{call("exec_command", "cmd", "rm kept.txt")},
	}}, codex.Script{Key: "NEXT", Turns: [][]codex.Call{
		{call("exec_command", "cmd", "rm kept.txt")},
	}})
	r.again(r.config(0, "", ""), "MAIN")
	before, _ := os.ReadFile(config)
	r.again("", "NEXT")
	if after, err := os.ReadFile(config); err != nil || string(after) != string(before) || !strings.Contains(string(after), "hook codex") {
		t.Errorf("config.toml was rewritten: %q %v", after, err)
	}
	wantExist(t, map[string]bool{filepath.Join(r.home, "hooks.json"): false, p(".codex/config.toml"): false, p("kept.txt"): true})
	wantOutputs(t, r.server, "MAIN", map[[2]int]string{
		{0, 0}: "Read-only file system",
		{1, 0}: "Read-only file system",
		{2, 0}: "rule R9",
		{3, 0}: "rule R9",
		{4, 0}: "rule R9",
		{5, 0}: "Read-only file system",
		{6, 0}: "is denied on this surface",
	})
	wantOutputs(t, r.server, "NEXT", map[[2]int]string{{0, 0}: "is denied on this surface"})
}

// TestR7CodexSetupTraps holds the README's traps for codex exec: without
// default_tools_approval_mode = "approve", Codex under a sandbox of its
// own refuses the call of an MCP tool that is not read-only itself
// (Bash), and calls Echo, whose annotations say it reads only; without --dangerously-bypass-hook-trust
// the hook of config.toml is skipped without a word, and the rm the
// policy denies runs.
func TestR7CodexSetupTraps(t *testing.T) {
	t.Parallel()
	r := newCodexRun(t, codexHookPolicy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	writeFile(t, p("kept.txt"), "kept")
	r.server = codex.Serve(t, codex.Script{Key: "NOAPPROVE", Turns: [][]codex.Call{
		{call("mcp__aimon__Echo", "message", "hi", "times", 2)},
		{call("mcp__aimon__Bash", "command", "sleep 0.125")},
	}}, codex.Script{Key: "UNTRUSTED", Turns: [][]codex.Call{
		{call("exec_command", "cmd", "rm kept.txt")},
	}})
	r.sandbox = "read-only"
	r.again(strings.Replace(r.config(0, "", ""), `default_tools_approval_mode = "approve"`, "", 1), "NOAPPROVE")
	r.sandbox = ""
	wantOutputs(t, r.server, "NOAPPROVE", map[[2]int]string{
		{0, 0}: "hihi",
		{1, 0}: "MCP tool call requires approval, but approval policy is never",
	})
	r.untrusted = true
	r.again(r.config(0, "", ""), "UNTRUSTED")
	wantExist(t, map[string]bool{p("kept.txt"): false})
}
