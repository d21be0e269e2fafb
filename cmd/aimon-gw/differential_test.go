package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestR7FrontEndsAgree is the differential test of the one decision: over
// the shipped example policies and a generated corpus of calls (relative,
// "~", climbing and blank paths, nulls, a name given twice, chained
// commands), on every surface chain, serve, check, mcp and the hook give
// the same verdict by the same rule, and the decision log holds exactly
// one record per call (issue 26).
func TestR7FrontEndsAgree(t *testing.T) {
	t.Parallel()
	bin := gatewayBinary(t)
	for _, tc := range []struct {
		note, policy string
		chains       []string
		outcomes     []string // that some call of the corpus has on every chain
	}{
		{note: "team", policy: "team", chains: []string{"agent,subagent:docs-writer", "agent", "agent,subagent:reviewer", "agent,skill:lint", "agent,command:test", "agent,subagent:nobody"}},
		{note: "team in YAML", policy: "yaml", chains: []string{"agent", "agent,subagent:reviewer", "agent,subagent:docs-writer"}},
		{note: "Claude Code", policy: "claude-code", chains: []string{"agent,subagent:reviewer", "agent"}},
		{note: "deny and ask", policy: "../../cmd/aimon-gw/testdata/policies/denyask", chains: []string{"agent", "agent,subagent:reviewer"}, outcomes: []string{"allowed", "ask P14", "denied P14", "denied P9", "denied S9", "denied R7"}},
	} {
		t.Run(tc.note, func(t *testing.T) {
			t.Parallel()
			root, _ := filepath.EvalSymlinks(t.TempDir())
			os.MkdirAll(filepath.Join(root, "repo", "docs"), 0o755)
			dir := copyPolicy(t, filepath.Join("../../examples/policies", tc.policy), "/srv/repo", filepath.Join(root, "repo"))
			wd := filepath.Join(root, "repo")
			lines := corpus(filepath.Join(root, "repo"))
			for i, chain := range tc.chains {
				logs := t.TempDir()
				served := filepath.Join(logs, "serve.jsonl")
				serve := exec.Command(bin, "serve", "--policy", dir, "--workdir", wd, "--surface", chain, "--decision-log", served)
				serve.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
				serve.Dir = wd
				if out, err := serve.CombinedOutput(); err != nil && !strings.Contains(chain, "nobody") {
					t.Fatalf("serve on %s: %v\n%s", chain, err, out)
				}
				// The last line names "name" twice: no call, so no record;
				// check refuses the whole input for it (exit 2, the line
				// named with what serve says of it), and decides the rest.
				check := exec.Command(bin, "check", "--policy", dir, "--workdir", wd, "--surface", chain, "-")
				check.Stdin = strings.NewReader(strings.Join(lines[:len(lines)-1], "\n") + "\n")
				checked, _ := check.Output()
				if strings.Contains(chain, "nobody") {
					continue // an undeclared surface: refused before any call
				}
				bad := exec.Command(bin, "check", "--policy", dir, "--workdir", wd, "--surface", chain, "-")
				bad.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
				var badErr strings.Builder
				bad.Stderr = &badErr
				if out, _ := bad.Output(); bad.ProcessState.ExitCode() != 2 || len(out) > 0 || !strings.Contains(badErr.String(), fmt.Sprintf("line %d of standard input", len(lines))) || !strings.Contains(badErr.String(), `gives the name "name" twice`) {
					t.Errorf("check on a corpus whose line %d names \"name\" twice: exit %d, %q on stdout, %q", len(lines), bad.ProcessState.ExitCode(), out, badErr.String())
				}
				records := readRecords(t, served)
				verdicts := strings.Split(strings.TrimSpace(string(checked)), "\n")
				if len(records) != len(lines)-1 || len(verdicts) != len(lines)-1 {
					t.Fatalf("%s: %d lines, %d records, %d verdicts; want a record and a verdict for each call\n%s", chain, len(lines), len(records), len(verdicts), checked)
				}
				viaMCP := mcpRecords(t, dir, wd, chain, lines)
				seen := map[string]bool{}
				for j, line := range lines[:len(lines)-1] {
					var v map[string]any
					json.Unmarshal([]byte(verdicts[j]), &v)
					r := records[j]
					if v["allowed"] != r["allowed"] || v["rule"] != r["rule"] {
						t.Errorf("%s, %s:\n  serve: %v by %v: %v\n  check: %v by %v: %v", chain, line, r["allowed"], r["rule"], r["reason"], v["allowed"], v["rule"], v["reason"])
					}
					seen[outcomeOf(r)] = true
					if m := viaMCP[j]; m != nil && (m["allowed"] != r["allowed"] || m["ask"] != r["ask"] || m["rule"] != r["rule"]) {
						t.Errorf("%s, %s:\n  serve: %v by %v: %v\n  mcp:   %v by %v: %v", chain, line, r["allowed"], r["rule"], r["reason"], m["allowed"], m["rule"], m["reason"])
					}
					// The hook, a process per call, is asked on the first
					// chain of each policy: the one that narrows most.
					if i == 0 && hookChain(chain) && !strings.Contains(line, "~") {
						if h := hookRecord(t, bin, dir, wd, chain, line); h != nil && (h["allowed"] != r["allowed"] || h["rule"] != r["rule"]) {
							t.Errorf("%s, %s:\n  serve: %v by %v: %v\n  hook:  %v by %v: %v", chain, line, r["allowed"], r["rule"], r["reason"], h["allowed"], h["rule"], h["reason"])
						}
					}
				}
				for _, want := range tc.outcomes {
					if !seen[want] {
						t.Errorf("%s: no call of the corpus was %s; seen %v", chain, want, seen)
					}
				}
			}
		})
	}
	// What a hook's front end knows beside the lists (a call it cannot
	// read as its runtime means it, a file a patch writes, an ask its
	// runtime cannot put to a person) is refused by the one decision: the
	// answer's sentence is the record's, one record each, with its rule
	// (issue 47 item 2).
	t.Run("the hooks' refusals", func(t *testing.T) {
		t.Parallel()
		wd, _ := filepath.EvalSymlinks(t.TempDir())
		dir := moduleDir(t, strings.Replace(agentsPolicy, `"mcp__aimon__Echo"]`, `"mcp__aimon__Echo", "apply_patch"]`, 1))
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		codex := func(input string) string {
			return `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":` + input + `,"tool_use_id":"p1"}`
		}
		// A bare cd, which the hook answers by moving Claude Code's
		// shell, is allowed by the one decision with that sentence.
		cdPolicy := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: {Bash: claudecode.#Bash & {sandbox: mode: "off"}, Read: claudecode.#Read}
agent: "allowed-tools": ["Bash(git:*)", "Read(./**)"]
`)
		os.Mkdir(filepath.Join(wd, "sub"), 0o755)
		for _, tc := range []struct{ note, runtime, input, rule, says, policy string }{
			{"a Gemini CLI command in another directory", "gemini-cli", `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"BeforeTool","tool_name":"run_shell_command","tool_input":{"command":"touch allowed","dir_path":"/tmp"}}`, "R7", "with dir_path \"/tmp\" is refused", ""},
			{"a Codex patch without a patch", "codex", codex(`{}`), "R7", "apply_patch sent no patch", ""},
			{"a Codex patch of Codex's own configuration", "codex", codex(`{"command":` + q("*** Begin Patch\n*** Add File: .codex/config.toml\n+x\n*** End Patch") + `}`), "R9", "apply_patch is refused: ", ""},
			{"a Codex patch of a file it may write", "codex", codex(`{"command":` + q("*** Begin Patch\n*** Add File: notes.txt\n+x\n*** End Patch") + `}`), "", "", ""},
			{"a Codex call the policy asks about", "codex", `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"touch review"},"tool_use_id":"a1"}`, "P15", "and Codex's hook cannot ask one, so the call is refused", ""},
			{"a Claude Code cd out of the project", "claude-code", `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cd / && touch allowed"},"tool_use_id":"cd1"}`, "R7", "Bash cd / is refused: it leads to /, outside the project", ""},
			{"a Claude Code bare cd into the project", "claude-code", `{"session_id":"s","cwd":` + q(wd) + `,"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cd sub"},"tool_use_id":"cd2"}`, "", "Bash cd sub moves Claude Code's working directory to " + wd + "/sub, in the project.", cdPolicy},
		} {
			log := filepath.Join(t.TempDir(), "hook.jsonl")
			policy := dir
			if tc.policy != "" {
				policy = tc.policy
			}
			hook := exec.Command(gatewayBinary(t), "hook", tc.runtime, "--policy", policy, "--cache", "off", "--decision-log", log)
			hook.Stdin, hook.Dir = strings.NewReader(tc.input), wd
			out, err := hook.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.note, err, out)
			}
			var answer struct {
				Reason   string `json:"reason"`
				Specific struct {
					Decision string `json:"permissionDecision"`
					Reason   string `json:"permissionDecisionReason"`
				} `json:"hookSpecificOutput"`
			}
			json.Unmarshal(out, &answer)
			said := answer.Reason + answer.Specific.Reason
			rs := readRecords(t, log)
			if len(rs) != 1 {
				t.Fatalf("%s: %d records, want one: %s", tc.note, len(rs), out)
			}
			r := rs[0]
			switch reason, _ := r["reason"].(string); {
			case tc.rule == "" && (r["allowed"] != true || !strings.Contains(said, tc.says) || tc.says == "" && said != ""):
				t.Errorf("%s: want it allowed saying %q: %s; record %v", tc.note, tc.says, out, r)
			case tc.rule != "" && (r["allowed"] != false || r["ask"] == true || r["rule"] != tc.rule || !strings.Contains(said, tc.says)):
				t.Errorf("%s: want it refused by %s saying %q: %s; record %v", tc.note, tc.rule, tc.says, out, r)
			case said != "" && strings.TrimSuffix(reason, ".") != strings.TrimSuffix(said, "."):
				t.Errorf("%s: the answer says %q, its record %q", tc.note, said, reason)
			}
		}
	})
	// An input a hook cannot read, the command hooks' and the HTTP
	// hook's, is refused by the one decision by R7: one record each, its
	// sentence the answer's (issue 47 item 2; before, none was recorded).
	t.Run("the hooks' unreadable inputs", func(t *testing.T) {
		t.Parallel()
		wd, _ := filepath.EvalSymlinks(t.TempDir())
		dir := moduleDir(t, `package policy

import "aimon.dev/gw/schema/claudecode"

tools: Read: claudecode.#Read
agent: "allowed-tools": ["Read"]
principals: alice: {subject: "alice", surface: ["agent"]}
`)
		unreadable := []struct{ note, runtime, input, says string }{
			{"not JSON", "claude-code", `{"tool_name":`, "the hook input is not a PreToolUse input that can be read one way only"},
			{"no tool_name", "claude-code", `{"cwd":"` + wd + `","hook_event_name":"PreToolUse","TOOL_NAME":"Read"}`, `the hook input has no "tool_name"`},
			{"a relative cwd", "claude-code", `{"cwd":"relative","hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{}}`, `the hook input's cwd "relative" is not an absolute directory`},
			{"Codex, not JSON", "codex", `[`, ""},
			{"Gemini CLI, not JSON", "gemini-cli", `[`, ""},
		}
		oneRecord := func(note, log, said, says string) {
			t.Helper()
			rs := readRecords(t, log)
			if len(rs) != 1 {
				t.Fatalf("%s: %d records, want one; the answer %q", note, len(rs), said)
			}
			reason, _ := rs[0]["reason"].(string)
			if rs[0]["allowed"] != false || rs[0]["rule"] != "R7" || !strings.Contains(strings.ToLower(said), strings.ToLower(says)) ||
				!strings.EqualFold(strings.TrimSuffix(reason, "."), strings.TrimSuffix(said, ".")) {
				t.Errorf("%s: want one R7 refusal saying %q, the answer's sentence; answered %q, recorded %v", note, says, said, rs[0])
			}
		}
		for _, tc := range unreadable {
			log := filepath.Join(t.TempDir(), "hook.jsonl")
			hook := exec.Command(gatewayBinary(t), "hook", tc.runtime, "--policy", dir, "--cache", "off", "--decision-log", log)
			hook.Stdin, hook.Dir = strings.NewReader(tc.input), wd
			var stderr strings.Builder
			hook.Stderr = &stderr
			if out, err := hook.Output(); hook.ProcessState.ExitCode() != 2 || len(out) != 0 {
				t.Fatalf("%s: the hook answered %s (%v), want exit 2 with a sentence: %s", tc.note, out, err, stderr.String())
			}
			oneRecord(tc.note, log, strings.TrimPrefix(strings.TrimSpace(stderr.String()), "aimon-gw hook "+tc.runtime+": "), tc.says)
		}
		log := filepath.Join(t.TempDir(), "http.jsonl")
		g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--decision-log", log)
		for _, tc := range unreadable[:3] {
			before := len(readRecords(t, log))
			status, _, body := g.post("/hooks/claude-code", "tok-alice", tc.input)
			var o struct {
				Out struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
			}
			if json.Unmarshal([]byte(body), &o) != nil || status != 200 || o.Out.PermissionDecision != "deny" {
				t.Fatalf("HTTP, %s: %d %s, want a deny", tc.note, status, body)
			}
			rs := readRecords(t, log)
			if len(rs) != before+1 {
				t.Fatalf("HTTP, %s: %d records, want one more than %d", tc.note, len(rs), before)
			}
			one := filepath.Join(t.TempDir(), "one.jsonl")
			line, _ := json.Marshal(rs[before])
			writeFile(t, one, string(line)+"\n")
			oneRecord("HTTP, "+tc.note, one, o.Out.PermissionDecisionReason, tc.says)
			if rs[before]["principal"] != "alice" {
				t.Errorf("HTTP, %s: the record names the principal %v, want alice", tc.note, rs[before]["principal"])
			}
		}
	})
	// A PostToolUse whose result labels a session that cannot be kept
	// (its store does not answer) is answered with a block, by the
	// command hook and the HTTP hook alike; its result's record holds the
	// answer's sentence (P18), one record, under a plain log too (a
	// result's record names no rule: its decision is the one before it).
	t.Run("the hooks' unkept labels", func(t *testing.T) {
		t.Parallel()
		dir, wd, page := p18Setup(t)
		writeFile(t, filepath.Join(dir, "principals.cue"), "package policy\n\nprincipals: alice: {subject: \"alice\", surface: [\"agent\"]}\n")
		post := hookInput("PostToolUse", sessionID(t), wd, "Read", map[string]any{"file_path": page})
		unanswered := "redis://127.0.0.1:1" // no Redis listens there
		allRecords := func(path string) []map[string]any {
			data, _ := os.ReadFile(path)
			var rs []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
				var r map[string]any
				if json.Unmarshal([]byte(line), &r) == nil {
					rs = append(rs, r)
				}
			}
			return rs
		}
		unkept := func(note, log, said string) {
			t.Helper()
			rs := allRecords(log)
			if len(rs) != 1 {
				t.Fatalf("%s: %d records, want one; the answer %q", note, len(rs), said)
			}
			reason, _ := rs[0]["reason"].(string)
			if rs[0]["phase"] != "result" || !strings.Contains(said, "and the label cannot be kept") ||
				!strings.EqualFold(strings.TrimSuffix(reason, "."), strings.TrimSuffix(said, ".")) {
				t.Errorf("%s: want the result's record with the answer's sentence; answered %q, recorded %v", note, said, rs[0])
			}
		}
		log := filepath.Join(t.TempDir(), "hook.jsonl")
		hook := exec.Command(gatewayBinary(t), "hook", "claude-code", "--policy", dir, "--cache", "off", "--state", unanswered, "--decision-log", log)
		hook.Stdin, hook.Dir = strings.NewReader(post), wd
		var stderr strings.Builder
		hook.Stderr = &stderr
		if out, err := hook.Output(); hook.ProcessState.ExitCode() != 2 || len(out) != 0 {
			t.Fatalf("the command hook answered %s (%v), want exit 2 with a sentence: %s", out, err, stderr.String())
		}
		unkept("the command hook", log, strings.TrimPrefix(strings.TrimSpace(stderr.String()), "aimon-gw hook claude-code: "))
		log = filepath.Join(t.TempDir(), "http.jsonl")
		g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", wd, "--tokens", tokensFile(t, staticTokens), "--state", unanswered, "--decision-log", log)
		status, _, body := g.post("/hooks/claude-code", "tok-alice", post)
		var o struct{ Decision, Reason string }
		if json.Unmarshal([]byte(body), &o) != nil || status != 200 || o.Decision != "block" {
			t.Fatalf("the HTTP hook: %d %s, want a block", status, body)
		}
		unkept("the HTTP hook", log, o.Reason)
	})
	// One listening gateway decides the HTTP hook's requests of every
	// project, each in its own cwd: calls in two projects (and a link to
	// one, and cwds that cannot be used) sent alternately get, each, the
	// answer and the record the command hook gives them in that cwd, so a
	// cwd, a canonical path or a sandbox left from one request in the
	// next fails it (issue 47 item 2: no gateway per request).
	t.Run("the HTTP hook's projects, alternately", func(t *testing.T) {
		t.Parallel()
		root, _ := filepath.EvalSymlinks(t.TempDir())
		a, b, gw := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "gw")
		for _, d := range []string{a, b, gw} {
			os.Mkdir(d, 0o755)
			writeFile(t, filepath.Join(d, "notes.txt"), "notes of "+d+"\n")
		}
		link := filepath.Join(root, "link")
		os.Symlink(a, link)
		dir := moduleDir(t, fmt.Sprintf(`package policy

import "aimon.dev/gw/schema/claudecode"

tools: {Read: claudecode.#Read, Write: claudecode.#Write, Glob: claudecode.#Glob, Bash: claudecode.#Bash}
agent: {
	"allowed-tools": ["Read(%[1]s/**)", "Write(%[1]s/**)", "Glob(%[1]s/**)", "Read(%[2]s/**)", "Bash(git:*)"]
	"denied-tools": ["Write(%[2]s/**)"]
}
principals: alice: {subject: "alice", surface: ["agent"]}
`, a, b))
		calls := []string{`"Read","tool_input":{"file_path":"notes.txt"}`, `"Glob","tool_input":{"pattern":"*.txt"}`,
			`"Write","tool_input":{"file_path":"out.txt","content":"x"}`, `"Read","tool_input":{"file_path":"../b/notes.txt"}`,
			`"Bash","tool_input":{"command":"git status"}`}
		type sent struct{ cwd, call string }
		var inputs []sent
		for range 2 {
			for _, cwd := range []string{a, b, link} {
				for _, c := range calls {
					inputs = append(inputs, sent{cwd, c})
				}
			}
			// Bad cwds: relative, missing, not there.
			for _, cwd := range []string{"relative", "", filepath.Join(root, "gone")} {
				inputs = append(inputs, sent{cwd, calls[0]})
			}
		}
		httpLog, hookLog := filepath.Join(t.TempDir(), "http.jsonl"), filepath.Join(t.TempDir(), "hook.jsonl")
		g := startHTTP(t, http.DefaultClient, "--policy", dir, "--workdir", gw, "--tokens", tokensFile(t, staticTokens), "--decision-log", httpLog, "--decision-log-calls")
		// What differs by process alone: the time, the caller, the
		// session's scope (the HTTP caller's), the generation's number.
		same := func(r map[string]any) string {
			for _, k := range []string{"time", "duration_ms", "principal", "session", "generation"} {
				delete(r, k)
			}
			out, _ := json.Marshal(r)
			return unticketed(string(out))
		}
		allowed := map[string]bool{}
		for i, in := range inputs {
			cwd := ""
			if in.cwd != "" {
				cwd = `"cwd":` + strconvQuote(in.cwd) + `,`
			}
			input := fmt.Sprintf(`{"session_id":"s",%s"hook_event_name":"PreToolUse","tool_name":%s,"tool_use_id":"c%d"}`, cwd, in.call, i)
			hook := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--cache", "off", "--decision-log", hookLog, "--decision-log-calls")
			hook.Stdin, hook.Dir = strings.NewReader(input), gw
			var stderr strings.Builder
			hook.Stderr = &stderr
			want, _ := hook.Output()
			status, _, got := g.post("/hooks/claude-code", "tok-alice", input)
			if status != 200 {
				t.Fatalf("%s: status %d: %s", input, status, got)
			}
			if hook.ProcessState.ExitCode() == 2 {
				var o struct {
					Out struct{ PermissionDecision, PermissionDecisionReason string } `json:"hookSpecificOutput"`
				}
				json.Unmarshal([]byte(got), &o)
				sentence := strings.TrimPrefix(strings.TrimSpace(stderr.String()), "aimon-gw hook claude-code: ")
				if o.Out.PermissionDecision != "deny" || !strings.EqualFold(o.Out.PermissionDecisionReason, sentence) {
					t.Errorf("%s:\n  HTTP    %s\n  command blocked with %q", input, got, sentence)
				}
			} else if got = strings.ReplaceAll(got, httpLog, hookLog); unticketed(got) != unticketed(string(want)) {
				// Each protects its own decision log from the command.
				t.Errorf("%s:\n  HTTP    %s\n  command %s", input, got, want)
			}
			hs, cs := readRecords(t, httpLog), readRecords(t, hookLog)
			if len(hs) != i+1 || len(cs) != i+1 {
				t.Fatalf("%s: %d HTTP and %d command records after %d calls, want one each per call", input, len(hs), len(cs), i+1)
			}
			h, c := hs[i], cs[i]
			if allow, _ := c["allowed"].(bool); allow {
				allowed[in.cwd+" "+in.call] = true
			}
			if same(h) != same(c) {
				t.Errorf("%s:\n  HTTP record    %v\n  command record %v", input, h, c)
			}
		}
		// The corpus tells the projects apart: what a's lists allow b's
		// refuse, and the answers name each call's own directory.
		if !allowed[a+" "+calls[2]] || allowed[b+" "+calls[2]] || !allowed[b+" "+calls[0]] {
			t.Errorf("the corpus does not tell a from b: allowed %v", allowed)
		}
	})
}

// outcomeOf names a decision record's verdict and rule.
func outcomeOf(r map[string]any) string {
	switch {
	case r["allowed"] == true:
		return "allowed"
	case r["ask"] == true:
		return fmt.Sprintf("ask %v", r["rule"])
	}
	return fmt.Sprintf("denied %v", r["rule"])
}

// copyPolicy copies a policy directory (and the module it is in) with old
// replaced by new in every file, so the example's paths are the test's.
func copyPolicy(t *testing.T, src, old, new string) string {
	t.Helper()
	dir := moduleDir(t, "package policy\n")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, e.Name()), strings.ReplaceAll(string(b), old, new))
	}
	return dir
}

// corpus is the calls every chain is asked about, one line each, each
// with an id of its own.
func corpus(repo string) []string {
	paths := []string{repo + "/main.go", repo + "/docs/a.md", "docs/b.md", "./docs/../x.go", repo + "/docs/../../etc/passwd",
		"/etc/passwd", "~/.bashrc", "", repo + "/docs/"}
	var lines []string
	add := func(name, input string) {
		lines = append(lines, fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":%q,"input":%s}`, len(lines), name, input))
	}
	for _, p := range paths {
		q, _ := json.Marshal(p)
		add("Read", fmt.Sprintf(`{"file_path":%s}`, q))
		add("Read", fmt.Sprintf(`{"file_path":%s,"offset":null,"limit":null}`, q))
		add("Write", fmt.Sprintf(`{"file_path":%s,"content":"x"}`, q))
		add("Edit", fmt.Sprintf(`{"file_path":%s,"old_string":"a","new_string":"b"}`, q))
		add("Grep", fmt.Sprintf(`{"pattern":"zzz-no-match","path":%s}`, q))
		add("Glob", fmt.Sprintf(`{"pattern":"*.zzz","path":%s}`, q))
	}
	add("Grep", `{"pattern":"zzz-no-match"}`)
	add("Glob", `{"pattern":"*.zzz"}`)
	for _, c := range []string{"git status", "make lint", "go test ./...", "git status; rm -rf /", "echo hi", "make test"} {
		q, _ := json.Marshal(c)
		add("Bash", fmt.Sprintf(`{"command":%s}`, q))
	}
	add("Bash", `{"command":"git status","timeout":999999}`)
	add("Read", `{"file_paht":"x"}`)
	add("Read", `{"file_path":3}`)
	add("Frobnicate", `{}`)
	lines = append(lines, fmt.Sprintf(`{"type":"tool_use","id":"c%d","NAME":"Read","input":{"file_path":"x"}}`, len(lines)))
	lines = append(lines, fmt.Sprintf(`{"type":"tool_use","id":"c%d","name":"Read","name":"Write","input":{"file_path":"x"}}`, len(lines)))
	return lines
}

// readRecords is a decision log's decisions, one per call (rule R7),
// without the results of the calls that ran.
func readRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		if r["phase"] != "result" {
			out = append(out, r)
		}
	}
	return out
}

// hookChain reports whether the hook can be asked on chain: Claude Code
// names the main agent or one subagent.
func hookChain(chain string) bool {
	return chain == "agent" || (strings.HasPrefix(chain, "agent,subagent:") && strings.Count(chain, ",") == 1)
}

// lineCall is the call of a serve line, as a hook input or an MCP request
// carries it; false for a line that names no "name" exactly once
// (encoding/json matches names in any case, and keeps the last of two).
func lineCall(line string) (id, name string, input json.RawMessage, ok bool) {
	var call struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal([]byte(line), &call) != nil || strings.Count(line, `"name"`) != 1 {
		return "", "", nil, false
	}
	return call.ID, call.Name, call.Input, true
}

// hookRecord asks the hook about a serve line and returns its record; nil
// for a line that is no call the hook could be given.
func hookRecord(t *testing.T, bin, dir, cwd, chain, line string) map[string]any {
	t.Helper()
	id, name, input, ok := lineCall(line)
	if !ok {
		return nil
	}
	in := map[string]any{"cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": name, "tool_input": input, "tool_use_id": id}
	if sub, ok := strings.CutPrefix(chain, "agent,subagent:"); ok {
		in["agent_type"] = sub
	}
	b, _ := json.Marshal(in)
	log := filepath.Join(t.TempDir(), "hook.jsonl")
	hook := exec.Command(bin, "hook", "claude-code", "--policy", dir, "--decision-log", log)
	hook.Stdin = strings.NewReader(string(b))
	if out, err := hook.CombinedOutput(); err != nil {
		t.Fatalf("hook on %s: %v\n%s", b, err, out)
	}
	rs := readRecords(t, log)
	if len(rs) != 1 {
		t.Fatalf("hook on %s: %d records, want 1", b, len(rs))
	}
	return rs[0]
}

// mcpRecords sends each serve line that is a call as a tools/call to one
// mcp process on chain, a request at a time, and returns its record for
// each line (nil for a line that is no call), after checking that the log
// holds one record per call.
func mcpRecords(t *testing.T, dir, wd, chain string, lines []string) []map[string]any {
	t.Helper()
	log := filepath.Join(t.TempDir(), "mcp.jsonl")
	r := startRawMCP(t, "--policy", dir, "--workdir", wd, "--surface", chain, "--decision-log", log)
	var sent []int
	for j, line := range lines {
		_, name, input, ok := lineCall(line)
		if !ok {
			continue
		}
		frame, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": j, "method": "tools/call", "params": map[string]any{"name": name, "arguments": input}})
		r.send(string(frame))
		if m := r.next(); m["id"] != float64(j) || m["result"] == nil {
			t.Fatalf("mcp on %s, %s: answered %v; want a tool result", chain, frame, m)
		}
		sent = append(sent, j)
	}
	r.in.Close()
	r.cmd.Wait()
	rs := readRecords(t, log)
	if len(rs) != len(sent) {
		t.Fatalf("mcp on %s: %d records for %d calls, want one per call", chain, len(rs), len(sent))
	}
	out := make([]map[string]any, len(lines))
	for k, j := range sent {
		out[j] = rs[k]
	}
	return out
}
