package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"aimon.dev/gw/internal/testkit/claudecode"
)

// importProbe is one call the scripted model makes, and how to tell from
// the disk, or from what Claude Code sent back, that it ran.
type importProbe struct {
	name   string
	use    func(root string) claudecode.Use
	marker string // in the result when it ran; else a file it makes
}

// importProbes touch what Claude Code's modes and rules tell apart: reads
// in the project, outside it and in additional directories, writes in
// and out of the project and its protected .git, the file commands of
// acceptEdits, and echo.
var importProbes = []importProbe{
	{"read in the project", readAt("proj/readme.txt"), "README-MARK"},
	{"read a denied file", readAt("proj/secret.txt"), "SECRET-MARK"},
	{"read outside", readAt("outside/o.txt"), "OUTSIDE-MARK"},
	{"read an absolute additional directory", readAt("abs/a.txt"), "ABS-MARK"},
	{"read a relative additional directory", readAt("rel/r.txt"), "REL-MARK"},
	{"read ~/.ssh", readAt("home/.ssh/id"), "SSH-MARK"},
	{"read ~/notes", readAt("home/notes/n.txt"), "NOTES-MARK"},
	{"write in the project", writeAt("proj/w.txt"), "proj/w.txt"},
	{"write under /docs", writeAt("proj/docs/d.txt"), "proj/docs/d.txt"},
	{"write under /docs/locked", writeAt("proj/docs/locked/l.txt"), "proj/docs/locked/l.txt"},
	{"write into .git", writeAt("proj/.git/g.txt"), "proj/.git/g.txt"},
	{"write outside", writeAt("outside/w.txt"), "outside/w.txt"},
	{"write in an additional directory", writeAt("abs/w.txt"), "abs/w.txt"},
	{"touch", bashRun("touch t.txt"), "proj/t.txt"},
	{"mkdir", bashRun("mkdir mk"), "proj/mk"},
	{"rm", bashRun("rm rm.txt"), "!proj/rm.txt"},
	{"echo", bashRun("echo ECHO-MARK"), "ECHO-MARK"},
}

func readAt(rel string) func(string) claudecode.Use {
	return func(root string) claudecode.Use { return use("Read", "file_path", filepath.Join(root, rel)) }
}

func writeAt(rel string) func(string) claudecode.Use {
	return func(root string) claudecode.Use {
		return use("Write", "file_path", filepath.Join(root, rel), "content", "x")
	}
}

func bashRun(cmd string) func(string) claudecode.Use {
	return func(string) claudecode.Use { return use("Bash", "command", cmd) }
}

// importLayout makes the files the probes read and remove under root.
func importLayout(t *testing.T, root string) {
	for rel, body := range map[string]string{"proj/readme.txt": "README-MARK\n", "proj/secret.txt": "SECRET-MARK\n", "outside/o.txt": "OUTSIDE-MARK\n",
		"abs/a.txt": "ABS-MARK\n", "rel/r.txt": "REL-MARK\n", "home/.ssh/id": "SSH-MARK\n", "home/notes/n.txt": "NOTES-MARK\n", "proj/rm.txt": "rm\n"} {
		writeFile(t, filepath.Join(root, rel), body)
	}
	for _, d := range []string{"proj/docs/locked", "proj/.git"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
}

// ran runs the probes in Claude Code once, in a fresh tree under root,
// with the settings as its own (hook "") or with only the hook, and
// reports which probes ran, and what Claude Code sent back for each.
func ranProbes(t *testing.T, root string, settings map[string]any, hook string) (ran, results []string) {
	t.Helper()
	var turns [][]claudecode.Use
	for _, p := range importProbes {
		turns = append(turns, []claudecode.Use{p.use(root)})
	}
	srv := claudecode.Serve(t, claudecode.Script{Key: "MAIN", Turns: turns})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := claudecode.Run{Claude: claudecode.Find(t, "../../.ci/npm/node_modules/.bin/claude"), Hook: hook, Settings: settings,
		Project: filepath.Join(root, "proj"), Home: filepath.Join(root, "home"), Prompt: "MAIN"}.Start(ctx, srv)
	if err != nil && !strings.Contains(out, "done") {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	for i, p := range importProbes {
		res := srv.Result(claudecode.ID("MAIN", i, 0))
		results = append(results, p.name+": "+res)
		if probeRan(root, p.marker, res) {
			ran = append(ran, p.name)
		}
	}
	return ran, results
}

// TestP14ClaudeCodeImportIsFaithful runs each settings file of
// testdata/claudecode-import through the real Claude Code twice: with its
// own rules and mode, and with only the policy aimon-gw import claude-code
// made of it as the hook. What runs under the hook is what runs under
// Claude Code's own rules: never more (the import is never looser) and,
// for these probes, never less (deny-only and mode-only settings, plan,
// acceptEdits, dontAsk, bypassPermissions as Claude Code applies it from a
// project's settings, additional directories absolute and relative, /path
// rules, ~ as the home of the user the hook runs for).
func TestP14ClaudeCodeImportIsFaithful(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	files, _ := filepath.Glob("testdata/claudecode-import/*.json")
	if len(files) < 7 {
		t.Fatalf("found %d settings files, want 7", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			settingsOf := func(root string) map[string]any {
				var s map[string]any
				if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "$ROOT", root)), &s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			own, _ := filepath.EvalSymlinks(t.TempDir())
			importLayout(t, own)
			want, ownResults := ranProbes(t, own, settingsOf(own), "")

			hooked, _ := filepath.EvalSymlinks(t.TempDir())
			importLayout(t, hooked)
			settingsFile := filepath.Join(hooked, "proj", ".claude", "settings.json")
			b, _ := json.Marshal(settingsOf(hooked))
			writeFile(t, settingsFile, string(b))
			cmd := exec.Command(gatewayBinary(t), "import", "claude-code", settingsFile)
			cmd.Env = append(os.Environ(), "HOME=/nonexistent/importer") // ~ is the hook user's, not the importer's
			var stderr strings.Builder
			cmd.Stderr = &stderr
			src, err := cmd.Output()
			if err != nil {
				t.Fatalf("import: %v\n%s", err, stderr.String())
			}
			policy := moduleDir(t, string(src))
			got, hookResults := ranProbes(t, hooked, nil, shellQuote(gatewayBinary(t))+" hook claude-code --policy "+shellQuote(policy))
			wantSameRuns(t, "Claude Code", want, got)
			if t.Failed() {
				t.Logf("own rules ran %q\nthe imported policy ran %q\n%s\nown results:\n%s\nhook results:\n%s", want, got, src,
					strings.Join(ownResults, "\n"), strings.Join(hookResults, "\n"))
			}
		})
	}
}
