package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"aimon.dev/gw/internal/runtime/ticket"
	"aimon.dev/gw/internal/testkit/claudecode"
	"aimon.dev/gw/internal/testkit/policydir"
)

// hookSealed asks aimon-gw hook claude-code, run as argv (the binary,
// after setpriv for another user) with env added, about command in
// workdir under policy, as Claude Code would; it returns the decision and
// the command the hook hands back, wrapped in exec with its ticket.
func hookSealed(t *testing.T, argv, env []string, policy, workdir, command string) (decision, wrapped string) {
	t.Helper()
	decision, reason, updated := hookAs(t, argv, env, policy, workdir, "Bash", map[string]any{"command": command})
	wrapped, _ = updated["command"].(string)
	if decision != "deny" && !strings.Contains(wrapped, "'--ticket' '") {
		t.Fatalf("the hook allowed %q without a ticket: %s %s %v", command, decision, reason, updated)
	}
	return decision, wrapped
}

// hookAs asks the hook, run as argv with env added, about one call of
// tool in workdir under policy; it returns the decision, its reason and
// the updated input.
func hookAs(t *testing.T, argv, env []string, policy, workdir, tool string, input map[string]any) (decision, reason string, updated map[string]any) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"cwd": workdir, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input})
	h := exec.Command(argv[0], append(argv[1:], "hook", "claude-code", "--policy", policy, "--cache", "off")...)
	h.Env = append(h.Environ(), env...)
	h.Stdin = strings.NewReader(string(in))
	out, err := h.Output()
	if err != nil {
		t.Fatalf("hook on %s %v: %v", tool, input, err)
	}
	var ans struct {
		Out struct {
			Decision string         `json:"permissionDecision"`
			Reason   string         `json:"permissionDecisionReason"`
			Updated  map[string]any `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("hook on %s %v: %v: %s", tool, input, err, out)
	}
	return ans.Out.Decision, ans.Out.Reason, ans.Out.Updated
}

// ticketLayout is a project in /var/tmp (nobody can reach it) with a
// policy that allows Bash, writes in the project, and asks for rm; agent/
// is a policy an agent could have written there, every command allowed and
// no sandbox. It returns the project and both policy directories; extra
// are more allow entries.
func ticketLayout(t *testing.T, u gatewayUser, extra ...string) (proj, policy, agent string) {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-ticket")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	proj, policy, agent = root+"/proj", root+"/policy", root+"/proj/agent"
	for _, dir := range []string{policy, agent} {
		os.MkdirAll(dir+"/cue.mod", 0o755)
		writeFile(t, dir+"/cue.mod/module.cue", policydir.Module)
	}
	writeFile(t, policy+"/policy.cue", fmt.Sprintf(`package policy

import (
	"aimon.dev/gw/schema"
	"aimon.dev/gw/schema/claudecode"
)

tools: {Read: schema.#Read, Write: schema.#Write, Bash: schema.#Bash, Grep: claudecode.#Grep}
agent: "allowed-tools": ["Read(%[1]s/**)", "Write(%[1]s/**)", "Bash", "Grep(%[1]s/**)"%[2]s]
agent: "ask-tools": ["Bash(rm:*)"]
`, proj, strings.Join(append([]string{""}, extra...), ", ")))
	writeFile(t, agent+"/policy.cue", "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Bash: schema.#Bash & {sandbox: mode: \"off\"}\nagent: \"allowed-tools\": [\"Bash\"]\n")
	writeFile(t, proj+"/victim", "keep\n")
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return proj, policy, agent
}

// ticketDir is where the hook run as u keeps the key: the state directory
// of u's home, or /var/tmp/aimon-gw-UID for nobody, whose home does not exist.
func ticketDir(u gatewayUser) string {
	if u.uid < 0 {
		return ticket.Dir()
	}
	return fmt.Sprintf("/var/tmp/aimon-gw-%d", u.uid)
}

// TestP16ExecRunsOnlyWhatADecisionSealed: through the binary, as root and
// as nobody, aimon-gw exec runs a command only with the ticket the hook
// sealed for it: the hook's own wrapped command runs once; without a
// ticket, with one used already, with one for another command, with one
// and a policy the agent wrote (or the policy changed since), with
// --approved added to a ticket no person was asked about or taken from
// one a person was, nothing runs (exit 126, the marker file not made, the
// victim kept); an asked rm runs with its own ticket.
func TestP16ExecRunsOnlyWhatADecisionSealed(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		proj, policy, agent := ticketLayout(t, u)
		sealed := func(command string) (string, string) {
			t.Helper()
			return hookSealed(t, gw, nil, policy, proj, command)
		}
		run := func(line string) (string, int) { return runAs(t, u, proj, line) }
		exists := func(name string) bool {
			_, err := os.Stat(filepath.Join(proj, name))
			return err == nil
		}
		refused := func(note, line, marker, want string) {
			t.Helper()
			out, code := run(line)
			if code != exitNotRun || !strings.Contains(out, want) || !strings.Contains(out, "the command was not run") {
				t.Errorf("%s: exit %d, want %d and %q:\n%s", note, code, exitNotRun, want, out)
			}
			if marker != "" && exists(marker) {
				t.Errorf("%s: the command ran (%s was made)", note, marker)
			}
		}
		q := shellQuote

		// The hook's own command runs, once.
		decision, wrapped := sealed("touch made")
		if out, code := run(wrapped); decision != "allow" || code != 0 || !exists("made") {
			t.Fatalf("the hook's wrapped command did not run: %s %d\n%s", decision, code, out)
		}
		os.Remove(filepath.Join(proj, "made"))
		refused("a ticket used already", wrapped, "made", "already used")

		// No ticket, whatever the flags say.
		refused("no ticket", strings.Join([]string{q(bin), "exec", "--policy", q(policy), "--workdir", q(proj), "--", q("touch none")}, " "), "none", "carries no ticket")
		refused("--approved without a ticket", strings.Join([]string{q(bin), "exec", "--approved", "--policy", q(agent), "--workdir", q(proj), "--", q("touch none")}, " "), "none", "carries no ticket")
		refused("an altered ticket", strings.Replace(wrapped, "'--ticket' '", "'--ticket' 'x", 1), "made", "not sealed by this user's hook")

		// A ticket for another command, workdir or chain.
		_, wrapped = sealed("touch a")
		refused("another command", strings.Replace(wrapped, q("touch a"), q("touch other"), 1), "other", "another command")
		refused("another workdir", strings.Replace(wrapped, "'--workdir' "+q(proj), "'--workdir' "+q(agent), 1), "", "another working directory")
		refused("another chain", strings.Replace(wrapped, "'--surface' 'agent'", "'--surface' 'agent,subagent:x'", 1), "a", "")
		refused("no protections", strings.Replace(wrapped, "'--runtime' 'claude-code'", "", 1), "a", "other protections")

		// A ticket and a policy the agent wrote; the policy changed since.
		refused("the agent's policy", strings.Replace(wrapped, "'--policy' "+q(policy), "'--policy' "+q(agent), 1), "a", "another policy directory")
		orig, _ := os.ReadFile(policy + "/policy.cue")
		writeFile(t, policy+"/policy.cue", string(orig)+"\n// changed\n")
		refused("the policy changed", wrapped, "a", "revision")
		writeFile(t, policy+"/policy.cue", string(orig))

		// --approved approves nothing the ticket does not.
		_, wrapped = sealed("touch b")
		refused("--approved added", strings.Replace(wrapped, "'exec' ", "'exec' '--approved' ", 1), "b", "--approved alone approves nothing")
		refused("--approved on an ask entry with an allow ticket", strings.Replace(strings.Replace(wrapped, "'exec' ", "'exec' '--approved' ", 1), q("touch b"), q("rm victim"), 1), "", "another command")
		decision, asked := sealed("rm victim")
		if decision != "ask" || !strings.Contains(asked, "'--approved'") {
			t.Fatalf("rm is not asked: %s %q", decision, asked)
		}
		refused("--approved taken from an asked ticket", strings.Replace(asked, "'--approved' ", "", 1), "", "a person approved")
		if !exists("victim") {
			t.Fatal("rm under ask ran without its ticket")
		}
		if out, code := run(asked); code != 0 || exists("victim") {
			t.Errorf("the approved rm did not run with its ticket: %d\n%s", code, out)
		}
		if fi, err := os.Stat(filepath.Join(ticketDir(u), ticket.KeyName)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("the key is not a file of mode 0600: %v %v", fi, err)
		}
	})
}

// eachTicketUser runs f as each gateway user (root and nobody when the
// test is root), with the binary and the argv that runs it as the user.
func eachTicketUser(t *testing.T, f func(t *testing.T, u gatewayUser, bin string, gw []string)) {
	t.Helper()
	needBwrap(t)
	bin := gatewayBinary(t)
	os.Chmod(filepath.Dir(bin), 0o755) // nobody runs it
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) { f(t, u, bin, append(append([]string{}, u.prefix...), bin)) })
	}
}

// runAs runs line with bash -c as u in dir, as Claude Code runs what the
// hook hands back; it returns the output and the exit code.
func runAs(t *testing.T, u gatewayUser, dir, line string) (string, int) {
	t.Helper()
	argv := append(append([]string{}, u.prefix...), "bash", "-c", line)
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestR8TicketKeyNoToolReadsAndNoInnerExecRuns: as root and as nobody,
// the key that seals exec's tickets is refused to Read, Write and Grep
// (of its directory or one above) through the hook, whatever the lists allow, and a command in the sandbox cannot read it (cat, ls of
// its directory); an aimon-gw exec started inside an allowed command runs
// nothing, given a ticket the hook sealed and did not spend, or
// --approved and a policy the agent wrote without one (rule P16).
func TestR8TicketKeyNoToolReadsAndNoInnerExecRuns(t *testing.T) {
	t.Parallel()
	eachTicketUser(t, func(t *testing.T, u gatewayUser, bin string, gw []string) {
		dir := ticketDir(u)
		// The policy would let Read and Write reach the key, and
		// commands write its directory, were it not the gateway's.
		proj, policy, agent := ticketLayout(t, u, fmt.Sprintf("%q, %q, %q", "Read(/**)", "Grep(/**)", "Write("+dir+"/**)"))
		run := func(line string) string {
			out, _ := runAs(t, u, proj, line)
			return out
		}
		// The first sealed ticket makes the key.
		if _, wrapped := hookSealed(t, gw, nil, policy, proj, "true"); !strings.Contains(wrapped, "'--ticket'") {
			t.Fatal("no ticket")
		}
		keyPath := filepath.Join(dir, ticket.KeyName)
		key, err := os.ReadFile(keyPath)
		if err != nil || len(strings.TrimSpace(string(key))) < 32 {
			t.Fatalf("the key: %v %q", err, key)
		}
		secret := strings.TrimSpace(string(key))
		for _, c := range []struct {
			tool  string
			input map[string]any
		}{
			{"Read", map[string]any{"file_path": keyPath}},
			{"Write", map[string]any{"file_path": keyPath, "content": "0123456789abcdef0123456789abcdef"}},
			{"Write", map[string]any{"file_path": filepath.Join(dir, "spent", "x"), "content": "0"}},
			{"Grep", map[string]any{"pattern": ".", "path": dir}},
			{"Grep", map[string]any{"pattern": ".", "path": filepath.Dir(dir)}},
		} {
			if d, reason, _ := hookAs(t, gw, nil, policy, proj, c.tool, c.input); d != "deny" || !strings.Contains(reason, "rule R8") {
				t.Errorf("the hook lets %s %v: %s %s", c.tool, c.input, d, reason)
			}
		}
		_, wrapped := hookSealed(t, gw, nil, policy, proj, "cat "+keyPath+"; ls -a "+dir+"; cat "+dir+"/*; echo 0123456789abcdef0123456789abcdef > "+keyPath)
		if out := run(wrapped); strings.Contains(out, secret) || strings.Contains(out, "spent") || !strings.Contains(out, "No such file") {
			t.Errorf("a command in the sandbox reads the key or its directory:\n%s", out)
		}
		if got, _ := os.ReadFile(keyPath); string(got) != string(key) {
			t.Error("the key was changed")
		}
		// An exec inside an allowed command, with a ticket the hook
		// sealed for it and never spent.
		_, inner := hookSealed(t, gw, nil, policy, proj, "touch inner")
		_, outer := hookSealed(t, gw, nil, policy, proj, inner)
		out := run(outer)
		if _, err := os.Stat(filepath.Join(proj, "inner")); err == nil || !strings.Contains(out, "its ticket cannot be checked") {
			t.Errorf("an exec inside a command ran it, or did not say why not:\n%s", out)
		}
		own := strings.Join([]string{shellQuote(bin), "exec", "--approved", "--policy", shellQuote(agent), "--workdir", shellQuote(proj), "--", shellQuote("touch own")}, " ")
		_, outer = hookSealed(t, gw, nil, policy, proj, own)
		out = run(outer)
		if _, err := os.Stat(filepath.Join(proj, "own")); err == nil || !strings.Contains(out, "carries no ticket") {
			t.Errorf("an exec inside a command ran it under the agent's policy:\n%s", out)
		}
		// The inner ticket was never spent: outside, it still runs.
		if run(inner); !fileExists(filepath.Join(proj, "inner")) {
			t.Error("the hook's ticket did not run outside the sandbox")
		}
	})
}

// unticketed is an answer with each exec ticket in it replaced by T.
func unticketed(answer string) string {
	return ticketWord.ReplaceAllString(strings.TrimSpace(answer), "'--ticket' 'T'")
}

var ticketWord = regexp.MustCompile(`'--ticket' '[A-Za-z0-9_.-]*'`)

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestP16ClaudeCodeExecRunsOnlyWhatTheHookSealed drives the real Claude
// Code with the hook: an allowed touch runs through exec with its ticket;
// the session's own aimon-gw exec, with --approved and a policy it wrote
// (every command allowed, no sandbox), runs nothing and says why; a Read
// of the key is refused and a cat of it in the sandbox shows none of it.
func TestP16ClaudeCodeExecRunsOnlyWhatTheHookSealed(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)", "Bash"]
`)
	r := newClaudeRun(t, policy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	// What the session could have written with allowed calls.
	policydir.WriteIn(t, p("agent"), map[string]string{"policy.cue": "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: Bash: schema.#Bash & {sandbox: mode: \"off\"}\nagent: \"allowed-tools\": [\"Bash\"]\n"})
	own := shellQuote(gatewayBinary(t)) + " exec --approved --policy ./agent --workdir . -- 'touch own.txt'"
	key := filepath.Join(ticket.Dir(), ticket.KeyName)
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("Bash", "command", "touch ran.txt")},
		{use("Bash", "command", own)},
		{use("Read", "file_path", key)},
		{use("Bash", "command", "cat "+key)},
	}})
	secret, err := os.ReadFile(key)
	if err != nil {
		t.Fatalf("the hook made no key: %v", err)
	}
	for name, want := range map[string]bool{"ran.txt": true, "own.txt": false} {
		if _, err := os.Stat(p(name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
	for turn, want := range map[int]string{1: "carries no ticket", 2: "rule R8", 3: "No such file"} {
		if got := r.server.Result(claudecode.ID("MAIN", turn, 0)); !strings.Contains(got, want) || strings.Contains(got, strings.TrimSpace(string(secret))) {
			t.Errorf("turn %d: %q, want %q in it and not the key", turn, got, want)
		}
	}
}

// TestP16CodexAndGeminiHooksSealTickets: the command Codex's and Gemini
// CLI's hooks hand back runs through exec with a ticket of its own, once;
// Gemini's asked command carries an approved one; the same command line
// run again runs nothing.
func TestP16CodexAndGeminiHooksSealTickets(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	dir, wd := moduleDir(t, strings.ReplaceAll(agentsPolicy, `sandbox: mode: "off"`, `sandbox: {}`)), t.TempDir()
	wrapped := func(out string, field string) string {
		t.Helper()
		var got struct {
			HookSpecificOutput map[string]map[string]any
		}
		json.Unmarshal([]byte(out), &got)
		c, _ := got.HookSpecificOutput[field]["command"].(string)
		if !strings.Contains(c, "'--ticket' '") {
			t.Fatalf("no ticket in %s", out)
		}
		return c
	}
	out, _, _ := runHook(t, "codex", dir, `{"cwd":"`+wd+`","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch allowed"},"tool_use_id":"c"}`)
	codex := wrapped(out, "updatedInput")
	out, _, _ = runHook(t, "gemini-cli", dir, `{"cwd":"`+wd+`","hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"touch review"}}`)
	gemini := wrapped(out, "tool_input")
	if !strings.Contains(out, `"decision":"ask"`) || !strings.Contains(gemini, "'--approved'") {
		t.Errorf("gemini's asked command: %s", out)
	}
	// These policies let the shells write nothing, so touch runs in a
	// read-only sandbox and says so: it ran; on the second run it does not.
	u := gatewayUser{name: "self", uid: -1, gid: -1}
	for _, c := range []struct{ note, line string }{{"codex", codex}, {"gemini-cli", gemini}} {
		if out, code := runAs(t, u, wd, c.line); code == exitNotRun || !strings.Contains(out, "touch: cannot touch") {
			t.Errorf("%s: the wrapped command did not run: %d\n%s", c.note, code, out)
		}
		if out, code := runAs(t, u, wd, c.line); code != exitNotRun || strings.Contains(out, "touch:") || !strings.Contains(out, "already used") {
			t.Errorf("%s: the command ran again on its ticket: %d\n%s", c.note, code, out)
		}
	}
}
