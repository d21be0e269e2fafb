package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/geminicli"
)

// geminiHookPolicy is the hook's policy of the Gemini CLI tests: Gemini's
// own tools, and the MCP server's tools, by name.
const geminiHookPolicy = `package policy

import "aimon.dev/gw/schema/geminicli"

tools: geminicli.#Tools
agent: "allowed-tools": ["run_shell_command(touch:*)", "run_shell_command(rm:*)", "run_shell_command(cp:*)", "write_file(./**)", "read_file(./**)", "replace(./**)", "mcp__aimon__Echo", "mcp__aimon__Bash"]
agent: "denied-tools": ["run_shell_command(rm:*)", "write_file(./secret/**)"]
`

// geminiRun is one gemini -p run of the real CLI in a project of its own,
// configured as the README's Gemini CLI section says.
type geminiRun struct {
	t             *testing.T
	project, home string
	hookPolicy    string
	mcpPolicy     string
	server        *geminicli.Server
	args          []string // more of gemini's flags
	noYolo        bool     // run without --yolo
}

func newGeminiRun(t *testing.T, hookPolicy string) *geminiRun {
	t.Helper()
	geminicli.Find(t, "../../.ci/npm/node_modules/.bin/gemini")
	root, _ := filepath.EvalSymlinks(t.TempDir())
	r := &geminiRun{t: t, project: filepath.Join(root, "proj"), home: filepath.Join(root, "home"),
		mcpPolicy: moduleDir(t, agentMCPPolicy)}
	r.hookPolicy = moduleDir(t, strings.ReplaceAll(hookPolicy, "HOMEDIR", r.home))
	for _, d := range []string{r.project, r.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// settings is the README's Gemini CLI block n, for this run's gateway,
// policies and URL, with the MCP server's call timeout set to 2 s.
func (r *geminiRun) settings(n int, url string) map[string]any {
	bin := gatewayBinary(r.t)
	text := readmeSetup(r.t, "Gemini CLI", "json", n,
		`"/usr/local/bin/aimon-gw hook gemini-cli --policy /etc/aimon-gw/gemini-cli"`, strconvQuote(shellQuote(bin)+` hook gemini-cli --policy `+shellQuote(r.hookPolicy)),
		`"command": "/usr/local/bin/aimon-gw"`, `"command": `+strconvQuote(bin),
		"/etc/aimon-gw/tools", r.mcpPolicy,
		"https://gw.example.com/mcp", url)
	var settings map[string]any
	if err := json.Unmarshal([]byte(text), &settings); err != nil {
		r.t.Fatalf("the README's Gemini CLI block %d is not JSON: %v\n%s", n, err, text)
	}
	settings["mcpServers"].(map[string]any)["aimon"].(map[string]any)["timeout"] = 2000
	return settings
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// run runs gemini -p on the prompt key with the scripts against one
// server, under settings (nil: those the last run left), with env added.
func (r *geminiRun) run(settings map[string]any, key string, env ...string) string {
	r.t.Helper()
	ctx, cancel := withTimeout(3 * time.Minute)
	defer cancel()
	out, err := geminicli.Run{Gemini: geminicli.Find(r.t, "../../.ci/npm/node_modules/.bin/gemini"), Project: r.project, Home: r.home,
		Prompt: key, Settings: settings, Env: env,
		// -p asks no one: --yolo leaves each call to the hook (README).
		Args: append(r.flags(), r.args...)}.Start(ctx, r.server)
	if err != nil {
		r.t.Fatalf("gemini -p: %v\n%s", err, out)
	}
	return out
}

// flags are the README's gemini flags, --yolo left off by noYolo.
func (r *geminiRun) flags() []string {
	flags := []string{"--skip-trust", "-m", "gemini-2.5-pro"}
	if r.noYolo {
		return flags
	}
	return append(flags, "--yolo")
}

func gcall(name string, kv ...any) geminicli.Call {
	return geminicli.Call{Name: name, Args: kvArgs(kv...)}
}

// wantResponses checks that what the CLI sent the model back for each call of
// key holds the sentence given for it.
func wantResponses(t *testing.T, s *geminicli.Server, key string, want map[[2]int]string) {
	t.Helper()
	wantSaid(t, key, geminicli.ID, s.Said, want)
}

// TestR7GeminiCLIHookHolds drives the real Gemini CLI with aimon-gw as its
// BeforeTool hook and its MCP server over standard input, configured as
// the README says: an allowed command runs, through aimon-gw exec, whose
// sandbox keeps an allowed touch outside the project from writing; an
// allowed write_file writes and read_file reads; a denied command and a
// write into a denied directory change nothing; a tool the policy does
// not mention is refused; each refusal's sentence reaches the model; the
// MCP server's Echo answers despite Gemini's wait_for_previous, a call
// with a parameter Echo has not is refused, and a call Gemini stops
// waiting for has its sleep killed (rules R7, R6, R2, S9).
func TestR7GeminiCLIHookHolds(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	r := newGeminiRun(t, geminiHookPolicy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	writeFile(t, p("kept.txt"), "kept-contents")
	os.Mkdir(p("secret"), 0o755)
	outside := filepath.Join(filepath.Dir(r.project), "outside.txt")
	sleep := watchFor("sleep 13.625")
	r.server = geminicli.Serve(t, geminicli.Script{Key: "MAIN", Turns: [][]geminicli.Call{
		{gcall("run_shell_command", "command", "touch made.txt")},
		{gcall("run_shell_command", "command", "rm kept.txt")},
		{gcall("run_shell_command", "command", "touch "+outside)},
		{gcall("write_file", "file_path", p("written.txt"), "content", "written")},
		{gcall("write_file", "file_path", p("secret/x"), "content", "no")},
		{gcall("read_file", "file_path", p("kept.txt"))},
		{gcall("list_background_processes")},
		{gcall("mcp_aimon_Echo", "message", "hi", "times", 2)},
		{gcall("mcp_aimon_Echo", "message", "hi", "bogus", true)},
		{gcall("mcp_aimon_Bash", "command", "sleep 13.625")},
	}})
	r.run(r.settings(0, ""), "MAIN")
	sleep.gone(t)
	wantExist(t, map[string]bool{p("made.txt"): true, p("kept.txt"): true, outside: false, p("written.txt"): true, p("secret/x"): false})
	wantResponses(t, r.server, "MAIN", map[[2]int]string{
		{1, 0}: "is denied on this surface by run_shell_command(rm:*)",
		{2, 0}: "Tool input parameters were modified by a hook",
		{4, 0}: "is denied on this surface by write_file(",
		{5, 0}: "kept-contents",
		{6, 0}: "does not mention list_background_processes",
		{7, 0}: "hihi",
		{8, 0}: "params must NOT have additional properties",
		{9, 0}: "timed out",
	})
}

// TestR2GeminiCLIMCPOverHTTP drives the real Gemini CLI against aimon-gw
// mcp --listen, configured as the README's HTTP block says: Echo answers
// with Gemini's wait_for_previous dropped, a call Gemini stops waiting for
// has its sleep killed over stateless HTTP as over standard input, and
// with a wrong token Gemini leaves the server out (rules R2, S9, R10).
func TestR2GeminiCLIMCPOverHTTP(t *testing.T) {
	t.Parallel()
	r := newGeminiRun(t, geminiHookPolicy)
	g := startHTTP(t, http.DefaultClient, "--policy", r.mcpPolicy, "--workdir", r.project, "--tokens", tokensFile(t, staticTokens))
	sleep := watchFor("sleep 13.875")
	r.server = geminicli.Serve(t, geminicli.Script{Key: "HTTP", Turns: [][]geminicli.Call{
		{gcall("mcp_aimon_Echo", "message", "hi", "times", 3, "wait_for_previous", true)},
		{gcall("mcp_aimon_Bash", "command", "sleep 13.875")},
	}}, geminicli.Script{Key: "WRONG", Turns: [][]geminicli.Call{
		{gcall("mcp_aimon_Echo", "message", "hi")},
	}})
	settings := r.settings(1, g.base+"/mcp")
	r.run(settings, "HTTP", "AIMON_GW_TOKEN=tok-alice")
	sleep.gone(t)
	wantResponses(t, r.server, "HTTP", map[[2]int]string{{0, 0}: "hihihi", {1, 0}: "timed out"})
	r.run(settings, "WRONG", "AIMON_GW_TOKEN=tok-wrong")
	wantResponses(t, r.server, "WRONG", map[[2]int]string{{0, 0}: "not found"})
	if slices.Contains(r.server.Tools(), "mcp_aimon_Echo") {
		t.Errorf("with a wrong token Gemini CLI still offered the server's tools: %v", r.server.Tools())
	}
}

// TestR9GeminiCLICannotSwitchTheGateOff: the real Gemini CLI, whose lists
// allow write_file, replace and cp in the project, cannot rewrite the
// settings that make it call the hook: a write_file of {} over
// ~/.gemini/settings.json, a replace in it, and a write_file of
// hooksConfig.enabled false into the project's .gemini/settings.json are
// refused naming R9, and a cp of either fails on a read-only file; the
// settings are as written, and the next session still runs the hook: its
// rm stays denied and the file stays (rule R9).
func TestR9GeminiCLICannotSwitchTheGateOff(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	r := newGeminiRun(t, strings.Replace(geminiHookPolicy, `"write_file(./**)"`, `"write_file(./**)", "write_file(HOMEDIR/**)", "replace(HOMEDIR/**)"`, 1))
	// Gemini refuses a path outside its workspace itself: the home is
	// in it, so that the hook is what refuses its settings.
	r.args = []string{"--include-directories", r.home}
	p := func(name string) string { return filepath.Join(r.project, name) }
	writeFile(t, p("kept.txt"), "kept")
	off := `{"hooksConfig": {"enabled": false}}`
	writeFile(t, p("off.json"), off)
	settings := filepath.Join(r.home, ".gemini", "settings.json")
	r.server = geminicli.Serve(t, geminicli.Script{Key: "MAIN", Turns: [][]geminicli.Call{
		{gcall("write_file", "file_path", settings, "content", "{}")},
		{gcall("replace", "file_path", settings, "old_string", "BeforeTool", "new_string", "AfterModel", "instruction", "x")},
		{gcall("write_file", "file_path", p(".gemini/settings.json"), "content", off)},
		{gcall("run_shell_command", "command", "cp off.json "+settings)},
		{gcall("run_shell_command", "command", "cp off.json .gemini/settings.json")},
		{gcall("run_shell_command", "command", "rm kept.txt")},
	}}, geminicli.Script{Key: "NEXT", Turns: [][]geminicli.Call{
		{gcall("run_shell_command", "command", "rm kept.txt")},
	}})
	r.run(r.settings(0, ""), "MAIN")
	before, _ := os.ReadFile(settings)
	r.run(nil, "NEXT")
	if after, err := os.ReadFile(settings); err != nil || string(after) != string(before) || !strings.Contains(string(after), "hook gemini-cli") {
		t.Errorf("settings.json was rewritten: %q %v", after, err)
	}
	wantExist(t, map[string]bool{p(".gemini/settings.json"): false, p("kept.txt"): true})
	wantResponses(t, r.server, "MAIN", map[[2]int]string{
		{0, 0}: "rule R9",
		{1, 0}: "rule R9",
		{2, 0}: "rule R9",
		{3, 0}: "Read-only file system",
		// The project is read-only to commands where a denied path
		// below it is missing: .gemini is not made, and cannot be.
		{4, 0}: "cannot create regular file '.gemini/settings.json'",
		{5, 0}: "is denied on this surface",
	})
	wantResponses(t, r.server, "NEXT", map[[2]int]string{{0, 0}: "is denied on this surface"})
}

// TestR7GeminiCLIHeadlessTraps holds the README's traps for gemini -p
// without --yolo: mcp.autoAllowInHeadless (in the README's block) lets
// the MCP call through to the hook and the gate, while Gemini offers the
// model no shell at all, so its call is a tool not found and runs
// nothing; without mcp.autoAllowInHeadless the MCP call does not run
// either.
func TestR7GeminiCLIHeadlessTraps(t *testing.T) {
	t.Parallel()
	r := newGeminiRun(t, geminiHookPolicy)
	r.noYolo = true
	r.server = geminicli.Serve(t, geminicli.Script{Key: "HEADLESS", Turns: [][]geminicli.Call{
		{gcall("mcp_aimon_Echo", "message", "hi", "times", 2)},
		{gcall("run_shell_command", "command", "touch made.txt")},
	}}, geminicli.Script{Key: "NOAUTO", Turns: [][]geminicli.Call{
		{gcall("mcp_aimon_Echo", "message", "hi")},
	}})
	r.run(r.settings(0, ""), "HEADLESS")
	noAuto := r.settings(0, "")
	delete(noAuto, "mcp")
	r.run(noAuto, "NOAUTO")
	if got := r.server.Said(geminicli.ID("NOAUTO", 0, 0)); !strings.Contains(got, `mcp_aimon_Echo\" not found`) {
		t.Errorf("without --yolo and mcp.autoAllowInHeadless Gemini must offer no MCP tool in -p: %q", got)
	}
	wantExist(t, map[string]bool{filepath.Join(r.project, "made.txt"): false})
	wantResponses(t, r.server, "HEADLESS", map[[2]int]string{{0, 0}: "hihi"})
	if got := r.server.Said(geminicli.ID("HEADLESS", 1, 0)); !strings.Contains(got, `run_shell_command\" not found`) {
		t.Errorf("without --yolo Gemini must offer no shell in -p: %q", got)
	}
}
