package ticket

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stateDir is a state directory not yet made, as on first use.
func stateDir(t *testing.T) string { return filepath.Join(t.TempDir(), "aimon-gw") }

// checker is exec's checker of the key in dir, closed when t ends.
func checker(t *testing.T, dir string) *Checker {
	t.Helper()
	c, err := newChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func binding() Binding {
	return Binding{Command: "git status", Chain: []string{"agent"}, Workdir: "/w", Policy: "/p", Revision: "r1",
		Runtime: "claude-code", RuntimeHome: "/h", RuntimeProject: "/w"}
}

// TestP16TicketHoldsOnlyWhatItWasSealedFor: a ticket checks for exactly
// the binding it was sealed for, and any one difference is refused with a
// sentence naming it; it is spent once, under its own revision only.
func TestP16TicketHoldsOnlyWhatItWasSealedFor(t *testing.T) {
	dir := stateDir(t)
	s, err := newSealer(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := checker(t, dir)
	tok := s.Seal(binding())
	for _, tc := range []struct {
		note string
		edit func(*Binding)
		want string
	}{
		{"command", func(b *Binding) { b.Command = "git status " }, "another command"},
		{"chain", func(b *Binding) { b.Chain = []string{"agent", "subagent:x"} }, "another surface chain"},
		{"chain split", func(b *Binding) { b.Chain = []string{"age", "nt"} }, "another surface chain"},
		{"workdir", func(b *Binding) { b.Workdir = "/w2" }, "another working directory"},
		{"policy", func(b *Binding) { b.Policy = "/w/agent" }, "another policy directory"},
		{"approved", func(b *Binding) { b.Approved = true }, "--approved alone approves nothing"},
		{"protections", func(b *Binding) { b.RuntimeProject = "" }, "other protections"},
	} {
		b := binding()
		tc.edit(&b)
		if _, err := c.Check(tok, b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.note, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", tok + "x", "e30." + strings.SplitN(tok, ".", 2)[1]} {
		if _, err := c.Check(bad, binding()); err == nil || !strings.Contains(err.Error(), "not sealed by this user's hook") {
			t.Errorf("a forged ticket %q: %v", bad, err)
		}
	}
	other, _ := newSealer(stateDir(t))
	if _, err := c.Check(other.Seal(binding()), binding()); err == nil {
		t.Error("a ticket sealed with another key was accepted")
	}
	tk, err := c.Check(tok, binding())
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Spend(context.Background(), "r2"); err == nil || !strings.Contains(err.Error(), "revision r1") {
		t.Errorf("another revision: %v", err)
	}
	if err := tk.Spend(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	tk, _ = c.Check(tok, binding())
	if err := tk.Spend(context.Background(), "r1"); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a reused ticket: %v", err)
	}
	// A second checker, as a second exec, shares the spend.
	c2, _ := newChecker(dir)
	defer c2.Close()
	if tk, err := c2.Check(tok, binding()); err != nil || tk.Spend(context.Background(), "r1") == nil {
		t.Error("a second process ran a spent ticket")
	}
}

// TestP16TicketExpires: an allow ticket lives AllowTTL, an asked one
// AskTTL; past it, it is refused.
func TestP16TicketExpires(t *testing.T) {
	dir := stateDir(t)
	s, _ := newSealer(dir)
	c, _ := newChecker(dir)
	defer c.Close()
	now := time.Now()
	asked := binding()
	asked.Approved = true
	allowTok, askTok := s.Seal(binding()), s.Seal(asked)
	c.now = func() time.Time { return now.Add(AllowTTL + time.Second) }
	if _, err := c.Check(allowTok, binding()); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an allow ticket past AllowTTL: %v", err)
	}
	if _, err := c.Check(askTok, asked); err != nil {
		t.Errorf("an asked ticket within AskTTL: %v", err)
	}
	c.now = func() time.Time { return now.Add(AskTTL + time.Second) }
	if _, err := c.Check(askTok, asked); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an asked ticket past AskTTL: %v", err)
	}
}

// TestR8TicketKeyIsMadeOnceAndOwnersAlone: hooks started together make
// one key between them, 0600, with one name; exec never makes one; a key
// with a second name, an open mode, or a state directory open to others
// is refused.
func TestR8TicketKeyIsMadeOnceAndOwnersAlone(t *testing.T) {
	dir := stateDir(t)
	if _, err := newChecker(dir); err == nil || !strings.Contains(err.Error(), "cannot read") {
		t.Errorf("exec without a key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyName)); err == nil {
		t.Error("the checker made a key")
	}
	var wg sync.WaitGroup
	toks := make([]string, 16)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := newSealer(dir)
			if err != nil {
				t.Error(err)
				return
			}
			toks[i] = s.Seal(binding())
		}()
	}
	wg.Wait()
	c, err := newChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tok := range toks {
		if _, err := c.Check(tok, binding()); err != nil {
			t.Errorf("hooks started together made two keys: %v", err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 { // the key and spent/
		t.Errorf("left in the state directory: %v", ents)
	}
	key := filepath.Join(dir, KeyName)
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Errorf("the key's mode: %v", fi.Mode())
	}
	os.Link(key, filepath.Join(t.TempDir(), "other"))
	if _, err := newChecker(dir); err == nil || !strings.Contains(err.Error(), "names") {
		t.Errorf("a key with a second name: %v", err)
	}
	open := stateDir(t)
	newSealer(open)
	os.Chmod(filepath.Join(open, KeyName), 0o644)
	if _, err := newSealer(open); err == nil || !strings.Contains(err.Error(), "mode") {
		t.Errorf("a key open to others: %v", err)
	}
	os.Chmod(open, 0o755)
	if _, err := newSealer(open); err == nil || !strings.Contains(err.Error(), "make it 0700") {
		t.Errorf("a state directory open to others: %v", err)
	}
}

// TestR8StateDirHomeIsThePasswordDatabases: the home that names the state
// directory is read from the password file only where the name service
// reads that file first, and is then the C library's answer; anywhere
// else the C library is asked (rule R8: the key's directory is the
// password database's, not one a command could point at).
func TestR8StateDirHomeIsThePasswordDatabases(t *testing.T) {
	for _, uid := range []int{os.Geteuid(), 0, 65534} {
		u, err := user.LookupId(strconv.Itoa(uid))
		home, ok := filesHome(uid, "/etc/nsswitch.conf", "/etc/passwd")
		if ok && (err != nil || home != u.HomeDir) {
			t.Errorf("uid %d: the password file says %q, the C library %v, %v", uid, home, u, err)
		}
	}
	dir := t.TempDir()
	file := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passwd := file("passwd", "root:x:0:0:root:/root:/bin/bash\nbad line\nlong:x:12345:1:l:/home/long:/bin/sh\nu:x:1234:1234:U,,,:/home/u:/bin/sh\nsecond:x:1234:1:s:/home/second:/bin/sh\n")
	for _, tc := range []struct {
		note, nsswitch, passwd string
		uid                    int
		home                   string // "" where the C library answers
	}{
		{"files first", "# passwd: sss\npasswd:  files systemd\ngroup: files\n", passwd, 1234, "/home/u"},
		{"files alone", "passwd: files", passwd, 0, "/root"},
		{"no entry for the uid", "passwd: files systemd\n", passwd, 4321, ""},
		{"another source first", "passwd: sss files\n", passwd, 1234, ""},
		{"compat", "passwd: compat\n", passwd, 1234, ""},
		{"an action after files", "passwd: files [SUCCESS=continue] ldap\n", passwd, 1234, ""},
		{"two passwd lines", "passwd: files\npasswd: ldap\n", passwd, 1234, ""},
		{"no passwd line", "group: files\n", passwd, 1234, ""},
		{"no switch file", "", passwd, 1234, ""},
		{"compat's entries", "passwd: files\n", file("compat", "+@admins::::::\nu:x:1234:1234:U:/home/u:/bin/sh\n"), 1234, ""},
		{"no password file", "passwd: files\n", filepath.Join(dir, "none"), 1234, ""},
	} {
		nss := filepath.Join(dir, "none")
		if tc.nsswitch != "" {
			nss = file("nsswitch.conf", tc.nsswitch)
		}
		home, ok := filesHome(tc.uid, nss, tc.passwd)
		if ok != (tc.home != "") || home != tc.home {
			t.Errorf("%s: %q, %v; want %q", tc.note, home, ok, tc.home)
		}
	}
}

// TestP16SealOnFirstUseInSealsWithItsDirsKey: the hook's sealer uses the
// state directory it was given, made with its key on the first seal; a
// directory that cannot be made refuses the seal, and the next is tried
// again.
func TestP16SealOnFirstUseInSealsWithItsDirsKey(t *testing.T) {
	dir := stateDir(t)
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the directory belongs
		t.Fatal(err)
	}
	seal := SealOnFirstUseIn(dir)
	if tok, err := seal(binding()); err == nil {
		t.Fatalf("sealed %q with no state directory to keep the key in", tok)
	}
	os.Remove(dir)
	tok, err := seal(binding())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checker(t, dir).Check(tok, binding()); err != nil {
		t.Errorf("the ticket does not check under its directory's key: %v", err)
	}
}

// TestP16SealAheadReadsOnlyAKeyThereAlready: the hook's sealer begun
// ahead reads a key that is there and seals with it; where none is, it
// makes none until it seals (a call it does not seal leaves no key), and
// a key that is not a regular file (a FIFO) is not opened ahead, which
// would wait.
func TestP16SealAheadReadsOnlyAKeyThereAlready(t *testing.T) {
	dir := stateDir(t)
	seal, done := sealAhead(dir)
	<-done
	if _, err := os.Lstat(dir); err == nil {
		t.Fatal("the sealer begun ahead made the state directory before it sealed")
	}
	tok, err := seal(binding())
	if err != nil {
		t.Fatal(err)
	}
	c := checker(t, dir)
	if _, err := c.Check(tok, binding()); err != nil {
		t.Errorf("the key made by the first seal: %v", err)
	}
	seal, done = sealAhead(dir)
	<-done
	tok, err = seal(binding())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Check(tok, binding()); err != nil {
		t.Errorf("the key read ahead: %v", err)
	}
	fifo := stateDir(t)
	os.MkdirAll(fifo, 0o700)
	if err := syscall.Mkfifo(filepath.Join(fifo, KeyName), 0o600); err != nil {
		t.Fatal(err)
	}
	_, done = sealAhead(fifo)
	<-done // it returns: the FIFO is not opened
}
