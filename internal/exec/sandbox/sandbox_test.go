package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	testneed "aimon.dev/gw/internal/testkit/need"
	"aimon.dev/gw/tools"
)

// need fails the test without a usable bwrap under CI, and skips it elsewhere.
func need(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		testneed.Missing(t, "bwrap with user namespaces is needed and cannot run here: %v", err)
	}
	// The filter's cases make their system calls from python3.
	testneed.Command(t, "python3", "it makes the refused system calls; .ci/run installs it")
}

// run runs a bash script in sb with dir as working directory.
func run(t *testing.T, sb *tools.Sandbox, dir, script string) (string, error) {
	t.Helper()
	cmd, err := Command(sb, dir, []string{"bash", "-c", script}, []string{"PATH=/usr/bin:/bin", "AIMON_SECRET=sk-gateway"}, nil)
	if err != nil {
		return "", err
	}
	defer Release(cmd)
	defer Finish(cmd)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestR8FilterRefusesWhatLeavesTheSandbox: each call that reaches outside
// the namespaces fails, whoever runs the test (CI: root), while ordinary
// commands run.
func TestR8FilterRefusesWhatLeavesTheSandbox(t *testing.T) {
	need(t)
	dir := t.TempDir()
	sb := &tools.Sandbox{Writable: []string{dir}}
	tests := []struct {
		note, script string
		fail         bool
	}{
		{note: "an ordinary command runs", script: "echo ok > " + dir + "/f && cat " + dir + "/f"},
		{note: "remount / read-write", script: "mount -o remount,rw /", fail: true},
		{note: "unmount /proc", script: "umount /proc", fail: true},
		{note: "unmount the private /tmp", script: "umount -l /tmp", fail: true},
		{note: "a new user namespace (unshare)", script: "unshare -U true", fail: true},
		{note: "a new user namespace (clone)", script: "unshare -U --fork true", fail: true},
		{note: "setns into PID 1's namespaces", script: "nsenter -t 1 -n true", fail: true},
		// Written with what it holds already: were it let through, nothing changes.
		{note: "core_pattern", script: "p=$(cat /proc/sys/kernel/core_pattern); printf '%s\\n' \"$p\" > /proc/sys/kernel/core_pattern", fail: true},
		{note: "the keyring", script: pyCall("syscall(248, b'user', b'k', b'v', 1, -3)"), fail: true}, // add_key
		{note: "TIOCSTI", script: pyCall("ioctl(0, 0x5412, b'x')") + " < /dev/null", fail: true},
		{note: "TIOCSTI with a high bit set", script: pyCall("syscall(16, 0, ctypes.c_ulong(0x100005412), b'x')") + " < /dev/null", fail: true},
		{note: "TIOCLINUX", script: pyCall("ioctl(0, 0x541C, b'x')") + " < /dev/null", fail: true},
		{note: "ptrace", script: pyCall("ptrace(0, 0, 0, 0)"), fail: true},
		{note: "bpf", script: pyCall("syscall(321, 0, 0, 0)"), fail: true},
		{note: "no capabilities", script: "grep -q '^CapEff:.0000000000000000' /proc/self/status"},
	}
	for _, tt := range tests {
		out, err := run(t, sb, dir, tt.script)
		if (err != nil) != tt.fail {
			t.Errorf("%s: err = %v, want failure %v; output:\n%s", tt.note, err, tt.fail, out)
		}
	}
}

// pyCall is a script that makes one libc call and exits 1 when it failed
// with EPERM (the filter's answer), 0 otherwise.
func pyCall(call string) string {
	return `python3 -c 'import ctypes,sys
libc=ctypes.CDLL(None, use_errno=True)
libc.` + call + `
sys.exit(1 if ctypes.get_errno()==1 else 0)'`
}

func TestR8EnvironmentOfTheSandboxInit(t *testing.T) {
	need(t)
	out, err := run(t, &tools.Sandbox{Writable: []string{}}, "", "cat /proc/1/environ; echo; env")
	if err != nil || strings.Contains(out, "sk-gateway") || !strings.Contains(out, "PATH=") {
		t.Errorf("environment in the sandbox (%v):\n%s", err, out)
	}
}

// TestR8WritableThroughALinkIsRefused: a writable entry that a symbolic
// link in the working directory takes elsewhere is refused, and one reached
// through a link above every writable place is followed.
func TestR8WritableThroughALinkIsRefused(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"work/docs", "elsewhere", "real/proj"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(root, "work/api"))
	os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "sys"))
	work := filepath.Join(root, "work")
	tests := []struct {
		note, writable, dir string
		bad                 bool
	}{
		{note: "a plain directory", writable: work + "/docs", dir: work},
		{note: "a link in the working directory", writable: work + "/api", dir: work, bad: true},
		{note: "a link in another writable entry", writable: work + "/api", dir: "", bad: true},
		{note: "a link above everything writable", writable: root + "/sys/proj", dir: root + "/sys/proj"},
	}
	for _, tt := range tests {
		ws := []string{tt.writable}
		if tt.note == "a link in another writable entry" {
			ws = append(ws, work)
		}
		a, err := args(&tools.Sandbox{Writable: ws}, tt.dir, []string{"true"}, nil, nil)
		if (err != nil) != tt.bad {
			t.Errorf("%s: err = %v, want refused %v", tt.note, err, tt.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: the refusal does not say why: %v", tt.note, err)
		}
		if tt.note == "a link above everything writable" && !slices.Contains(a, root+"/real/proj") {
			t.Errorf("%s: not bound by its real path: %v", tt.note, a)
		}
	}
}

// TestR8HiddenStaysHiddenWhenAParentIsRenamed: the writable ancestors of a
// hidden directory are mount points, which cannot be renamed.
func TestR8HiddenStaysHiddenWhenAParentIsRenamed(t *testing.T) {
	need(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proj/conf/secret"), 0o755)
	os.WriteFile(filepath.Join(root, "proj/conf/secret/key"), []byte("sk-hidden"), 0o644)
	sb := &tools.Sandbox{Writable: []string{root}, Hidden: []string{root + "/proj/conf/secret"}}
	out, _ := run(t, sb, root, "mv proj/conf proj/moved; mv proj gone; cat proj/moved/secret/key gone/conf/secret/key proj/conf/secret/key")
	if strings.Contains(out, "sk-hidden") {
		t.Fatalf("the hidden file was read:\n%s", out)
	}
	out, _ = run(t, sb, root, "cat proj/moved/secret/key gone/conf/secret/key gone/moved/secret/key")
	if strings.Contains(out, "sk-hidden") {
		t.Errorf("the hidden file was read in the next call:\n%s", out)
	}
}

func TestR8WorkdirUnderTmpStaysWritable(t *testing.T) {
	need(t)
	dir, err := os.MkdirTemp("/tmp", "aimon-gw-wd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if out, err := run(t, &tools.Sandbox{Writable: []string{"/"}}, dir, "touch made"); err != nil {
		t.Fatalf("touch in the working directory: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Error("the command's file is not in the working directory")
	}
	if out, err := run(t, &tools.Sandbox{Writable: []string{}}, dir, "touch made2"); err == nil {
		t.Errorf("with nothing writable the working directory was written: %s", out)
	}
}

func TestR8NoSandboxWithoutBwrap(t *testing.T) {
	// The sentence is made from bwrap's own output: no bwrap is needed.
	var e error = &bwrapError{err: os.ErrPermission, out: "No permissions to create new namespace"}
	if !strings.Contains(e.Error(), "user namespaces") {
		t.Errorf("the sentence does not say what is missing: %v", e)
	}
}

// TestP15ConcealedIsHiddenAndRefused: a secret of the gateway's, given
// relative as a flag may give it, is covered by /dev/null in every sandbox,
// protected from writes, and named by Concealing by its name or by where a
// link to it leads; a neighbour is not.
func TestP15ConcealedIsHiddenAndRefused(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "approval.key")
	if err := os.WriteFile(key, []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	Conceal("approval.key")
	a, err := args(&tools.Sandbox{}, "", []string{"true"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(a, " "), "--ro-bind /dev/null "+resolved(key)) {
		t.Errorf("the sandbox does not cover the concealed key: %v", a)
	}
	for _, tc := range []struct {
		note, path string
		held       bool
	}{
		{"the key by its name", key, true},
		{"the key by where a link leads", "/somewhere/else", true},
		{"a neighbour", filepath.Join(dir, "other"), false},
	} {
		real := key
		if !tc.held {
			real = tc.path
		}
		if got := Concealing(tc.path, real) != ""; got != tc.held {
			t.Errorf("%s: Concealing = %v, want %v", tc.note, got, tc.held)
		}
	}
	if Guarding(key).Holder == "" {
		t.Errorf("the concealed key is not protected from writes")
	}
}
