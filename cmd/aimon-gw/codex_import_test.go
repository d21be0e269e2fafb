package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/codex"
)

// codexImportProbes are the calls of the Codex import test, and how to
// tell from the disk or from what Codex sent back that each ran: a path
// made, or a marker (probeRan).
var codexImportProbes = []struct {
	name   string
	call   codex.Call
	marker string
}{
	{"an allowed touch", call("exec_command", "cmd", "touch allowed.txt"), "allowed.txt"},
	{"a forbidden rm", call("exec_command", "cmd", "rm kept.txt"), "!kept.txt"},
	{"a prompted mkdir", call("exec_command", "cmd", "mkdir asked.d"), "asked.d"},
	{"a touch by its host_executable path", call("exec_command", "cmd", "/usr/bin/touch abs.txt"), "abs.txt"},
	{"a cp no rule names", call("exec_command", "cmd", "cp kept.txt copied.txt"), "copied.txt"},
	{"a patch", patch("*** Add File: patched.txt\n+patched\n"), "patched.txt"},
	{"Echo", call("mcp__aimon__Echo", "message", "hi", "times", 2), "hihi"},
	{"a disabled MCP tool", call("mcp__aimon__Bash", "command", "sleep 0.125"), "exit_code"},
}

// codexImportRan runs the probes in r's Codex under config and reports
// which ran.
func codexImportRan(t *testing.T, r *codexRun, config string) (ran, said []string) {
	t.Helper()
	writeFile(t, filepath.Join(r.project, "kept.txt"), "kept")
	var turns [][]codex.Call
	for _, p := range codexImportProbes {
		turns = append(turns, []codex.Call{p.call})
	}
	r.run(config, codex.Script{Key: "PROBES", Turns: turns})
	for i, p := range codexImportProbes {
		res := r.server.Said(codex.ID("PROBES", i, 0))
		said = append(said, p.name+": "+res)
		if probeRan(r.project, p.marker, res) {
			ran = append(ran, p.name)
		}
	}
	return ran, said
}

// TestP14CodexImportHoldsInCodex runs the real Codex twice on the rules
// of testdata/codex-import: once with them as its own (rules/*.rules in
// CODEX_HOME and its config.toml: approval_policy "never", sandbox
// "danger-full-access", an MCP server with a disabled tool), and once
// with only the policy aimon-gw import codex made of them as its hook,
// set up as the README says. Nothing runs under the hook that does not
// run under Codex's own rules: the forbidden rm leaves its file, the
// prompted mkdir makes no directory, the disabled MCP tool does not run;
// and what the rules allow runs under both (touch, by name and by its
// host_executable path, a patch, Echo). A command no rule names, which
// Codex runs by its own judgment, is refused under the hook (rule P14).
func TestP14CodexImportHoldsInCodex(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	rules, err := os.ReadFile("testdata/codex-import/rules/default.rules")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile("testdata/codex-import/config.toml")
	own := newCodexRun(t, "")
	writeFile(t, filepath.Join(own.home, "rules", "default.rules"), string(rules))
	ownConfig := strings.NewReplacer("$BIN", gatewayBinary(t), "$TOOLS", own.mcpPolicy).Replace(string(cfg))
	want, ownSaid := codexImportRan(t, own, ownConfig)

	hooked := newCodexRun(t, "")
	var src string
	hooked.hookPolicy, src = importedPolicy(t, "codex", "--project", hooked.project, own.home)
	got, hookSaid := codexImportRan(t, hooked, hooked.config(0, "", ""))
	wantSameRuns(t, "Codex", want, got, "a cp no rule names")
	if !slices.Contains(want, "a cp no rule names") || slices.Contains(got, "a cp no rule names") {
		t.Errorf("a command no rule names: Codex ran it %v, the hook %v; want Codex to, and the hook not to", slices.Contains(want, "a cp no rule names"), slices.Contains(got, "a cp no rule names"))
	}
	wantNotRun(t, "Codex", want, got, src, ownSaid, hookSaid, "a forbidden rm", "a prompted mkdir", "a disabled MCP tool")
}

// TestP14ImportCodexAndGeminiExit: a rule the import cannot keep makes it
// exit 1, naming the rule at its file and line, with nothing on standard
// output; --lossy writes the policy; a file the runtime would refuse, and
// no file at all, exit 2 with a sentence (rule P14).
func TestP14ImportCodexAndGeminiExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"lossy.rules": "prefix_rule(pattern = [\"ls\"])\nprefix_rule(pattern = [\"echo\", \"a b\"])\n",
		"bad.rules":   "prefix_rule(pattern = [\"rm\"], decision = \"never\")\n",
		"lossy.toml":  "[[rule]]\ntoolName = \"run_shell_command\"\ncommandRegex = \"git (commit|push)\"\ndecision = \"allow\"\npriority = 1\n",
		"bad.toml":    "[[rule]]\ntoolName = \"read_file\"\ndecision = \"allow\"\n",
	}
	for name, body := range files {
		writeFile(t, filepath.Join(dir, name), body)
	}
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"codex", "lossy.rules"}, exitFinding, "lossy.rules:2: prefix_rule [\"echo\", \"a b\"] allow cannot be kept"},
		{[]string{"codex", "--lossy", "lossy.rules"}, 0, "lossy.rules:2"},
		{[]string{"codex", "bad.rules"}, exitUsage, `bad.rules:1: prefix_rule's decision "never" is not one Codex knows`},
		{[]string{"codex"}, exitUsage, "give the files to import"},
		{[]string{"gemini-cli", "lossy.toml"}, exitFinding, "lossy.toml:1: allow run_shell_command pattern"},
		{[]string{"gemini-cli", "--lossy", "lossy.toml"}, 0, "lossy.toml:1"},
		{[]string{"gemini-cli", "bad.toml"}, exitUsage, "bad.toml:1: priority must be an integer from 0 to 999"},
		{[]string{"gemini-cli", "missing.toml"}, exitUsage, "missing.toml"},
	} {
		cmd := exec.Command(gatewayBinary(t), append([]string{"import"}, c.args...)...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if code := exitCode(err); code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("import %v: exit %d, want %d; stderr %q, want %q in it", c.args, code, c.code, stderr.String(), c.stderr)
		}
		if (len(out) > 0) != (c.code == 0) || c.code == 0 && !strings.Contains(string(out), "package policy") {
			t.Errorf("import %v: standard output %q", c.args, out)
		}
	}
}
