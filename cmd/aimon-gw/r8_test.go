package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/internal/testkit/policydir"
)

// The hostile cases of rule R8, end to end through the binary, each run
// with the gateway as the test's user (root under CI) and, when that is
// root, again as nobody: the sandbox holds whoever runs the gateway.

// gatewayUser is one way to run the gateway: as the test's user, or as
// nobody through setpriv.
type gatewayUser struct {
	name     string
	prefix   []string // before the binary
	uid, gid int      // -1 for the test's own
}

func gatewayUsers(t *testing.T) []gatewayUser {
	t.Helper()
	users := []gatewayUser{{name: "self", uid: -1, gid: -1}}
	if os.Geteuid() != 0 {
		return users
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody to run the gateway as: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv is needed to run the gateway as nobody: %v", err)
	}
	users[0].name = "root"
	return append(users, gatewayUser{name: "nobody", uid: uid, gid: gid,
		prefix: []string{setpriv, "--reuid=" + nobody.Uid, "--regid=" + nobody.Gid, "--clear-groups", "--"}})
}

// r8Layout is a project the gateway serves: proj/ is the working
// directory, writable to the agent; proj/gw is the policy's CUE module,
// its policy in proj/gw/policy; proj/.claude holds a subagent's markdown
// list; proj/bin holds the plugin the policy starts, pinned by sha256 as
// it lies where the agent writes; secret/ is hidden.
type r8Layout struct {
	root, proj, policy, plugin string
	u                          gatewayUser
}

// eachUser runs f on a fresh layout under base as each gateway user.
func eachUser(t *testing.T, base string, f func(t *testing.T, l *r8Layout)) {
	t.Helper()
	needBwrap(t)
	for _, u := range gatewayUsers(t) {
		t.Run(u.name, func(t *testing.T) { f(t, r8Root(t, u, base)) })
	}
}

func r8Root(t *testing.T, u gatewayUser, base string) *r8Layout {
	t.Helper()
	root, err := os.MkdirTemp(base, "aimon-gw-r8")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l := &r8Layout{root: root, proj: root + "/proj", policy: root + "/proj/gw/policy", plugin: root + "/proj/bin/misbehave", u: u}
	for _, d := range []string{"proj/gw/cue.mod", "proj/gw/policy", "proj/.claude/agents", "proj/bin", "proj/docs", "proj/conf/secret", "outside", "home"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	copyFile(t, misbehave(t), l.plugin)
	writeFile(t, root+"/proj/conf/secret/key", "sk-hidden-key\n")
	writeFile(t, root+"/proj/f.txt", "mine\n")
	writeFile(t, root+"/proj/gw/cue.mod/module.cue", policydir.Module)
	writeFile(t, root+"/proj/.claude/agents/docs.md", "---\nname: docs\ndescription: Writes the docs.\ntools: Read, Write, Bash, Glob\n---\nWrite the docs.\n")
	writeFile(t, l.policy+"/policy.cue", fmt.Sprintf(`package policy

import "aimon.dev/gw/schema"

tools: {Read: schema.#Read, Write: schema.#Write, Edit: schema.#Edit, Glob: schema.#Glob, Grep: schema.#Grep,
	Bash: schema.#Bash & {sandbox: hide: [%[1]q]}}
tools: Env: {plugin: {command: [%[2]q], sha256: %[4]q}, sandbox: write: []}
agent: "allowed-tools": ["Read(%[3]s/**)", "Write(%[3]s/**)", "Edit(%[3]s/**)", "Bash", "Glob", "Grep", "Env"]
subagents: docs: "allowed-tools": ["Read(%[3]s/**)", "Write(%[3]s/docs/**)", "Bash", "Glob"]
surfaces: from: ["../../.claude"]
`, root+"/proj/conf/secret", l.plugin, l.proj, sum(t, l.plugin)))
	if l.u.uid >= 0 {
		chownAll(t, root, u.uid, u.gid)
	}
	return l
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func chownAll(t testing.TB, root string, uid, gid int) {
	t.Helper()
	filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, gid)
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
}

// serve runs the binary as the layout's user on lines, in the surface
// chain; it returns one reply a line.
func (l *r8Layout) serve(t *testing.T, surface string, lines ...string) []map[string]any {
	t.Helper()
	return l.serveLog(t, surface, nil, nil, lines...)
}

// serveLog is serve with more environment, the gateway's log to stderr.
func (l *r8Layout) serveLog(t *testing.T, surface string, env []string, stderr io.Writer, lines ...string) []map[string]any {
	t.Helper()
	bin := gatewayBinary(t)
	return runServeLog(t, append(l.u.prefix, bin), []string{"--policy", l.policy, "--workdir", l.proj, "--surface", surface},
		append([]string{"AIMON_R8_SECRET=sk-gateway-secret", "HOME=" + l.root + "/home", "XDG_CACHE_HOME=" + l.root + "/home/.cache"}, env...), stderr, lines...)
}

func sum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestR8SandboxHoldsWhoeverRunsTheGateway: what a command did as root
// inside bwrap on main (remount, core_pattern, unmount, setns, a new user
// namespace, the keyring, the gateway's environment through PID 1) fails
// or shows nothing, as root and as nobody.
func TestR8SandboxHoldsWhoeverRunsTheGateway(t *testing.T) {
	t.Parallel()
	need.Command(t, "python3", "it calls add_key; .ci/run installs it")
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		probe := "/usr/aimon-gw-r8-probe"
		cases := []struct {
			note, command string
		}{
			{note: "remount / read-write", command: "mount -o remount,rw / && touch " + probe},
			{note: "core_pattern", command: `p=$(cat /proc/sys/kernel/core_pattern) && printf '%s\n' "$p" > /proc/sys/kernel/core_pattern`},
			{note: "unmount /proc", command: "umount /proc"},
			{note: "unmount the hidden directory", command: "umount " + l.proj + "/conf/secret && cat " + l.proj + "/conf/secret/key"},
			{note: "a new user namespace", command: "unshare -Ur true"},
			{note: "setns into PID 1's network namespace", command: "nsenter --net=/proc/1/ns/net true"},
			{note: "the keyring", command: "python3 -c 'import ctypes,sys; sys.exit(ctypes.CDLL(None).syscall(248, b\"user\", b\"k\", b\"v\", 1, -3) < 0)'"},
			{note: "capabilities", command: "grep -q '^CapEff:.0000000000000000' /proc/self/status && exit 1 || exit 0"},
		}
		var lines []string
		for i, c := range cases {
			lines = append(lines, bashLine(strconv.Itoa(i), c.command))
		}
		lines = append(lines, bashLine("environ", "cat /proc/1/environ; echo; env; cat /proc/1/cmdline"))
		replies := l.serve(t, "agent", lines...)
		for i, c := range cases {
			if replies[i]["is_error"] != true || !strings.Contains(text(replies[i]), "Exit code:") {
				t.Errorf("%s: the command succeeded: %v", c.note, replies[i])
			}
			if strings.Contains(text(replies[i]), "Exit code: 127") {
				t.Errorf("%s: a program the case needs is missing: %v", c.note, replies[i])
			}
		}
		if env := text(replies[len(cases)]); strings.Contains(env, "sk-gateway-secret") || strings.Contains(env, "sk-hidden-key") || !strings.Contains(env, "PATH=") {
			t.Errorf("the gateway's environment shows in the sandbox:\n%s", env)
		}
		if _, err := os.Stat(probe); err == nil {
			os.Remove(probe)
			t.Error("a command wrote into the read-only root")
		}
	})
}

// TestR8NothingTheGatewayReadsOrRunsIsWritable: the CUE module above the
// policy directory, the surfaces source, the plugin's binary in the
// writable tree: Bash cannot change them and Write refuses them.
func TestR8NothingTheGatewayReadsOrRunsIsWritable(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		gw, md := l.proj+"/gw", l.proj+"/.claude/agents/docs.md"
		before := map[string]string{l.plugin: sum(t, l.plugin), md: sum(t, md)}
		replies := l.serve(t, "agent",
			bashLine("module", "echo 'agent: {}' > "+gw+"/open.cue"),
			bashLine("policy", "echo 'agent: {}' > "+l.policy+"/open.cue"),
			bashLine("markdown", "printf -- '---\\nname: docs\\n---\\n' > "+md),
			bashLine("md-rename", "mv "+l.proj+"/.claude "+l.proj+"/old && mkdir -p "+l.proj+"/.claude/agents"),
			bashLine("plugin", "cp /bin/true "+l.plugin),
			bashLine("plugin-mv", "cp /bin/true "+l.proj+"/bin/t && mv -f "+l.proj+"/bin/t "+l.plugin),
			bashLine("plugin-rm", "rm -f "+l.plugin+" && cp /bin/true "+l.plugin),
			toolLine("write", "Write", map[string]any{"file_path": gw + "/open.cue", "content": "agent: {}"}),
			bashLine("inside", "touch "+l.proj+"/made"),
		)
		for _, f := range []string{gw + "/open.cue", l.policy + "/open.cue", l.proj + "/old"} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was written", f)
			}
		}
		for f, s := range before {
			if _, err := os.Stat(f); err != nil || sum(t, f) != s {
				t.Errorf("%s was changed", f)
			}
		}
		if w := text(replies[7]); replies[7]["is_error"] != true || !strings.Contains(w, "which the gateway reads or runs") {
			t.Errorf("Write into the policy module: %v", replies[7])
		}
		if _, err := os.Stat(l.proj + "/made"); err != nil {
			t.Errorf("a command could not write where the surface may: %v", replies[8])
		}
	})
}

// TestR8PathsAreBoundByWhatTheyAre: the agent turns docs/ into a link out
// of the tree, and the docs subagent's commands are refused with a
// sentence; renaming a parent of the hidden directory fails, and the next
// command still cannot read it.
func TestR8PathsAreBoundByWhatTheyAre(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		out := l.root + "/outside"
		replies := l.serve(t, "agent",
			bashLine("link", "rmdir "+l.proj+"/docs && ln -s "+out+" "+l.proj+"/docs"),
			bashLine("rename", "mv "+l.proj+"/conf "+l.proj+"/moved; mv "+l.proj+"/conf/secret "+l.proj+"/s2; true"),
			bashLine("read", "cat "+l.proj+"/moved/secret/key "+l.proj+"/s2/key "+l.proj+"/conf/secret/key; true"))
		if replies[0]["is_error"] != false {
			t.Fatalf("the link was not made: %v", replies[0])
		}
		if strings.Contains(text(replies[2]), "sk-hidden-key") {
			t.Errorf("the hidden file was read after a rename: %v", replies[2])
		}
		replies = l.serve(t, "agent,subagent:docs",
			bashLine("docs", "touch "+l.proj+"/docs/planted"),
			bashLine("read", "cat "+l.proj+"/moved/secret/key "+l.proj+"/s2/key "+l.proj+"/conf/secret/key; true"),
			toolLine("write", "Write", map[string]any{"file_path": l.proj + "/docs/planted", "content": "x"}))
		if _, err := os.Stat(out + "/planted"); err == nil {
			t.Error("a command wrote through docs/ out of the tree")
		}
		if w := text(replies[0]); replies[0]["is_error"] != true || !strings.Contains(w, "symbolic link") {
			t.Errorf("a writable path through a link: %v", replies[0])
		}
		if strings.Contains(text(replies[1]), "sk-hidden-key") {
			t.Errorf("the hidden file was read in the next call: %v", replies[1])
		}
		if w := text(replies[2]); replies[2]["is_error"] != true || !strings.Contains(w, "symbolic link") {
			t.Errorf("Write through docs/: %v", replies[2])
		}
	})
}

// TestR8UnlimitedWriteKeepsTheWorkdirUnderTmpWritable: with a name-only
// Write, everything is writable, the working directory under /tmp too.
func TestR8UnlimitedWriteKeepsTheWorkdirUnderTmpWritable(t *testing.T) {
	t.Parallel()
	eachUser(t, "/tmp", func(t *testing.T, l *r8Layout) {
		os.Chmod(l.root, 0o755)
		writeFile(t, l.policy+"/policy.cue", "package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Write: schema.#Write, Bash: schema.#Bash}\nagent: \"allowed-tools\": [\"Write\", \"Bash\"]\n")
		if l.u.uid >= 0 {
			chownAll(t, l.root, l.u.uid, l.u.gid)
		}
		replies := l.serve(t, "agent", bashLine("touch", "touch made"))
		if _, err := os.Stat(l.proj + "/made"); err != nil {
			t.Errorf("the working directory under /tmp is not writable: %v", replies[0])
		}
	})
}

// TestC6ChangeTimeThroughTheBinary: a file read, then changed by a command
// that puts its size and modification time back, is not overwritten.
func TestC6ChangeTimeThroughTheBinary(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		f := l.proj + "/f.txt"
		replies := l.serve(t, "agent",
			toolLine("read", "Read", map[string]any{"file_path": f}),
			bashLine("swap", "cp -p f.txt ref && printf 'othr\\n' > f.txt && touch -r ref f.txt"),
			toolLine("write", "Write", map[string]any{"file_path": f, "content": "clobbered"}))
		if w := text(replies[2]); replies[2]["is_error"] != true || !strings.Contains(w, "has changed since it was read") {
			t.Errorf("Write over a changed file: %v", replies[2])
		}
		if got, _ := os.ReadFile(f); string(got) != "othr\n" {
			t.Errorf("the file holds %q", got)
		}
	})
}

// TestR8CommandsAreBounded: a command runs under process, memory and CPU
// limits, one that floods its output is stopped with a sentence, and the
// Glob pattern that never ended on a 1,000-file tree answers.
func TestR8CommandsAreBounded(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		for i := range 1000 {
			writeFile(t, fmt.Sprintf("%s/tree/d%d/e%d/f%d", l.proj, i/100, i/10%10, i%10), "x")
		}
		if l.u.uid >= 0 {
			chownAll(t, l.proj+"/tree", l.u.uid, l.u.gid)
		}
		replies := l.serve(t, "agent",
			bashLine("limits", "cat /proc/self/limits"),
			bashLine("flood", "head -c 100000000 /dev/zero"),
			toolLine("glob", "Glob", map[string]any{"pattern": "**/**/**/**/**/**/**/x"}))
		lim := text(replies[0])
		for _, want := range []string{"Max processes             1024", "Max cpu time              120", "Max data size             4294967296", "Max core file size        0"} {
			if !strings.Contains(lim, want) {
				t.Errorf("limits lack %q:\n%s", want, lim)
			}
		}
		if w := text(replies[1]); !strings.Contains(w, "bytes of output and was killed") {
			t.Errorf("a flood of output: %.300s", w)
		}
		// On main this call ran for hours; it answers now.
		if replies[2]["is_error"] != false || !strings.Contains(text(replies[2]), "No files found") {
			t.Errorf("glob: %v", replies[2])
		}
	})
}

// TestR8HookCacheIsReadOnlyBeforeItExists: with the hook's cache not yet
// made and its parent writable, a command can neither create it nor plant
// a record in it; as root and as nobody.
func TestR8HookCacheIsReadOnlyBeforeItExists(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		cache := l.root + "/home/.cache/aimon-gw"
		writeFile(t, l.policy+"/policy.cue", fmt.Sprintf("package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Write: schema.#Write, Bash: schema.#Bash}\nagent: \"allowed-tools\": [\"Write(%s/**)\", \"Bash\"]\n", l.root))
		if l.u.uid >= 0 {
			chownAll(t, l.root, l.u.uid, l.u.gid)
		}
		replies := l.serve(t, "agent",
			bashLine("plant", "mkdir -p "+cache+" && echo forged > "+cache+"/record"),
			bashLine("inside", "touch "+l.root+"/home/made"))
		if _, err := os.Stat(cache + "/record"); err == nil {
			t.Errorf("a command planted a record in the hook's cache: %v", replies[0])
		}
		if _, err := os.Stat(l.root + "/home/made"); err != nil {
			t.Errorf("a command could not write beside the cache: %v", replies[1])
		}
	})
}

// TestR8ServeRecordIsNotWritableByTools: serve keeps its compiled policy
// in the load cache, and restores it at the next start, so a record the
// agent could write would be a policy the agent wrote. As root and as
// nobody, with the cache under a directory the surface may write: Bash
// can neither plant the record before it exists nor change, remove or
// move it after; Write and Edit refuse it; and the record still verifies
// at the next start.
func TestR8ServeRecordIsNotWritableByTools(t *testing.T) {
	t.Parallel()
	eachUser(t, "/var/tmp", func(t *testing.T, l *r8Layout) {
		home := l.root + "/home"
		cache := home + "/.cache/aimon-gw"
		key := sha256.Sum256([]byte(l.policy))
		record := cache + "/" + hex.EncodeToString(key[:16]) + ".json"
		writeFile(t, l.policy+"/policy.cue", fmt.Sprintf("package policy\n\nimport \"aimon.dev/gw/schema\"\n\ntools: {Read: schema.#Read, Write: schema.#Write, Edit: schema.#Edit, Bash: schema.#Bash}\nagent: \"allowed-tools\": [\"Read(%[1]s/**)\", \"Write(%[1]s/**)\", \"Edit(%[1]s/**)\", \"Bash\"]\n", l.root))
		if l.u.uid >= 0 {
			chownAll(t, l.root, l.u.uid, l.u.gid)
		}
		serve := func(lines ...string) ([]map[string]any, string) {
			var log strings.Builder
			replies := runServeLog(t, append(l.u.prefix, gatewayBinary(t)),
				[]string{"--log-level", "debug", "--policy", l.policy, "--workdir", l.proj},
				[]string{"HOME=" + home, "XDG_CACHE_HOME=" + home + "/.cache"}, &log, lines...)
			return replies, log.String()
		}
		forge := func(what string) string { return fmt.Sprintf("echo forged > %s", what) }
		// Before the record exists.
		replies, log := serve(
			bashLine("plant", "mkdir -p "+cache+" && "+forge(record)),
			toolLine("write", "Write", map[string]any{"file_path": record, "content": "forged"}),
			bashLine("inside", "touch "+home+"/made"))
		if !strings.Contains(log, "the policy is recorded") {
			t.Fatalf("the first start kept no record:\n%s", log)
		}
		if replies[1]["is_error"] != true {
			t.Errorf("Write planted the record: %v", replies[1])
		}
		if _, err := os.Stat(home + "/made"); err != nil {
			t.Fatalf("a command could not write beside the cache: %v", replies[2])
		}
		data, err := os.ReadFile(record)
		if err != nil || strings.Contains(string(data), "forged") {
			t.Fatalf("the record is not the gateway's: %v %.40q", err, data)
		}
		// After: the start is restored from the record, which the tools
		// try to change in every way.
		replies, log = serve(
			bashLine("overwrite", forge(record)),
			bashLine("remove", "rm -f "+record),
			bashLine("add", forge(cache+"/0000.json")),
			bashLine("chmod", "chmod 0777 "+cache),
			bashLine("move", "mv "+cache+" "+cache+".old"),
			bashLine("move-parent", "mv "+home+"/.cache "+home+"/moved && mkdir -p "+cache+" && "+forge(record)),
			toolLine("write", "Write", map[string]any{"file_path": record, "content": "forged"}),
			toolLine("write-new", "Write", map[string]any{"file_path": cache + "/0000.json", "content": "forged"}),
			toolLine("read", "Read", map[string]any{"file_path": record}),
			toolLine("edit", "Edit", map[string]any{"file_path": record, "old_string": "aimon-gw loadcache", "new_string": "forged"}))
		if !strings.Contains(log, "the policy is restored from its record") {
			t.Fatalf("the second start was not restored from the record:\n%s", log)
		}
		for _, i := range []int{6, 7, 9} {
			if replies[i]["is_error"] != true || !strings.Contains(text(replies[i]), "which the gateway reads or runs") {
				t.Errorf("%v", replies[i])
			}
		}
		if after, err := os.ReadFile(record); err != nil || string(after) != string(data) {
			t.Errorf("the record was changed: %v %.40q", err, after)
		}
		entries, _ := os.ReadDir(cache)
		st, _ := os.Stat(cache)
		if len(entries) != 1 || st == nil || st.Mode().Perm() != 0o700 {
			t.Errorf("the cache holds %v, mode %v; want the one record, 0700", entries, st)
		}
		for _, p := range []string{cache + ".old", home + "/moved"} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s was moved to %s", cache, p)
			}
		}
		if _, log = serve(`{"type":"list_tools"}`); !strings.Contains(log, "the policy is restored from its record") {
			t.Errorf("the record no longer verifies:\n%s", log)
		}
	})
}
