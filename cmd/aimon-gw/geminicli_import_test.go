package main

import (
	"os"
	"path/filepath"
	"testing"

	"aimon.dev/gw/internal/testkit/geminicli"
)

// geminiImportProbe is one call of the Gemini CLI import test, and how to
// tell from the disk or from what Gemini sent back that it ran
// (probeRan).
type geminiImportProbe struct {
	name   string
	call   func(project string) geminicli.Call
	marker string
}

func gcallIn(name, field, rel string, kv ...any) func(string) geminicli.Call {
	return func(project string) geminicli.Call {
		return gcall(name, append([]any{field, filepath.Join(project, rel)}, kv...)...)
	}
}

func gshell(cmd string) func(string) geminicli.Call {
	return func(string) geminicli.Call { return gcall("run_shell_command", "command", cmd) }
}

var geminiImportProbes = []geminiImportProbe{
	{"an allowed touch", gshell("touch allowed.txt"), "allowed.txt"},
	{"a denied rm", gshell("rm kept.txt"), "!kept.txt"},
	{"a cp no rule names", gshell("cp kept.txt copied.txt"), "copied.txt"},
	{"an allowed write_file", gcallIn("write_file", "file_path", "written.txt", "content", "written"), "written.txt"},
	{"a read_file of the default policy", gcallIn("read_file", "file_path", "kept.txt"), "kept-contents"},
	{"a replace no rule names", gcallIn("replace", "file_path", "kept.txt", "old_string", "kept", "new_string", "changed", "instruction", "change it"), "kept.txt=changed"},
	{"Echo", func(string) geminicli.Call { return gcall("mcp_aimon_Echo", "message", "hi", "times", 2) }, "hihi"},
	{"an excluded MCP tool", func(string) geminicli.Call { return gcall("mcp_aimon_Bash", "command", "sleep 0.125") }, "exit_code"},
}

// geminiImportRan runs the probes in r's Gemini CLI under settings and
// reports which ran.
func geminiImportRan(t *testing.T, r *geminiRun, settings map[string]any) (ran, said []string) {
	t.Helper()
	writeFile(t, filepath.Join(r.project, "kept.txt"), "kept-contents")
	var turns [][]geminicli.Call
	for _, p := range geminiImportProbes {
		turns = append(turns, []geminicli.Call{p.call(r.project)})
	}
	r.server = geminicli.Serve(t, geminicli.Script{Key: "PROBES", Turns: turns})
	r.run(settings, "PROBES")
	for i, p := range geminiImportProbes {
		res := r.server.Said(geminicli.ID("PROBES", i, 0))
		said = append(said, p.name+": "+res)
		if probeRan(r.project, p.marker, res) {
			ran = append(ran, p.name)
		}
	}
	return ran, said
}

// TestP14GeminiCLIImportHoldsInGeminiCLI runs the real Gemini CLI twice
// on the rules of testdata/geminicli-import: once with them as its own
// (~/.gemini/policies/team.toml, an MCP server whose excludeTools names
// Bash, gemini -p in the default approval mode), and once with only the
// policy aimon-gw import gemini-cli made of them as its hook, set up as
// the README says (--yolo, each call left to the hook). The same calls
// run: the allowed touch and write_file, the read_file Gemini's default
// policy allows, Echo; and the same do not: the denied rm leaves its
// file, a cp and a replace no rule names change nothing, the excluded
// MCP tool does not run (rule P14). An asked call is left out: Gemini CLI
// 0.61 under -p waits for an answer to the hook's ask that never comes.
func TestP14GeminiCLIImportHoldsInGeminiCLI(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	team, err := os.ReadFile("testdata/geminicli-import/policies/team.toml")
	if err != nil {
		t.Fatal(err)
	}
	own := newGeminiRun(t, geminiHookPolicy)
	own.noYolo = true
	writeFile(t, filepath.Join(own.home, ".gemini", "policies", "team.toml"), string(team))
	ownSettings := own.settings(0, "")
	delete(ownSettings, "hooks")
	ownSettings["mcpServers"].(map[string]any)["aimon"].(map[string]any)["excludeTools"] = []string{"Bash"}
	want, ownSaid := geminiImportRan(t, own, ownSettings)

	hooked := newGeminiRun(t, geminiHookPolicy)
	var src string
	hooked.hookPolicy, src = importedPolicy(t, "gemini-cli", "--project", hooked.project, filepath.Join(own.home, ".gemini"))
	got, hookSaid := geminiImportRan(t, hooked, hooked.settings(0, ""))
	wantSameRuns(t, "Gemini CLI", want, got)
	wantNotRun(t, "Gemini CLI", want, got, src, ownSaid, hookSaid, "a denied rm", "a cp no rule names", "a replace no rule names", "an excluded MCP tool")
}
