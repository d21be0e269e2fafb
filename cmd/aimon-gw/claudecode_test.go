package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/claudecode"
)

// claudeRun is one claude -p run of the real CLI in a project of its own,
// with the hook under policy as its PreToolUse hook, against a model that
// answers with scripts; it returns the project and the server, whose
// results say what Claude Code sent back for each call.
type claudeRun struct {
	t             *testing.T
	project, home string
	policy        string
	server        *claudecode.Server
	// post makes the hook Claude Code's PostToolUse hook too, and prompt
	// its UserPromptSubmit hook (rule P18).
	post, prompt bool
	// words is the prompt Claude Code is run on, which holds the key of
	// the script; the key alone when "".
	words string
	// mcp are the MCP servers Claude Code runs itself (--mcp-config).
	mcp map[string]any
}

func newClaudeRun(t *testing.T, policy string) *claudeRun {
	t.Helper()
	claudecode.Find(t, "../../.ci/npm/node_modules/.bin/claude")
	root, _ := filepath.EvalSymlinks(t.TempDir())
	r := &claudeRun{t: t, project: filepath.Join(root, "proj"), home: filepath.Join(root, "home"), policy: policy}
	for _, d := range []string{r.project, r.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run runs Claude Code on the prompt key with the scripts.
func (r *claudeRun) run(key string, scripts ...claudecode.Script) string {
	r.t.Helper()
	r.server = claudecode.Serve(r.t, scripts...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hook := shellQuote(gatewayBinary(r.t)) + " hook claude-code --policy " + shellQuote(r.policy)
	prompt := key
	if r.words != "" {
		prompt = r.words
	}
	out, err := claudecode.Run{Claude: claudecode.Find(r.t, "../../.ci/npm/node_modules/.bin/claude"), Hook: hook,
		Project: r.project, Home: r.home, Prompt: prompt, PostToolUse: r.post, UserPromptSubmit: r.prompt, MCPServers: r.mcp}.Start(ctx, r.server)
	if err != nil {
		r.t.Fatalf("claude -p: %v\n%s", err, out)
	}
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func use(tool string, kv ...any) claudecode.Use {
	in := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		in[kv[i].(string)] = kv[i+1]
	}
	return claudecode.Use{Tool: tool, Input: in}
}

// TestP14ClaudeCodeHoldsToday drives the real Claude Code with the hook:
// an allowed Write lands, a Write into a denied directory and a denied or
// unlisted Bash command change nothing, an allowed command runs through
// exec, and a declared subagent is decided on its own surface (rules P10,
// P14, R7).
func TestP14ClaudeCodeHoldsToday(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Agent", "Task", "Write(./**)", "Bash(echo:*)", "Bash(touch:*)", "Bash(rm:*)"]
agent: "denied-tools": ["Write(./secret/**)", "Bash(rm:*)"]
subagents: reviewer: "allowed-tools": ["Read"]
`)
	r := newClaudeRun(t, policy)
	writeFile(t, filepath.Join(r.project, ".claude", "agents", "reviewer.md"), "---\nname: reviewer\ndescription: reviews\ntools: Read, Write\n---\nReview.\n")
	p := func(name string) string { return filepath.Join(r.project, name) }
	// The denied directory exists: the sandbox binds it read-only (one
	// still to be made would take the project with it).
	os.Mkdir(p("secret"), 0o755)
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("Write", "file_path", p("ok.txt"), "content", "ok")},
		{use("Write", "file_path", p("secret/x"), "content", "no"),
			use("Bash", "command", "rm ok.txt"),
			use("Bash", "command", "echo hi > echoed.txt")},
		{use("Bash", "command", "touch touched.txt"),
			use("Agent", "description", "review", "prompt", "SUB review", "subagent_type", "reviewer")},
	}}, claudecode.Script{Key: "SUB", Turns: [][]claudecode.Use{
		{use("Write", "file_path", p("sub.txt"), "content", "sub")},
	}})
	for name, want := range map[string]bool{"ok.txt": true, "secret/x": false, "echoed.txt": false, "touched.txt": true, "sub.txt": false} {
		if _, err := os.Stat(p(name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
	for id, want := range map[string]string{
		claudecode.ID("MAIN", 1, 0): "is denied on this surface by Write(",
		claudecode.ID("MAIN", 1, 1): "denied",
		claudecode.ID("SUB", 0, 0):  "Write is not allowed",
	} {
		if got := r.server.Result(id); !strings.Contains(got, want) {
			t.Errorf("result of %s: %q, want %q in it", id, got, want)
		}
	}
}

// TestR9ClaudeCodeCannotSwitchTheGateOff: the real Claude Code, whose
// lists allow Write(./**) and cp, cannot write the settings that make it
// call the hook: a Write of {} to .claude/settings.json, by its name, by
// a .. spelling and through a link the session made, and a cp of
// {"disableAllHooks": true} into .claude/settings.local.json are refused,
// and the next write into a denied directory is still refused.
func TestR9ClaudeCodeCannotSwitchTheGateOff(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read", "Write(./**)", "Edit(./**)", "Bash(cp:*)", "Bash(ln:*)"]
agent: "denied-tools": ["Write(./secret/**)"]
`)
	r := newClaudeRun(t, policy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	os.Mkdir(p("secret"), 0o755)
	settings := p(".claude/settings.json")
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("Read", "file_path", settings),
			use("Write", "file_path", p("off.json"), "content", `{"disableAllHooks": true}`),
			use("Bash", "command", "ln -s .claude lnk")},
		{use("Write", "file_path", settings, "content", "{}")},
		{use("Write", "file_path", p("secret/../.claude/settings.json"), "content", "{}")},
		{use("Write", "file_path", p("lnk/settings.local.json"), "content", `{"disableAllHooks": true}`)},
		{use("Bash", "command", "cp off.json .claude/settings.local.json")},
		{use("Write", "file_path", p("secret/after"), "content", "no")},
	}})
	if b, err := os.ReadFile(settings); err != nil || !strings.Contains(string(b), "aimon-gw") {
		t.Errorf(".claude/settings.json was rewritten: %q %v", b, err)
	}
	for _, name := range []string{".claude/settings.local.json", "secret/after"} {
		if _, err := os.Stat(p(name)); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	for turn, want := range map[int]string{1: "rule R9", 2: "rule R9", 3: "rule R9", 4: "Read-only file system", 5: "is denied on this surface"} {
		if got := r.server.Result(claudecode.ID("MAIN", turn, 0)); !strings.Contains(got, want) {
			t.Errorf("turn %d: %q, want %q in it", turn, got, want)
		}
	}
}

// TestR6ClaudeCodeAllowEntriesFollowLinks: under the hook Claude Code
// opens the file itself, so Read(./**) and Write(./**) judge where a path
// leads: through a link the session made to a directory outside, Write
// creates nothing there, and a Read of a link to ~/.bashrc returns none of
// it, each refused with a sentence naming the link and where it leads; a
// link to a directory inside the project is followed (rule R6).
func TestR6ClaudeCodeAllowEntriesFollowLinks(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read(./**)", "Write(./**)", "Bash(ln:*)"]
`)
	r := newClaudeRun(t, policy)
	outside := filepath.Join(filepath.Dir(r.project), "outside")
	os.Mkdir(outside, 0o755)
	writeFile(t, filepath.Join(r.home, ".bashrc"), "export SECRET=bashrc-contents\n")
	os.Mkdir(filepath.Join(r.project, "sub"), 0o755)
	p := func(name string) string { return filepath.Join(r.project, name) }
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("Bash", "command", "ln -s "+outside+" lnk")},
		{use("Bash", "command", "ln -s "+filepath.Join(r.home, ".bashrc")+" rc")},
		{use("Bash", "command", "ln -s sub inner")},
		{use("Write", "file_path", p("lnk/new.txt"), "content", "out"),
			use("Read", "file_path", p("rc")),
			use("Write", "file_path", p("inner/ok.txt"), "content", "in")},
	}})
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("Write created a file outside through a link")
	}
	if _, err := os.Stat(p("sub/ok.txt")); err != nil {
		t.Errorf("a Write through a link inside the project: %v", err)
	}
	for i, want := range []string{"leads through a symbolic link to \"" + outside + "/new.txt\"", "leads through a symbolic link to \"" + filepath.Join(r.home, ".bashrc") + "\""} {
		got := r.server.Result(claudecode.ID("MAIN", 3, i))
		if !strings.Contains(got, want) || strings.Contains(got, "bashrc-contents") {
			t.Errorf("call %d: %q, want %q in it", i, got, want)
		}
	}
}

// TestR6ClaudeCodeCdCarriesOver: under the hook, a leading cd moves the
// real Claude Code's working directory as it does without the hook, and
// what follows it runs in the sandbox there: cd sub, then pwd > marker,
// writes sub/marker naming sub; cd .. && touch lands in the project. A cd
// out of the project, into a directory the lists deny, or through a link
// that leads outside is refused, moves nothing, and the command after it
// runs nowhere else (issue 42 item 5).
func TestR6ClaudeCodeCdCarriesOver(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	policy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools
agent: "allowed-tools": ["Read(./**)", "Write(./**)", "Bash"]
agent: "denied-tools": ["Read(./secret/**)"]
`)
	r := newClaudeRun(t, policy)
	p := func(name string) string { return filepath.Join(r.project, name) }
	outside := filepath.Join(filepath.Dir(r.project), "outside")
	for _, d := range []string{p("sub"), p("secret"), outside} {
		os.MkdirAll(d, 0o755)
	}
	if err := os.Symlink(outside, p("out")); err != nil {
		t.Fatal(err)
	}
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("Bash", "command", "cd sub")},
		{use("Bash", "command", "pwd > marker")},
		{use("Bash", "command", "cd "+outside)},
		{use("Bash", "command", "cd ../secret && touch s.txt")},
		{use("Bash", "command", "cd ../out && touch o.txt")},
		{use("Bash", "command", "pwd > marker2")},
		{use("Bash", "command", "cd .. && touch top.txt")},
		{use("Bash", "command", "pwd > marker3")},
	}})
	for name, want := range map[string]string{"sub/marker": p("sub"), "sub/marker2": p("sub"), "marker3": r.project} {
		if b, err := os.ReadFile(p(name)); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s: %q %v, want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(p("top.txt")); err != nil {
		t.Errorf("cd .. && touch top.txt: %v", err)
	}
	for _, name := range []string{p("marker"), p("secret/s.txt"), p("sub/s.txt"), filepath.Join(outside, "o.txt"), filepath.Join(outside, "marker2"), p("sub/o.txt")} {
		if _, err := os.Stat(name); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	for turn, want := range map[int]string{2: "outside the project", 3: "do not let its directory", 4: "outside the project"} {
		if got := r.server.Result(claudecode.ID("MAIN", turn, 0)); !strings.Contains(got, "cd ") || !strings.Contains(got, want) {
			t.Errorf("turn %d: %q, want %q in it", turn, got, want)
		}
	}
}

// TestP17ClaudeCodeReadDenyBindsADeclaredMCPReader: the real Claude Code
// runs the npm filesystem server itself, allowed as mcp__fs and rooted
// where the secret is too; the hook policy declares its read_text_file
// with a path subject, so Read's deny binds it as it binds Read: the
// secret, by its name and through a link in the project, is never
// returned, and a file of the project is (hostile re-probe Q7). vet warns
// that the server's other tools are decided by name beside such a deny.
func TestP17ClaudeCodeReadDenyBindsADeclaredMCPReader(t *testing.T) {
	t.Parallel()
	fs := npmBin(t, "mcp-server-filesystem")
	const declared = `package policy

import "aimon.dev/gw/schema/claudecode"

tools: claudecode.#Tools & {
	mcp__fs__read_text_file: claudecode.#Tool & {
		effect: "read"
		input: {path!: string, head?: number, tail?: number}
		subject: {field: "path", kind: "path"}
	}
}
agent: "allowed-tools": ["Read", "mcp__fs"]
agent: "denied-tools": ["Read(%s/**)"]
`
	r := newClaudeRun(t, "")
	secret := filepath.Join(filepath.Dir(r.project), "secret")
	writeFile(t, filepath.Join(secret, "s.txt"), "the-secret-words\n")
	writeFile(t, filepath.Join(r.project, "ok.txt"), "project-words\n")
	if err := os.Symlink(filepath.Join(secret, "s.txt"), filepath.Join(r.project, "lnk")); err != nil {
		t.Fatal(err)
	}
	r.policy = moduleDir(t, fmt.Sprintf(declared, secret))
	r.mcp = map[string]any{"fs": map[string]any{"command": fs, "args": []string{filepath.Dir(r.project)}}}
	r.run("MAIN", claudecode.Script{Key: "MAIN", Turns: [][]claudecode.Use{
		{use("mcp__fs__read_text_file", "path", filepath.Join(secret, "s.txt"))},
		{use("mcp__fs__read_text_file", "path", filepath.Join(r.project, "lnk"))},
		{use("mcp__fs__read_text_file", "path", filepath.Join(r.project, "ok.txt"))},
	}})
	for turn, want := range []string{"is denied on this surface by Read(", "leads through a symbolic link to", "project-words"} {
		got := r.server.Result(claudecode.ID("MAIN", turn, 0))
		if !strings.Contains(got, want) || strings.Contains(got, "the-secret-words") {
			t.Errorf("turn %d: %q, want %q in it and never the secret", turn, got, want)
		}
	}
	// The server's other tools are still decided by name, which vet says.
	out, err := exec.Command(gatewayBinary(t), "vet", r.policy).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `warning: agent allowed-tools entry "mcp__fs" allows MCP tools the policy does not declare`) {
		t.Errorf("vet of a server-wide entry beside a Read deny: %v\n%s", err, out)
	}
}
