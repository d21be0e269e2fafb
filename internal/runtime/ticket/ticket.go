// Package ticket seals what the hook decided into the command it hands
// the agent runtime, so that aimon-gw exec runs only that (rule P16): a
// ticket is an HMAC-SHA256 over the exact command, its surface chain,
// working directory, policy directory and revision, whether a person was
// asked, and the protections exec adds, valid once and for a short time.
// Its key lies in the user's state directory, which every sandbox hides
// and no file tool reads (rule R8), so no command can seal one.
package ticket

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

	"aimon.dev/gw/internal/exec/sandbox"
	"aimon.dev/gw/internal/runtime/gateway"
	"aimon.dev/gw/internal/runtime/state"
)

// How long a ticket is valid. Claude Code, Codex and Gemini CLI run an
// allowed command right after the hook answers, so an allow ticket needs
// seconds; minutes leave room for a loaded machine. An asked one waits for
// a person to answer the runtime's prompt, which may take a while, but no
// longer than an approval token (serve's --approval-ttl) lives.
const (
	AllowTTL = 5 * time.Minute
	AskTTL   = 30 * time.Minute
)

// KeyName is the key's file in the state directory.
const KeyName = "exec.key"

// Binding is what a ticket is bound to: everything exec is told.
type Binding struct {
	Command  string
	Chain    []string
	Workdir  string // absolute, cleaned
	Policy   string // the policy directory, absolute
	Revision string
	// Approved says a person was asked before the command runs (an ask
	// decision, which the runtime puts to the person before it runs it).
	Approved bool
	// What exec protects besides the policy: the hook's --cache and
	// decision log, the call's id in it, and the runtime whose files it
	// protects; and the runtime's shell tool the command is decided as
	// ("" for Bash).
	Cache, Protect, Call, Runtime, RuntimeHome, RuntimeProject, Tool string
	// Labels are the session's labels whose flows bound the command's
	// sandbox when the hook decided it (rule P18): exec bounds it by them.
	Labels []string
	// RuntimeEnv are the runtime's variables that move its files, as the
	// hook found them (NAME=PATH, gatefiles.Where.Sealed), and StartedAs
	// the path the runtime started the hook by: exec protects both as the
	// hook did, whatever its own environment says (rule R9).
	RuntimeEnv []string
	StartedAs  string
	// Shadows are where a program would be found on PATH before the
	// gateway the runtime starts by a bare name (sandbox.Shadows): exec
	// runs no command that could put one there (rules R8, R9).
	Shadows []string
	// Timeout is the command's bound in milliseconds, as its call asked
	// (0: Bash's default): exec stops it there (rule R8).
	Timeout int
	// State is the store an approved command is spent in from the
	// policy's limits (rule P19), the hook's --state: "" for the user's
	// state directory, where the ticket is spent, or the fleet's
	// redis:// or rediss:// URL.
	State string
	// LogSync says the hook flushes its decision log's records to the
	// disk (--decision-log-sync), as exec then does with its own there.
	LogSync bool
	// Caller, CallerGroups and CallerClient are who sent the call (the
	// HTTP hook's caller: subject, groups and client), whose count of the
	// policy's limits an approved command is spent from, and under whom
	// exec records it; none for the command hook's, the user's own.
	Caller, CallerClient string
	CallerGroups         []string
	// SpentAtAsk says the approved command was spent from the limits at
	// the ask (the HTTP hook's, which counts in its own memory): exec
	// spends nothing more.
	SpentAtAsk bool
}

// claims is what a ticket says: digests of what it is bound to, its
// expiry and a nonce that makes each ticket one of its own.
type claims struct {
	Command  string `json:"c"`
	Chain    string `json:"s"`
	Workdir  string `json:"w"`
	Policy   string `json:"p"`
	Revision string `json:"r"`
	Approved bool   `json:"a,omitempty"`
	Extra    string `json:"x"`
	Expires  int64  `json:"e"` // Unix seconds
	Nonce    string `json:"n"`
}

// encode writes the claims as encoding/json writes them, which Check
// reads: the same members in the same order, without the reflection a
// hook process built its encoder with for its one ticket (issue 42).
// Every string is one of the ticket's own (base64, a revision), quoted by
// jsontext all the same.
func (c claims) encode() []byte {
	b := make([]byte, 0, 256)
	member := func(name, v string) {
		b = append(append(b, ',', '"'), name...)
		b = append(b, '"', ':')
		b, _ = jsontext.AppendQuote(b, v)
	}
	member("c", c.Command)
	b[0] = '{'
	member("s", c.Chain)
	member("w", c.Workdir)
	member("p", c.Policy)
	member("r", c.Revision)
	if c.Approved {
		b = append(b, `,"a":true`...)
	}
	member("x", c.Extra)
	b = strconv.AppendInt(append(b, `,"e":`...), c.Expires, 10)
	member("n", c.Nonce)
	return append(b, '}')
}

func short(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func (b Binding) claims() claims {
	return claims{Command: short(b.Command), Chain: short(b.Chain...), Workdir: short(filepath.Clean(b.Workdir)),
		Policy: short(filepath.Clean(b.Policy)), Revision: b.Revision, Approved: b.Approved,
		Extra: short(slices.Concat([]string{b.Cache, b.Protect, b.Call, b.Runtime, b.RuntimeHome, b.RuntimeProject, b.Tool, b.StartedAs, strconv.Itoa(b.Timeout), b.State, strconv.FormatBool(b.LogSync), b.Caller, b.CallerClient, strconv.FormatBool(b.SpentAtAsk), strconv.Itoa(len(b.Labels)), strconv.Itoa(len(b.RuntimeEnv)), strconv.Itoa(len(b.CallerGroups))}, b.Labels, b.RuntimeEnv, b.CallerGroups, b.Shadows)...)}
}

// Dir is the state directory that holds the key: the user's
// ~/.local/state/aimon-gw, the home as the password database names it,
// not as the environment does (a command may set HOME or XDG_STATE_HOME
// before it runs exec and point it at a key of its own); for a user whose
// home does not exist (nobody), /var/tmp/aimon-gw-UID.
func Dir() string {
	uid := os.Geteuid()
	if home := passwdHome(uid); filepath.IsAbs(home) {
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			return filepath.Join(home, ".local", "state", "aimon-gw")
		}
	}
	return fmt.Sprintf("/var/tmp/aimon-gw-%d", uid)
}

// passwdHome is the home the password database gives uid ("" for none),
// looked up once a process: the hook conceals the state directory, then
// seals a ticket with the key in it, and each lookup reads and parses
// nsswitch.conf and the whole database.
func passwdHome(uid int) string {
	homes.Lock()
	defer homes.Unlock()
	home, ok := homes.byUID[uid]
	if !ok {
		if home, ok = filesHome(uid, "/etc/nsswitch.conf", "/etc/passwd"); !ok {
			if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
				home = u.HomeDir
			}
		}
		homes.byUID[uid] = home
	}
	return home
}

// filesHome is the home the password file (passwd) gives uid where the
// name service switch (nsswitch) reads that file first ("passwd: files
// ..."), which is then what the C library's lookup answers: read here
// without it, since a lookup through cgo costs a hook some 100 µs. ok is
// false where the C library must answer: another source first (sss,
// ldap, systemd), compat's +/- entries, no such switch file or no line
// for uid in the password file.
func filesHome(uid int, nsswitch, passwd string) (home string, ok bool) {
	conf, err := os.ReadFile(nsswitch)
	if err != nil {
		return "", false
	}
	var sources [][]string
	for line := range strings.Lines(string(conf)) {
		line, _, _ = strings.Cut(line, "#")
		if db, list, found := strings.Cut(line, ":"); found && strings.TrimSpace(db) == "passwd" {
			sources = append(sources, strings.Fields(list))
		}
	}
	// One line, files first, and no action after it (a [SUCCESS=continue]
	// goes on to the next source).
	if len(sources) != 1 || len(sources[0]) == 0 || sources[0][0] != "files" || len(sources[0]) > 1 && strings.HasPrefix(sources[0][1], "[") {
		return "", false
	}
	data, err := os.ReadFile(passwd)
	if err != nil {
		return "", false
	}
	id := strconv.Itoa(uid)
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") {
			return "", false // compat's entries, which the file alone does not answer
		}
		// name:password:UID:GID:GECOS:home:shell
		f := strings.Split(line, ":")
		if len(f) == 7 && f[2] == id {
			return f[5], true
		}
	}
	return "", false
}

var homes = struct {
	sync.Mutex
	byUID map[int]string
}{byUID: map[int]string{}}

// Conceal hides the state directory from every sandbox and every file
// tool of this process (rule R8): a tool that read the key could seal a
// ticket for any command.
func Conceal() string {
	dir := Dir()
	sandbox.Conceal(dir)
	return dir
}

// A Sealer seals tickets; the hook holds one.
type Sealer struct {
	key []byte
	now func() time.Time
}

// NewSealer returns a sealer with the key of the state directory, which it
// makes (0700) and fills (a new random key, 0600) on first use.
func NewSealer() (*Sealer, error) { return newSealer(Conceal()) }

func newSealer(dir string) (*Sealer, error) { return openSealer(dir, true) }

// openSealer is newSealer that, unless it may make them, makes neither
// the directory nor the key.
func openSealer(dir string, mayMake bool) (*Sealer, error) {
	if mayMake {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("the state directory %s cannot be made: %v", dir, err)
		}
	}
	if err := OwnDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, KeyName)
	if _, err := os.Lstat(path); mayMake && errors.Is(err, os.ErrNotExist) {
		if err := create(path); err != nil {
			return nil, fmt.Errorf("the key that seals exec's tickets cannot be made in %s: %v", dir, err)
		}
	}
	key, err := gateway.ReadKey(path, "the key that seals exec's tickets")
	if err != nil {
		return nil, err
	}
	return &Sealer{key: key, now: time.Now}, nil
}

// OwnDir checks that dir is a directory of this user's alone, not a link:
// one another user made (in /var/tmp) could be read or replaced by them.
func OwnDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the state directory %s cannot be read: %v", dir, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("the state directory %s is not a directory (a symbolic link?); remove it, and the hook makes it again", dir)
	case st != nil && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("the state directory %s is owned by uid %d, not by the hook's user (uid %d), who could read or replace its key; remove it, and the hook makes it again", dir, st.Uid, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("the state directory %s may be read or written by others (mode %04o); make it 0700", dir, fi.Mode().Perm())
	}
	return nil
}

// create writes a new random key at path, whole or not at all: written
// under a name of its own, then renamed into place unless a key is there
// already (another hook made it first), so no reader sees half a key and
// the key never has a second name.
func create(path string) error {
	raw := make([]byte, gateway.MinKeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".exec.key-*") // 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(hex.EncodeToString(raw) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := unix.Renameat2(unix.AT_FDCWD, f.Name(), unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

func mac(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// SealOnFirstUse seals with the key of the user's state directory, made
// on the first call that needs one (rule P16); a failure is tried again
// on the next call. Safe for concurrent use: the HTTP hook seals from
// many requests at once.
func SealOnFirstUse() func(Binding) (string, error) { return sealOnFirstUse(NewSealer) }

// SealOnFirstUseIn is SealOnFirstUse with the state directory dir that
// the caller's Conceal returned: a hook conceals it as it reads its
// input, and its paths are not followed twice a call.
func SealOnFirstUseIn(dir string) func(Binding) (string, error) {
	return sealOnFirstUse(func() (*Sealer, error) { return newSealer(dir) })
}

// SealAhead is SealOnFirstUseIn(dir) that begins now, in the background,
// what its first seal waits for: the key read where it is there already,
// and crypto/rand's first read (which maps its state). A hook begins it
// as it reads its input, so that both are done while its policy is
// checked. A key not there yet, or one that cannot be read ahead, is made
// or read by the first seal, as SealOnFirstUseIn does, with its sentence.
func SealAhead(dir string) func(Binding) (string, error) {
	seal, _ := sealAhead(dir)
	return seal
}

// sealAhead is SealAhead, and done, closed once the work ahead is.
func sealAhead(dir string) (seal func(Binding) (string, error), done <-chan struct{}) {
	ahead, finished := make(chan *Sealer, 1), make(chan struct{})
	go func() {
		defer close(finished)
		var nonce [12]byte
		rand.Read(nonce[:])
		var s *Sealer
		// Only read, and only a regular file: no key is made for a call
		// that seals nothing.
		if fi, err := os.Lstat(filepath.Join(dir, KeyName)); err == nil && fi.Mode().IsRegular() {
			s, _ = openSealer(dir, false)
		}
		ahead <- s
	}()
	return sealOnFirstUse(func() (*Sealer, error) {
		// Never waited for: what is not done ahead is done here.
		select {
		case s := <-ahead:
			if s != nil {
				return s, nil
			}
		default:
		}
		return newSealer(dir)
	}), finished
}

func sealOnFirstUse(newSealer func() (*Sealer, error)) func(Binding) (string, error) {
	var (
		mu sync.Mutex
		s  *Sealer
	)
	return func(b Binding) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if s == nil {
			var err error
			if s, err = newSealer(); err != nil {
				return "", err
			}
		}
		return s.Seal(b), nil
	}
}

// Seal returns the ticket for b, valid once for AllowTTL (AskTTL when a
// person is asked).
func (s *Sealer) Seal(b Binding) string {
	ttl := AllowTTL
	if b.Approved {
		ttl = AskTTL
	}
	c := b.claims()
	c.Expires = s.now().Add(ttl).Unix()
	nonce := make([]byte, 12)
	rand.Read(nonce)
	c.Nonce = base64.RawURLEncoding.EncodeToString(nonce)
	p := base64.RawURLEncoding.EncodeToString(c.encode())
	return p + "." + mac(s.key, p)
}

// A Checker checks and spends tickets; exec holds one.
type Checker struct {
	key   []byte
	store state.Store
	now   func() time.Time
}

// NewChecker returns a checker with the key of the state directory, which
// it never makes: a ticket is only good where the hook has sealed one.
// Inside a sandbox the directory is hidden, so exec there finds no key.
func NewChecker() (*Checker, error) { return newChecker(Conceal()) }

func newChecker(dir string) (*Checker, error) {
	key, err := gateway.ReadKey(filepath.Join(dir, KeyName), "the key that checks exec's tickets")
	if err != nil {
		return nil, err
	}
	if err := OwnDir(dir); err != nil {
		return nil, err
	}
	st, err := state.Open("", dir)
	if err != nil {
		return nil, err
	}
	return &Checker{key: key, store: st, now: time.Now}, nil
}

// Close closes the store tickets are spent in.
func (c *Checker) Close() error { return c.store.Close() }

// A Ticket is one whose seal and binding were checked, its revision and
// spend still to come.
type Ticket struct {
	c        *Checker
	sig      string
	claims   claims
	Approved bool
}

// Check checks that tok was sealed with the key for b (b.Revision aside:
// Spend checks it once the policy is loaded). An error is a sentence that
// says what differs.
func (c *Checker) Check(tok string, b Binding) (*Ticket, error) {
	p, sig, ok := strings.Cut(tok, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(mac(c.key, p))) {
		return nil, errors.New("its ticket was not sealed by this user's hook (it was altered, or sealed with another key)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(p)
	var got claims
	if err != nil || json.Unmarshal(raw, &got) != nil {
		return nil, errors.New("its ticket cannot be read")
	}
	want := b.claims()
	switch {
	case c.now().Unix() >= got.Expires:
		return nil, fmt.Errorf("its ticket expired at %s", time.Unix(got.Expires, 0).UTC().Format(time.RFC3339))
	case got.Command != want.Command:
		return nil, errors.New("its ticket was sealed for another command")
	case got.Chain != want.Chain:
		return nil, errors.New("its ticket was sealed for another surface chain (--surface)")
	case got.Workdir != want.Workdir:
		return nil, errors.New("its ticket was sealed for another working directory (--workdir)")
	case got.Policy != want.Policy:
		return nil, errors.New("its ticket was sealed for another policy directory (--policy)")
	case got.Approved != want.Approved && want.Approved:
		return nil, errors.New("it says --approved, but its ticket was sealed for a command no person was asked about, and --approved alone approves nothing")
	case got.Approved != want.Approved:
		return nil, errors.New("its ticket was sealed for a command a person approved, and exec was not told so (--approved)")
	case got.Extra != want.Extra:
		return nil, errors.New("its ticket was sealed with other protections (--cache, --protect, --call-id, --runtime, --runtime-home, --runtime-project, --runtime-env, --started-as, --tool, --timeout, --labels, --state, --decision-log-sync, --caller, --caller-group, --caller-client or --limits-spent)")
	}
	return &Ticket{c: c, sig: sig, claims: got, Approved: got.Approved}, nil
}

// Limits is where the hook counts the policy's limits in the state
// directory, the store tickets are spent in (rule P19).
func (t *Ticket) Limits() state.Limiter {
	l, _ := t.c.store.(state.Limiter)
	return l
}

// Spend checks the ticket's policy revision against the one loaded and
// spends it: a ticket runs one command once (rule R10's one-use store).
func (t *Ticket) Spend(ctx context.Context, revision string) error {
	if t.claims.Revision != revision {
		return fmt.Errorf("its ticket was sealed under revision %s of the policy, and the policy is now at %s", t.claims.Revision, revision)
	}
	first, err := t.c.store.Spend(ctx, "exec-ticket:"+t.sig, time.Unix(t.claims.Expires, 0))
	switch {
	case err != nil:
		return fmt.Errorf("its ticket cannot be recorded as used (%v)", err)
	case !first:
		return errors.New("its ticket was already used, and a ticket runs its command once")
	}
	return nil
}

// Sessions is the store of the hooks' sessions (rule P18): the local store
// of the state directory, where tickets are spent, hidden from every
// sandbox and file tool as the key is (rules R8, R9), so no tool can
// write or reset what a session has read.
func Sessions() (state.Sessions, error) {
	dir := Conceal()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the state directory %s cannot be made: %v", dir, err)
	}
	if err := OwnDir(dir); err != nil {
		return nil, err
	}
	st, err := state.Open("", dir)
	if err != nil {
		return nil, err
	}
	return state.SessionsOf(st), nil
}
