package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"aimon.dev/gw/internal/testkit/policydir"
)

// The hostile cases of rule P16, end to end through the binary: with
// Bash(touch:*) denied and Bash(rm:*) under ask, no program a command
// starts runs touch, or rm unapproved, however it starts it; through
// serve, mcp and the hook's exec alike, as root and as nobody.

// p16Carrier is a command that starts a denied touch through a program
// the reading of the command line cannot follow; it would create marker.
type p16Carrier struct{ note, command, marker string }

// p16Carriers is the one table of carriers every front end runs.
var p16Carriers = []p16Carrier{
	{"perl", `perl -e 'system q{touch},q{perl}'`, "perl"},
	{"perl -e system", `perl -e 'system "touch perlsys"'`, "perlsys"},
	{"python3 -c", `python3 -c 'import os; os.system("touch python")'`, "python"},
	{"python3 script", `python3 p.py`, "pyscript"},
	{"git alias", `git -c alias.t='!touch gitalias' t`, "gitalias"},
	{"git core.sshCommand", `git -c core.sshCommand='touch sshcmd' ls-remote ssh://h/r`, "sshcmd"},
	{"git core.fsmonitor", `git -c core.fsmonitor='touch fsmon' status`, "fsmon"},
	{"git core.editor", `git -c core.editor='touch editor' commit --no-verify --allow-empty`, "editor"},
	{"git diff.external", `git -c diff.external='touch diffext' diff`, "diffext"},
	{"git difftool -x", `git difftool -y -x 'touch difftool'`, "difftool"},
	{"git pre-commit hook", `git commit -q --allow-empty -m m`, "precommit"},
	{"ssh ProxyCommand", `ssh -F /dev/null -o BatchMode=yes -o ProxyCommand='touch proxy' h true`, "proxy"},
	{"link", `./t link`, "link"},
	{"copy", `./c copy`, "copy"},
	{"PATH plant", `PATH=./pb ls plant`, "plant"},
	{"bash s.sh", `bash s.sh`, "script"},
	{". s.sh", `. ./d.sh`, "dot"},
	{"source s.sh", `source ./src.sh`, "source"},
	{"tar", `tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='touch tar' /etc/hostname`, "tar"},
	{"sed", `sed '1e touch sed' /etc/hostname`, "sed"},
	{"flock", `flock F touch flock`, "flock"},
	{"chrt", `chrt -o 0 touch chrt`, "chrt"},
	{"prlimit", `prlimit --nofile=256 touch prlimit`, "prlimit"},
	{"setpriv", `setpriv --no-new-privs touch setpriv`, "setpriv"},
	{"ssh-agent", `ssh-agent touch sshagent`, "sshagent"},
	{"rbash -c", `rbash -c 'touch rbash'`, "rbash"},
	{"bash --rcfile", `bash --rcfile rc -i -c true`, "rcfile"},
	{"loader", `/lib64/ld-linux-x86-64.so.2 ./c loader`, "loader"},
}

// p16Lists deny touch and ask for rm.
const p16Lists = `agent: "denied-tools": ["Bash(touch:*)"]
agent: "ask-tools": ["Bash(rm:*)"]`

// p16Env is one layout the gateway serves, as one user.
type p16Env struct {
	u                                  gatewayUser
	root, proj, policy, log, key, home string
	env                                []string
	gw                                 string   // the gateway's binary, when not gatewayBinary's
	hookArgs                           []string // the hook's flags besides --policy, --decision-log and --cache
}

// bin is the command line that starts the gateway as the layout's user.
func (e *p16Env) bin(t *testing.T) []string {
	if e.gw != "" {
		return append(slices.Clone(e.u.prefix), e.gw)
	}
	return append(slices.Clone(e.u.prefix), gatewayBinary(t))
}

// p16Layout is a project whose policy allows Bash and writes in it,
// denies touch and asks for rm, holding what an agent would have written
// with allowed calls: a link to touch, copies of it, scripts, a git
// repository with a change and a pre-commit hook. lists are the policy's
// deny and ask entries.
func p16Layout(t testing.TB, u gatewayUser, lists string) *p16Env {
	t.Helper()
	root, err := os.MkdirTemp("/var/tmp", "aimon-gw-p16")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	e := &p16Env{u: u, root: root, proj: root + "/proj", policy: root + "/policy", log: root + "/log/decisions.jsonl", key: root + "/key", home: root + "/home"}
	for _, d := range []string{e.proj, e.policy + "/cue.mod", root + "/log", e.home, root + "/state"} {
		os.MkdirAll(d, 0o755)
	}
	e.env = []string{"HOME=" + e.home, "XDG_CACHE_HOME=" + e.home + "/.cache", "XDG_STATE_HOME=" + e.home + "/.state"}
	policydir.WriteIn(t, e.policy, map[string]string{"policy.cue": fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

// The copies must run to be known by what they are: sandbox.exec lets
// what the agent wrote in the project run, still judged.
tools: {Write: schema.#Write, Bash: schema.#Bash & {sandbox: exec: ["./**"]}}
agent: "allowed-tools": ["Write(%[1]s/**)", "Bash"]
%[2]s
`, e.proj, lists)})
	if err := os.WriteFile(e.key, []byte(strings.Repeat("p16-", 16)), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.proj+"/victim", "keep\n")
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink(touch, e.proj+"/t")
	copyFile(t, touch, e.proj+"/c")
	os.MkdirAll(e.proj+"/pb", 0o755)
	copyFile(t, touch, e.proj+"/pb/ls")
	writeFile(t, e.proj+"/s.sh", "touch script\n")
	writeFile(t, e.proj+"/d.sh", "touch dot\n")
	writeFile(t, e.proj+"/src.sh", "touch source\n")
	writeFile(t, e.proj+"/rc", "touch rcfile\n")
	writeFile(t, e.proj+"/p.py", "import os\nos.system('touch pyscript')\n")
	git := func(args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = e.proj
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("config", "user.name", "agent")
	git("config", "user.email", "agent@example.com")
	writeFile(t, e.proj+"/f", "one\n")
	git("add", "f")
	git("commit", "-q", "-m", "one")
	writeFile(t, e.proj+"/f", "two\n")
	if err := os.WriteFile(e.proj+"/.git/hooks/pre-commit", []byte("#!/bin/sh\ntouch precommit\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return e
}

// p16Reply is what a call returned, as its front end shows it.
type p16Reply struct {
	text    string
	isError bool
}

// p16Front is a way an agent's Bash call reaches the gateway: calls runs
// commands as calls with ids, one reply each; approved runs one that asks
// as a person would have approved it.
type p16Front struct {
	name     string
	calls    func(t *testing.T, e *p16Env, ids, commands []string) []p16Reply
	approved func(t *testing.T, e *p16Env, id, command string) p16Reply
}

var p16Fronts = []p16Front{
	{"serve", p16Serve, p16ServeApproved},
	{"mcp", p16MCP, p16MCPApproved},
	{"hook exec", p16Hook, p16HookApproved},
}

func (e *p16Env) serveArgs() []string {
	return []string{"--policy", e.policy, "--workdir", e.proj, "--decision-log", e.log, "--approval-key", e.key, "--state", e.root + "/state", "--cache", "off"}
}

func p16Serve(t *testing.T, e *p16Env, ids, commands []string) []p16Reply {
	t.Helper()
	lines := make([]string, len(commands))
	for i, c := range commands {
		lines[i] = bashLine(ids[i], c)
	}
	var out []p16Reply
	for _, r := range runServeAs(t, e.bin(t), e.serveArgs(), e.env, lines...) {
		out = append(out, p16Reply{text(r), r["is_error"] != false})
	}
	return out
}

// p16ServeApproved asks, then sends the call back with its token.
func p16ServeApproved(t *testing.T, e *p16Env, id, command string) p16Reply {
	t.Helper()
	first := runServeAs(t, e.bin(t), e.serveArgs(), e.env, bashLine(id+"-ask", command))
	m := tokenRE.FindStringSubmatch(text(first[0]))
	if m == nil {
		t.Fatalf("serve must answer %q with an approval token: %v", command, first[0])
	}
	b, _ := json.Marshal(map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": command}, "approvals": []string{m[1]}})
	r := runServeAs(t, e.bin(t), e.serveArgs(), e.env, string(b))[0]
	return p16Reply{text(r), r["is_error"] != false}
}

// p16MCPSession is the binary's mcp on stdio, as the layout's user, with
// a client that approves what it is asked when approve says so.
func p16MCPSession(t *testing.T, e *p16Env, approve bool) *mcp.ClientSession {
	t.Helper()
	bin := e.bin(t)
	cmd := exec.Command(bin[0], append(bin[1:], "mcp", "--policy", e.policy, "--workdir", e.proj, "--decision-log", e.log, "--cache", "off")...)
	cmd.Env = append(os.Environ(), e.env...)
	var opts *mcp.ClientOptions
	if approve {
		opts = &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	s, err := mcp.NewClient(&mcp.Implementation{Name: "p16", Version: "v0"}, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		cancel()
		t.Fatalf("mcp: %v", err)
	}
	t.Cleanup(func() { s.Close(); cancel() })
	return s
}

func p16MCPCall(t *testing.T, s *mcp.ClientSession, command string) p16Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatalf("mcp call %q: %v", command, err)
	}
	return p16Reply{resultText(r), r.IsError}
}

func p16MCP(t *testing.T, e *p16Env, _, commands []string) []p16Reply {
	t.Helper()
	s := p16MCPSession(t, e, false)
	var out []p16Reply
	for _, c := range commands {
		out = append(out, p16MCPCall(t, s, c))
	}
	return out
}

func p16MCPApproved(t *testing.T, e *p16Env, _, command string) p16Reply {
	t.Helper()
	return p16MCPCall(t, p16MCPSession(t, e, true), command)
}

// hookAnswer is Claude Code's reading of the hook's answer.
type hookAnswer struct {
	Out struct {
		Decision string         `json:"permissionDecision"`
		Reason   string         `json:"permissionDecisionReason"`
		Updated  map[string]any `json:"updatedInput"`
	} `json:"hookSpecificOutput"`
}

// p16HookAnswer runs the hook on a Bash call as Claude Code would, and
// then, when it allows or asks, the command it hands back, as Claude Code
// runs it (after a person said yes, for an ask).
func p16HookAnswer(t *testing.T, e *p16Env, id, command string) (decision string, r p16Reply) {
	t.Helper()
	decision, wrapped, reason := p16HookWrap(t, e, id, command)
	if decision == "deny" {
		return decision, p16Reply{reason, true}
	}
	return decision, p16RunWrapped(t, e, wrapped)
}

// p16HookWrap asks the hook about command as Claude Code does, as the
// layout's user: its decision and the command wrapped in exec it answers,
// or the reason it denies it.
func p16HookWrap(t *testing.T, e *p16Env, id, command string) (decision, wrapped, reason string) {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"cwd": e.proj, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": id,
		"session_id": "p16", "tool_input": map[string]any{"command": command}})
	bin := e.bin(t)
	h := exec.Command(bin[0], append(append(bin[1:], "hook", "claude-code", "--policy", e.policy, "--decision-log", e.log, "--cache", "off"), e.hookArgs...)...)
	h.Dir, h.Env, h.Stdin = e.proj, append(os.Environ(), e.env...), strings.NewReader(string(in))
	out, err := h.Output()
	if err != nil {
		t.Fatalf("hook on %q: %v %s", command, err, out)
	}
	var ans hookAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		t.Fatalf("hook answer %q: %v", out, err)
	}
	if ans.Out.Decision == "deny" {
		return "deny", "", ans.Out.Reason
	}
	wrapped, _ = ans.Out.Updated["command"].(string)
	if !strings.Contains(wrapped, " 'exec' ") {
		t.Fatalf("the hook must hand %q to exec: %s", command, out)
	}
	return ans.Out.Decision, wrapped, ""
}

// p16RunWrapped runs the command the hook answered, as Claude Code runs
// it, as the layout's user.
func p16RunWrapped(t *testing.T, e *p16Env, wrapped string) p16Reply {
	t.Helper()
	c := exec.Command("bash", "-c", wrapped)
	if e.u.uid >= 0 {
		c = exec.Command(e.u.prefix[0], append(e.u.prefix[1:], "bash", "-c", wrapped)...)
	}
	c.Dir, c.Env = e.proj, append(os.Environ(), e.env...)
	got, err := c.CombinedOutput()
	return p16Reply{string(got), err != nil}
}

func p16Hook(t *testing.T, e *p16Env, ids, commands []string) []p16Reply {
	t.Helper()
	var out []p16Reply
	for i, c := range commands {
		_, r := p16HookAnswer(t, e, ids[i], c)
		out = append(out, r)
	}
	return out
}

func p16HookApproved(t *testing.T, e *p16Env, id, command string) p16Reply {
	t.Helper()
	d, r := p16HookAnswer(t, e, id, command)
	if d != "ask" {
		t.Fatalf("the hook must ask for %q: %s %v", command, d, r)
	}
	return r
}

// p16Records are the decision log's records of refused programs.
func p16Records(t *testing.T, e *p16Env) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range readRecords(t, e.log) {
		if r["phase"] == "program" {
			out = append(out, r)
		}
	}
	return out
}

// TestP16ProgramsAreJudgedWhereTheyStart: through every front end, as
// root and as nobody, no carrier runs the denied touch (the marker it
// would create is not there) and each call fails with a sentence naming
// the entry; allowed programs the same carriers start still run; rm under
// ask, started by perl, leaves the victim; a refusal is recorded in the
// decision log, once, with the program, its arguments, the entry and the
// call's id, before the call's result.
func TestP16ProgramsAreJudgedWhereTheyStart(t *testing.T) {
	p16EachFront(t, p16Carried)
}

// p16EachFront runs test on a fresh layout through each front end, as
// each gateway user.
func p16EachFront(t *testing.T, test func(t *testing.T, f p16Front, e *p16Env)) {
	t.Parallel()
	needBwrap(t)
	for _, f := range p16Fronts {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			for _, u := range gatewayUsers(t) {
				t.Run(u.name, func(t *testing.T) { test(t, f, p16Layout(t, u, p16Lists)) })
			}
		})
	}
}

func p16Carried(t *testing.T, f p16Front, e *p16Env) {
	ids := []string{"control", "control-git", "ask"}
	commands := []string{`perl -e 'system q{echo},q{ran}'`, `git -c alias.e='!echo py' e`, `perl -e 'system q{rm},q{victim}'`}
	for i, c := range p16Carriers {
		ids, commands = append(ids, fmt.Sprintf("carrier-%d", i)), append(commands, c.command)
	}
	replies := f.calls(t, e, ids, commands)
	if r := replies[0].text + replies[1].text; replies[0].isError || replies[1].isError || !strings.Contains(r, "ran") || !strings.Contains(r, "py") {
		t.Errorf("allowed programs started by perl and git did not run: %v", replies[:2])
	}
	if r := replies[2]; !r.isError || !strings.Contains(r.text, "rm victim") || !strings.Contains(r.text, "ask for it as a call of its own") {
		t.Errorf("rm under ask, started by perl, was not refused as unapproved, naming it: %v", r)
	}
	if _, err := os.Stat(e.proj + "/victim"); err != nil {
		t.Errorf("rm under ask ran unapproved: %v", err)
	}
	for i, c := range p16Carriers {
		if r := replies[i+3]; !r.isError || !strings.Contains(r.text, "Bash(touch:*)") {
			t.Errorf("%s: the call does not fail naming the entry: %v", c.note, r)
		}
		if _, err := os.Stat(filepath.Join(e.proj, c.marker)); err == nil {
			t.Errorf("%s: the denied touch ran (%s was created)", c.note, c.marker)
		}
	}
	// perl's touch is refused where it starts, not on the command line:
	// the sentence names the program, its arguments and the entry.
	if r := replies[3]; !strings.Contains(r.text, "touch perl is denied on this surface by Bash(touch:*)") {
		t.Errorf("the refusal must name the program, its arguments and the entry: %v", r)
	}
	p16Recorded(t, f, e)
}

// p16Recorded checks the decision log's record of perl's touch: one, of
// rule P16, with the call's id, the program, its argument vector and the
// entry, after the call's decision and before its result.
func p16Recorded(t *testing.T, f p16Front, e *p16Env) {
	t.Helper()
	data, err := os.ReadFile(e.log)
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		recs = append(recs, m)
	}
	var prog map[string]any
	for _, r := range recs {
		if r["phase"] == "program" && r["subject"] == p16Carriers[0].command {
			prog = r
		}
	}
	if prog == nil {
		t.Fatalf("%s: no record of the refused program in the decision log: %s", f.name, data)
	}
	if f.name != "mcp" && prog["call_id"] != "carrier-0" { // mcp's ids are the session's own
		t.Errorf("%s: the record of the refused program does not carry the call's id: %v", f.name, prog)
	}
	var perl []int // the records of the perl carrier's call, in order
	for i, r := range recs {
		if r["call_id"] == prog["call_id"] {
			perl = append(perl, i)
		}
	}
	argv, _ := json.Marshal(prog["argv"])
	if prog["rule"] != "P16" || prog["allowed"] != false || fmt.Sprint(prog["entries"]) != "[Bash(touch:*)]" || string(argv) != `["touch","perl"]` ||
		!strings.HasSuffix(fmt.Sprint(prog["program"]), "/touch") || prog["subject"] != p16Carriers[0].command || prog["tool"] != "Bash" {
		t.Errorf("%s: the record of the refused program: %v", f.name, prog)
	}
	phases := []string{}
	for _, i := range perl {
		phases = append(phases, fmt.Sprint(recs[i]["phase"]))
	}
	want := "[running program result]"
	if f.name == "hook exec" {
		want = "[decided program]" // the hook decided; exec recorded the refusal
	}
	if fmt.Sprint(phases) != want {
		t.Errorf("%s: the perl call's records are %v; want %s (the refusal between the decision and the result)", f.name, phases, want)
	}
	seen := map[string]bool{}
	for _, r := range p16Records(t, e) {
		k := fmt.Sprint(r["call_id"], r["subject"], r["argv"])
		if seen[k] {
			t.Errorf("%s: a refused program recorded twice in one call: %v", f.name, r)
		}
		seen[k] = true
	}
}

// TestP16CarriersStartTheProgramWhenAllowed: the carriers are real: with
// nothing denied, each creates its marker. Without this the test above
// could pass on a carrier that runs nothing.
func TestP16CarriersStartTheProgramWhenAllowed(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	e := p16Layout(t, gatewayUser{name: "self", uid: -1, gid: -1}, "")
	var ids, commands []string
	for i, c := range p16Carriers {
		ids, commands = append(ids, fmt.Sprintf("carrier-%d", i)), append(commands, c.command)
	}
	replies := p16Serve(t, e, ids, commands)
	for i, c := range p16Carriers {
		if _, err := os.Stat(filepath.Join(e.proj, c.marker)); err != nil {
			t.Errorf("%s: %q did not start touch even where it is allowed: %v; it returned %v", c.note, c.command, err, replies[i])
		}
	}
}

// TestP16AskedProgramRunsOnlyAsApproved: rm under ask runs where a person
// approved the call that is exactly rm victim, through each front end, as
// root and as nobody; unapproved (above) it never does.
func TestP16AskedProgramRunsOnlyAsApproved(t *testing.T) {
	p16EachFront(t, func(t *testing.T, f p16Front, e *p16Env) {
		r := f.approved(t, e, "approved", "rm victim")
		if _, err := os.Stat(e.proj + "/victim"); err == nil || r.isError {
			t.Errorf("the approved rm victim did not run: %v", r)
		}
	})
}
