package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestS4VetRefusesABoundOfTheWrongType: a string bound on an integer field
// (timeout?: <="120000") would refuse every call that sets it; vet refuses
// it at the bound's file:line:col, and says how to write it.
func TestS4VetRefusesABoundOfTheWrongType(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Bash: schema.#Bash & {sandbox: mode: \"off\", input: timeout?: <=\"120000\"}\nagent: \"allowed-tools\": [\"Bash(ls:*)\"]\n")
	out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
	if code := exitCode(err); code != exitFinding || !strings.Contains(string(out), "policy.cue:5:") || !strings.Contains(string(out), `its bound <="120000" compares it with a string`) || !strings.Contains(string(out), "write the bound as <=120000.") {
		t.Errorf("vet: exit %d:\n%s", code, out)
	}
	good := moduleDir(t, "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Bash: schema.#Bash & {sandbox: mode: \"off\", input: timeout?: <=120000}\nagent: \"allowed-tools\": [\"Bash(ls:*)\"]\n")
	if out, err := exec.Command(gatewayBinary(t), "vet", good).CombinedOutput(); err != nil {
		t.Errorf("vet of a bound of the field's type: %v\n%s", err, out)
	}
}

// TestR4VetWarnsOfAServerCommandNotInstalled: vet names the server whose
// command is not here, at its place, before a start withholds its tools.
func TestR4VetWarnsOfAServerCommandNotInstalled(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"/nonexistent/mcp-server", "aimon-gw-no-such-command"} {
		dir := moduleDir(t, "package policy\n\nservers: fs: {command: [\""+command+"\"], expose: [\"read_file\"], pin: false}\n")
		out, err := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "policy.cue:3:") || !strings.Contains(string(out), "warning: server fs's command "+command+" cannot be found here") {
			t.Errorf("vet of %s: %v:\n%s", command, err, out)
		}
	}
}

// TestP12NoSentenceHasAnEmptyList: a policy with no tool at all says so,
// and an empty allowed-tools is placed where it is written.
func TestP12NoSentenceHasAnEmptyList(t *testing.T) {
	t.Parallel()
	dir := moduleDir(t, "package policy\n\nagent: \"allowed-tools\": []\nsubagents: x: \"allowed-tools\": [\"Foo\"]\n")
	out, _ := exec.Command(gatewayBinary(t), "vet", dir).CombinedOutput()
	for _, want := range []string{"policy.cue:3:", "agent allowed-tools leaves no tool at all", "policy.cue:4:", "the policy defines no tool"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("vet does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "are .") || strings.Contains(string(out), "of .") || strings.Contains(string(out), "embedded") {
		t.Errorf("vet:\n%s", out)
	}
}

// TestR3RevisionNamesTheGitCommit: a policy in a git work tree goes in
// force naming its commit beside the content revision, in the log and in
// the decision log.
func TestR3RevisionNamesTheGitCommit(t *testing.T) {
	t.Parallel()
	gitBin := needCommand(t, "git", "the Debian package git")
	dir := moduleDir(t, reloadHeader+`agent: "allowed-tools": ["Echo"]`+"\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "policy"}} {
		if out, err := exec.Command(gitBin, append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	head, err := exec.Command(gitBin, "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(head))
	log := filepath.Join(t.TempDir(), "decisions.jsonl")
	var stderr strings.Builder
	runServeLog(t, []string{gatewayBinary(t)}, []string{"--policy", dir, "--cache", "off", "--decision-log", log}, nil, &stderr, `{"type":"tool_use","id":"1","name":"Echo","input":{"message":"m"}}`)
	if !strings.Contains(stderr.String(), "commit="+commit) {
		t.Errorf("the log does not name commit %s:\n%s", commit, stderr.String())
	}
	if r := readRecords(t, log); len(r) != 1 || r[0]["commit"] != commit || r[0]["revision"] == "" {
		t.Errorf("the decision: %v, want commit %s and the revision", r, commit)
	}
}
